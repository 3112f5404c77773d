"""``steeple migrate-store``: move a stopped SQLite appliance's database into PostgreSQL.

An offline copy (docs/scale-out.md, "Moving from SQLite to PostgreSQL"): every id, cursor,
secret, run, attempt and event number is kept, so idempotency keys, API keys, signing
secrets and event cursors mean the same after the move. It refuses, changing nothing,
unless:

- the SQLite appliance is stopped (its lock file is free; the command holds the lock for
  the copy, so the appliance cannot start meanwhile);
- the SQLite file is at this Steeple's schema version (``steeple migrate`` first);
- the target database holds no rows (an empty database, or one with the schema only).

The copy itself is one PostgreSQL transaction that verifies row counts and checksums
before it commits (:mod:`appliance.store.infra.postgres.transfer`). ``dry_run`` checks and counts,
and writes nothing. The SQLite file is left as it was: it is the rollback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from appliance.errors import ConfigError, StoreError
from appliance.settings.model import DB_FILENAME
from appliance.store.infra.database import Database
from appliance.store.infra.lockfile import LockFile
from appliance.store.infra.migrate import current_version, migrations
from appliance.store.infra.postgres.urls import is_postgres_url, redacted

NEEDS_PSYCOPG = "a postgresql:// database needs psycopg: pip install 'steeple[postgres]' ({})"


@dataclass(frozen=True, slots=True, kw_only=True)
class TableReport:
    name: str
    rows: int  # in the SQLite file
    copied: int | None  # in PostgreSQL after the copy; None in a dry run
    checksum: str | None  # sha256 of its key columns, equal on both sides; None: unchecked


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationReport:
    source: Path
    target: str  # the URL without its password
    schema_version: int
    dry_run: bool
    tables: tuple[TableReport, ...]

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def parse_source(text: str) -> Path:
    """``sqlite:PATH`` (a database file, or the data directory holding steeple.db)."""
    if not text.startswith("sqlite:"):
        raise ConfigError("--from", "expected sqlite:PATH, the steeple.db of the stopped appliance")
    path = Path(text.removeprefix("sqlite:").removeprefix("//"))
    return path / DB_FILENAME if path.is_dir() else path


def parse_target(text: str) -> str:
    """A ``postgresql://`` URL libpq accepts. Never echoes it (it may hold a password)."""
    if not is_postgres_url(text):
        raise ConfigError("--to", "expected a postgresql://USER@HOST:PORT/DATABASE URL")
    try:
        import psycopg
    except ImportError as exc:
        raise StoreError(NEEDS_PSYCOPG.format(exc)) from exc
    try:
        psycopg.conninfo.conninfo_to_dict(text)
    except psycopg.Error as exc:
        raise ConfigError(
            "--to", f"not a usable PostgreSQL URL ({_scrub(str(exc), text)})"
        ) from exc
    return text


def migrate_store(source: Path, target_url: str, *, dry_run: bool) -> MigrationReport:
    """Copy the SQLite store at ``source`` into the empty PostgreSQL database at
    ``target_url`` (or, with ``dry_run``, check and count only). Errors are one line and
    never hold the URL's password."""
    try:
        return _migrate(source, target_url, dry_run=dry_run)
    except StoreError as exc:
        raise type(exc)(_scrub(str(exc), target_url)) from exc


def _migrate(source: Path, url: str, *, dry_run: bool) -> MigrationReport:
    if not source.is_file():
        raise ConfigError(
            "--from", f"{source} is not a file: give the stopped appliance's steeple.db"
        )
    try:
        from appliance.store.infra.postgres import transfer
    except ImportError as exc:
        raise StoreError(NEEDS_PSYCOPG.format(exc)) from exc
    shown = shown_url(url)
    with LockFile(source.with_name(source.name + ".lock")):
        lite = Database.open(source, migrate_schema=False)  # and quick_check: copy no damage
        try:
            version = _check_versions(lite, source, postgres=transfer.schema_version())
            transfer.check_target(url, shown=shown, version=version)
            if dry_run:
                tables = [
                    TableReport(name=n, rows=r, copied=None, checksum=None)
                    for n, r in transfer.count_source(lite).items()
                ]
            else:
                tables = [
                    TableReport(
                        name=c.name, rows=c.source_rows, copied=c.target_rows, checksum=c.checksum
                    )
                    for c in transfer.copy_to(lite, url, shown=shown)
                ]
        finally:
            lite.close()
    return MigrationReport(
        source=source, target=shown, schema_version=version, dry_run=dry_run, tables=tuple(tables)
    )


