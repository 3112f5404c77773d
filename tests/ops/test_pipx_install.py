"""The install path an operator takes, proven: build the wheel, ``pipx install`` it into
an isolated PIPX_HOME (run from outside the source tree), then ``steeple --version``,
``init``, ``tenant create``, ``serve``, and one signed delivery received."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance import __version__
from appliance.core.signing import verify
from tests.e2e.harness import Receiver
from tests.ops.processes import Served

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
DATA_SUFFIXES = {".sql", ".html", ".css", ".js", ".svg", ".png", ".ico", ".json", ".woff2"}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def run(*argv: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done


def test_pipx_install_then_serve_and_deliver(tmp_path: Path, receiver: Receiver) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("STEEPLE_", "PYTHON", "PIPX_", "VIRTUAL_ENV"))
    }
    env |= {
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    run(
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--outdir",
        tmp_path / "dist",
        ROOT,
        cwd=outside,
        env=env,
    )
    (wheel,) = (tmp_path / "dist").glob("steeple-*.whl")
    packaged = set(zipfile.ZipFile(wheel).namelist())
    data = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "appliance").rglob("*")
        if p.suffix in DATA_SUFFIXES and "__pycache__" not in p.parts
    }
    assert any(name.endswith(".sql") for name in data) and data <= packaged  # migrations, web/
    run(sys.executable, "-m", "pipx", "install", wheel, cwd=outside, env=env)
    steeple = tmp_path / "bin" / "steeple"
    assert (
        run(steeple, "--version", cwd=outside, env=env).stdout.strip() == f"steeple {__version__}"
    )

    data_dir = tmp_path / "data"
    run(
        steeple,
        "init",
        "--data-dir",
        data_dir,
        "--allow-target",
        "127.0.0.0/8",
        cwd=outside,
        env=env,
    )
    tenant = json.loads(
        run(
            steeple, "tenant", "create", "acme", "--data-dir", data_dir, cwd=outside, env=env
        ).stdout
    )
    served = Served.command(
        [str(steeple), "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0"], env=env
    )
    try:
        line = served.wait_for_line("listening on", timeout=60)
        base = re.search(r"listening on (\S+)", line).group(1)  # type: ignore[union-attr]
        made = httpx.post(
            base + "/v1/schedules",
            headers={"Authorization": f"Bearer {tenant['api_key']}"},
            json={"name": "t", "cron": "* * * * * *", "target_url": receiver.url, "payload": 1},
            trust_env=False,
        )
        assert made.status_code == 201, made.text
        receiver.wait_for(lambda ds: len(ds) >= 1)
    finally:
        served.proc.send_signal(signal.SIGTERM)
        assert served.wait() == 0, "".join(served.lines)
    first = receiver.snapshot()[0]
    timestamp = int(first.headers["webhook-timestamp"])
    verify(  # raises unless the tenant's secret signed these bytes
        [tenant["signing_secret"]],
        first.headers["webhook-id"],
        timestamp,
        first.body,
        first.headers["webhook-signature"],
        now_s=timestamp,
    )
