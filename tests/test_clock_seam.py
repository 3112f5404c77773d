"""Only ``appliance/clock.py`` reads the wall clock (its header says so): everything else
takes ``now`` or a ``WallClock``, which is what lets tests drive time without patching."""

from __future__ import annotations

import ast
from pathlib import Path

import appliance

PACKAGE = Path(appliance.__file__).parent
# Calls that read the time of day: time.time(), time.time_ns(), datetime.now(), …
WALL_CLOCK_READS = {"time", "time_ns", "now", "utcnow", "today", "localtime", "gmtime"}
WALL_CLOCK_OWNERS = {"time", "datetime", "date"}


def wall_clock_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        if node.func.attr in WALL_CLOCK_READS and name in WALL_CLOCK_OWNERS:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}.{node.func.attr}()")
    return found


def test_only_the_clock_module_reads_the_wall_clock() -> None:
    reads = [
        read
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "clock.py"
        for read in wall_clock_reads(path)
    ]
    assert reads == []
    clock_reads = wall_clock_reads(PACKAGE / "clock.py")  # the check does see a read
    assert [read.split()[1] for read in clock_reads] == ["time.time_ns()"]
