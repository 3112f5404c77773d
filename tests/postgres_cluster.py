"""A throwaway PostgreSQL server for tests: ``initdb`` into a fresh directory, ``pg_ctl
start`` on a free loopback port, trust authentication for the ``postgres`` superuser,
stopped (and its files removed) by :meth:`Cluster.stop`. No external service, no mocks.

PostgreSQL refuses to run as root: when the tests run as root the server runs as the
``postgres`` OS user (``runuser -u postgres --``), in a directory of its own under the
system temporary directory, since pytest's own temporary directories are private to root.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = ("initdb", "pg_ctl", "postgres")
# Where Debian's `postgresql` package puts the server binaries (one directory per major).
DEBIAN_BINS = Path("/usr/lib/postgresql")
BIN_ENV = "STEEPLE_POSTGRES_BIN"  # a directory holding initdb, pg_ctl and postgres
# How a test skipped for want of PostgreSQL says so (tests/conftest.py lists them all).
SKIP_PREFIX = "PostgreSQL unavailable: "
SERVER_USER = "postgres"
SUPERUSER = "postgres"
MAX_CONNECTIONS = 200
_SOCKET_PATH_MAX = 100  # sockaddr_un holds 107 bytes; PostgreSQL appends /.s.PGSQL.NNNNN
_DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def find_postgres_bin() -> tuple[Path | None, str]:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, and ``""``; or
    ``None`` and the reason none was found (naming what is missing and how to get it).

    Looked for in ``$STEEPLE_POSTGRES_BIN``, beside the ``pg_ctl`` on ``PATH`` (through
    its symlink too), then in ``/usr/lib/postgresql/*/bin``, highest major first."""
    if os.environ.get(BIN_ENV):
        chosen = Path(os.environ[BIN_ENV])
        missing = _missing_tools(chosen)
        if missing:
            return None, f"${BIN_ENV}={chosen} has no {', '.join(missing)}"
        return chosen, ""
    for candidate in _candidates():
        if not _missing_tools(candidate):
            return candidate, ""
    return None, (
        f"no PostgreSQL server binaries ({', '.join(TOOLS)}): none on PATH and none in"
        f" {DEBIAN_BINS}/*/bin (install Debian's `postgresql` package, or set {BIN_ENV})"
    )


def _candidates() -> list[Path]:
    found: list[Path] = []
    on_path = shutil.which("pg_ctl")
    if on_path:
        found += [Path(on_path).parent, Path(on_path).resolve().parent]
    if DEBIAN_BINS.is_dir():
        majors = [p for p in DEBIAN_BINS.iterdir() if p.name.isdigit()]
        found += [p / "bin" for p in sorted(majors, key=lambda p: int(p.name), reverse=True)]
    return found


def _missing_tools(directory: Path) -> list[str]:
    return [tool for tool in TOOLS if not os.access(directory / tool, os.X_OK)]


def runs_as_root_problem() -> str:
    """Why the server cannot be run from this (root) process, or ``""``."""
    if os.geteuid() != 0:
        return ""
    if shutil.which("runuser") is None:
        return "running as root and no `runuser` to start PostgreSQL as another user"
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        return f"running as root and no `{SERVER_USER}` OS user to run PostgreSQL as"
    return ""


def unavailable() -> str:
    """What is missing to run the PostgreSQL tests here, or ``""`` when nothing is."""
    bin_dir, reason = find_postgres_bin()
    if bin_dir is None:
        return reason
    problem = runs_as_root_problem()
    if problem:
        return problem
    missing = [name for name in ("psycopg", "psycopg_pool") if not _importable(name)]
    if missing:
        return f"{' and '.join(missing)} not installed (pip install 'steeple[postgres]')"
    return ""


def describe() -> str:
    """One line for a test run's header: where the server binaries are, or what is missing."""
    problem = unavailable()
    if problem:
        return f"MISSING, the tests marked `postgres` will skip (listed at the end): {problem}"
    bin_dir, _ = find_postgres_bin()
    return f"server binaries in {bin_dir}"


