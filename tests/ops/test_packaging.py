"""packaging/: the systemd unit and the Containerfile are linted against what Steeple
needs (no image can be pulled or built on these machines), and the appliance starts
under MemoryDenyWriteExecute (the kernel's prctl, as the unit's directive asks)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.cli.main import _parser
from appliance.settings.load import load_settings
from appliance.settings.table import SETTINGS
from tests.ops.processes import Served, data_args

ROOT = Path(__file__).parents[2]
UNIT = ROOT / "packaging" / "systemd" / "steeple.service"
CONTAINERFILE = ROOT / "packaging" / "container" / "Containerfile"
SETTING_ENVS = {d.env for d in SETTINGS}


def unit_directives(path: Path) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values, in order (systemd allows a key more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None and "=" in line, line
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_unit_is_notify_with_a_watchdog_a_dynamic_user_and_hardened() -> None:
    unit = unit_directives(UNIT)
    service = {key: values[-1] for key, values in unit["Service"].items()}
    assert service["Type"] == "notify" and service["WatchdogSec"] == "30s"
    assert service["DynamicUser"] == "yes" and service["StateDirectory"] == "steeple"
    assert service["StateDirectoryMode"] == "0700" and service["UMask"] == "0077"
    for directive, value in {
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "NoNewPrivileges": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "MemoryDenyWriteExecute": "yes",
        "CapabilityBoundingSet": "",
        "SystemCallArchitectures": "native",
    }.items():
        assert service[directive] == value, directive
    assert unit["Service"]["SystemCallFilter"] == ["@system-service", "~@privileged @resources"]
    grace = load_settings(environ={}).shutdown_grace_seconds
    assert int(service["TimeoutStopSec"].removesuffix("s")) >= grace + 5
    command = shlex.split(service["ExecStart"])
    assert command[0] == "/usr/local/bin/steeple"  # pipx install --global
    assert _parser().parse_args(command[1:]).command == "serve"
    for assignment in unit["Service"]["Environment"]:
        assert assignment.split("=")[0] in SETTING_ENVS | {"STEEPLE_CONFIG"}, assignment
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_unit_scores_ok_in_systemd_analyze_security() -> None:
    done = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"Overall exposure level for steeple.service: ([\d.]+)", done.stdout)
    assert match, done.stdout + done.stderr
    assert float(match.group(1)) <= 2.0  # docs/operations.md records the figure
    assert f"exposure level {match.group(1)}" in (ROOT / "docs" / "operations.md").read_text()


def containerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            found.append((instruction.upper(), " ".join(rest.split())))
    return found


def test_the_containerfile_builds_from_the_wheel_and_runs_non_root() -> None:
    steps = containerfile()
    bases = [args for op, args in steps if op == "FROM"]
    assert len(bases) == 2 and all("-slim" in base for base in bases)  # multi-stage, slim
    assert ("COPY", "dist/*.whl /wheels/") in steps
    assert any(
        op == "RUN" and "pip install" in args and "/wheels/*.whl" in args for op, args in steps
    )
    final = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM") :]
    (user,) = [args for op, args in final if op == "USER"]
    assert user.isdigit() and int(user) >= 1000
    assert ("VOLUME", "/data") in final and ("STOPSIGNAL", "SIGTERM") in final
    (health,) = [args for op, args in final if op == "HEALTHCHECK"]
    probe = json.loads(health.split("CMD", 1)[1])
    assert probe == ["steeple", "healthcheck"]
    entrypoint = json.loads(next(args for op, args in final if op == "ENTRYPOINT"))
    command = json.loads(next(args for op, args in final if op == "CMD"))
    assert entrypoint == ["steeple"] and _parser().parse_args(command).command == "serve"
    assert _parser().parse_args(probe[1:]).command == "healthcheck"
    env = " ".join(args for op, args in final if op == "ENV")
    names = set(re.findall(r"\b(STEEPLE_[A-Z_]+)=", env))
    assert names <= SETTING_ENVS and "STEEPLE_DATA_DIR=/data" in env
    assert "STEEPLE_LISTEN=0.0.0.0:8080" in env  # inside the container only


MDWE = (
    "import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True);"
    " assert libc.prctl(65, 1, 0, 0, 0) == 0, 'PR_SET_MDWE refused';"  # PR_MDWE_REFUSE_EXEC_GAIN
    " os.execv(sys.executable, [sys.executable, '-m', 'appliance', *sys.argv[1:]])"
)


@pytest.mark.slow
def test_the_appliance_starts_under_memory_deny_write_execute(tmp_path: Path) -> None:
    """What MemoryDenyWriteExecute=yes does to the process (inherited across exec): its
    SQLite worker threads and the HTTP server must still start."""
    probe = subprocess.run(
        [sys.executable, "-c", MDWE.replace("os.execv", "sys.exit(0) or os.execv")]
    )
    if probe.returncode != 0:
        pytest.skip("this kernel has no PR_SET_MDWE (Linux < 6.3)")
    served = Served.command([sys.executable, "-c", MDWE, "serve", *data_args(tmp_path)])
    try:
        served.wait_for_line("database check passed")
        served.wait_for_line("listening on http://127.0.0.1:")
    finally:
        served.proc.send_signal(signal.SIGTERM)
        assert served.wait() == 0, "".join(served.lines)