def _check_versions(lite: Database, source: Path, *, postgres: int) -> int:
    """The source's schema version, refused unless it is this Steeple's (and this
    Steeple's PostgreSQL schema has the same version)."""
    version = lite.read_now(current_version)
    latest = len(migrations())
    if version < latest:
        raise StoreError(
            f"{source} is at schema version {version}, this Steeple's is {latest}: migrate it"
            f" first with `steeple migrate --data-dir {source.parent}` (the appliance stopped)"
        )
    if version > latest:
        raise StoreError(
            f"{source} is at schema version {version}, newer than this Steeple's ({latest}):"
            " run migrate-store with the Steeple that wrote it"
        )
    if postgres != latest:
        raise StoreError(
            f"this Steeple's PostgreSQL schema (version {postgres}) is not its SQLite schema"
            f" (version {latest}): install a released Steeple"
        )
    return version


def shown_url(url: str) -> str:
    """``url`` without its password (what every message names)."""
    try:
        return redacted(url)
    except ValueError:  # a URL that cannot be parsed is named, not shown
        return "postgresql://…"


def _scrub(text: str, url: str) -> str:
    """``text`` on one line, with the URL's password (as given, and decoded) masked."""
    try:
        import psycopg

        password = str(psycopg.conninfo.conninfo_to_dict(url).get("password") or "")
    except Exception:  # noqa: BLE001 - unparsable: mask the URL's userinfo part instead
        password = url.partition("://")[2].partition("@")[0].partition(":")[2]
    line = " ".join(text.split())
    for form in {password, quote(password, safe="")} - {""}:
        line = line.replace(form, "***")
    return line


def render(report: MigrationReport) -> str:
    """The per-table report, then the cut-over checklist."""
    width = max([len("table"), *(len(t.name) for t in report.tables)])
    lines = [_headline(report), f"{'table':<{width}}  {'rows':>9}  {'copied':>9}  checksum"]
    for t in report.tables:
        copied = "-" if t.copied is None else str(t.copied)
        checksum = "-" if t.checksum is None else t.checksum[:16]
        lines.append(f"{t.name:<{width}}  {t.rows:>9}  {copied:>9}  {checksum}")
    return "\n".join([*lines, "", checklist(report)])


def _headline(report: MigrationReport) -> str:
    what = f"{report.source} (schema {report.schema_version}) into {report.target}"
    if report.dry_run:
        return (
            f"dry run: would copy {report.rows} rows in {len(report.tables)} tables from {what};"
            " the target is empty; nothing was written"
        )
    return (
        f"copied {report.rows} rows in {len(report.tables)} tables from {what}; row counts"
        " and checksums verified"
    )


def checklist(report: MigrationReport) -> str:
    source, target = report.source, report.target
    return f"""\
Cut-over checklist{" (after the copy)" if report.dry_run else ""}:
 1. Keep the SQLite appliance stopped, and never start it again beside the replicas on
      {source}
    or both plan and deliver the same occurrences.
 2. Start each replica with the settings the appliance had (steeple.toml), and
      steeple serve --database {target}
    (or STEEPLE_DATABASE); give the password by ~/.pgpass or PGPASSWORD, not in the URL.
 3. Check that each replica's /readyz answers 200 and that the schedules, runs and
    events copied here are listed: idempotency keys, API keys and signing secrets are
    unchanged.
 4. Keep the SQLite file as the rollback (this command did not change it): stop the
    replicas, then
      steeple serve --data-dir {source.parent}
    Occurrences delivered on PostgreSQL meanwhile are then delivered again, with the
    same X-Idempotency-Key.
 5. Back up PostgreSQL from now on (pg_dump, or continuous archiving): `steeple backup`
    copies SQLite files only."""