def _importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(slots=True)
class Cluster:
    """A running server: TCP on ``host:port``, its unix socket in ``socket_dir``."""

    bin_dir: Path
    root: Path  # holds data/, the socket and the log; removed by stop()
    host: str
    port: int
    socket_dir: Path
    as_user: str | None  # the OS user the server runs as, when we are root
    _databases: int = field(default=0)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq URL for the superuser (trust authentication: no password)."""
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/{dbname}"

    @property
    def superuser_dsn(self) -> str:
        return self.dsn()

    def create_database(self, name: str, template: str | None = None) -> str:
        """``CREATE DATABASE name [TEMPLATE template]``; its DSN. ``template`` lets a
        test clone an already migrated database instead of migrating again."""
        import psycopg
        from psycopg import sql

        for given in (name, *([template] if template else [])):
            if not _DB_NAME.match(given):
                raise ValueError(f"database name {given!r}: want [a-z_][a-z0-9_]*, ≤ 63")
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            statement = sql.SQL("{} TEMPLATE {}").format(statement, sql.Identifier(template))
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(statement)
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """``DROP DATABASE IF EXISTS name WITH (FORCE)`` (its sessions are ended)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def next_database_name(self, hint: str) -> str:
        """A fresh database name from a test's name (lower-cased, sanitised, numbered)."""
        self._databases += 1
        stem = re.sub(r"[^a-z0-9_]+", "_", hint.lower()).strip("_")[:40] or "db"
        return f"t{self._databases}_{stem}"

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``pg_ctl -D data args…`` as the server's user."""
        return _run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args],
            as_user=self.as_user,
            check=check,
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its files."""
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self.pg_ctl("stop", "-m", "fast", "-w", "-t", "60", check=False)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start_cluster(base_dir: Path, *, bin_dir: Path | None = None) -> Cluster:
    """initdb a new cluster under ``base_dir`` (or, as root, a private temporary directory
    the ``postgres`` user owns) and start it; raises RuntimeError naming what failed."""
    if bin_dir is None:
        bin_dir, reason = find_postgres_bin()
        if bin_dir is None:
            raise RuntimeError(reason)
    problem = runs_as_root_problem()
    if problem:
        raise RuntimeError(problem)
    as_user = SERVER_USER if os.geteuid() == 0 else None
    root = _cluster_root(base_dir, as_user)
    try:
        _initdb(bin_dir, root, as_user)
        return _start(bin_dir, root, as_user)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _cluster_root(base_dir: Path, as_user: str | None) -> Path:
    if as_user is None and len(str(base_dir)) < _SOCKET_PATH_MAX - 40:
        base_dir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="pg-", dir=base_dir))
    root = Path(tempfile.mkdtemp(prefix="steeple-pg-"))
    if as_user is not None:
        entry = pwd.getpwnam(as_user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    return root


def _initdb(bin_dir: Path, root: Path, as_user: str | None) -> None:
    command = [str(bin_dir / "initdb"), "-D", str(root / "data"), "--username", SUPERUSER]
    command += ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"]
    _run(command, as_user=as_user)
    settings = {
        "listen_addresses": "'127.0.0.1'",
        "unix_socket_directories": f"'{root}'",
        "max_connections": str(MAX_CONNECTIONS),
        "logging_collector": "off",
        "timezone": "'UTC'",
        # The tests kill and restart the server's processes, never the machine: a commit
        # is in the kernel's page cache before it is acknowledged whatever this says, so
        # it survives them. Flushing to the disk only guards against the machine going
        # down, and costs each copy of the template and each commit of the suite.
        # (bench/pgserver.py, which measures, keeps fsync on.)
        "fsync": "off",
    }
    conf = root / "data" / "postgresql.conf"
    lines = "".join(f"{name} = {value}\n" for name, value in settings.items())
    _append_as(conf, f"\n# tests/postgres_cluster.py\n{lines}", as_user)


def _start(bin_dir: Path, root: Path, as_user: str | None) -> Cluster:
    last = ""
    for _ in range(3):  # a free port can be taken between the probe and the bind
        port = free_port()
        cluster = Cluster(bin_dir, root, "127.0.0.1", port, root, as_user)
        started = cluster.pg_ctl(
            "start", "-w", "-t", "60", "-l", str(cluster.log_file), "-o", f"-p {port}", check=False
        )
        if started.returncode == 0:
            return cluster
        last = _tail(cluster.log_file) or started.stderr
        if "could not bind" not in last and "already in use" not in last:
            break
    raise RuntimeError(f"pg_ctl start failed: {last.strip()}")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _append_as(path: Path, text: str, as_user: str | None) -> None:
    stat = path.stat()
    with path.open("a", encoding="utf-8") as out:
        out.write(text)
    if as_user is not None:
        os.chown(path, stat.st_uid, stat.st_gid)


def _run(
    command: Sequence[str], *, as_user: str | None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    full = ["runuser", "-u", as_user, "--", *command] if as_user else list(command)
    done = subprocess.run(full, capture_output=True, text=True, check=False, timeout=120)
    if check and done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(full)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}"
        )
    return done
