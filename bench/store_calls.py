"""store_calls: run a module (the appliance) with the CPU of every store call counted.

``python -m bench.store_calls appliance serve …`` runs ``python -m appliance serve …``
with :mod:`appliance.store.infra.database`'s group commit and reads wrapped: each write's (or
batch's) thread CPU is added to its store function's name, each read's to ``read:`` and
its name, and what is left of a group commit (``BEGIN``, savepoints, ``COMMIT``) to
``<commit>``. At exit it writes ``{"calls": {name: [items, cpu_s]}, "groups": {size: n}}``
as JSON to ``$STEEPLE_BENCH_STORE_CALLS``. ``bench.burst --store-cpu`` drives it: the
worker threads' CPU per delivery, by store function (bench/HISTORY.md).

Bench-only: it patches the database module's internals, and costs a little CPU itself.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from appliance.store.infra import database

_calls: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
_groups: collections.Counter[int] = collections.Counter()
_alone: collections.Counter[str] = collections.Counter()  # writes that had a group to themselves
_run_group = database.run_group  # type: ignore[attr-defined]
_run_read = database.run_read


def _name(fn: Callable[..., Any]) -> str:
    """The store function behind a write's closure (``module.function``)."""
    for cell in getattr(fn, "__closure__", None) or ():
        value = cell.cell_contents
        if callable(value) and getattr(value, "__name__", "") not in ("bound", "alone", "call"):
            fn = value
            break
    module = getattr(fn, "__module__", "") or ""
    return f"{module.rsplit('.', 1)[-1]}.{getattr(fn, '__name__', '?')}"


def _timed(fn: Callable[..., Any], name: str, items: Callable[[tuple[Any, ...]], int]) -> Any:
    """``fn`` with its thread CPU added to ``name``, and its items counted when it returns
    (a batch that raises is written again item by item, and counted then)."""

    def timed(conn: Any, *args: Any) -> Any:
        start = time.thread_time()
        written = 0
        try:
            result = fn(conn, *args)
            written = items(args)
            return result
        finally:
            spent = _calls[name]
            spent[0] += written
            spent[1] += time.thread_time() - start

    return timed


def run_group(conn: Any, group: Sequence[Any]) -> None:
    start = time.thread_time()
    batches: dict[Any, Any] = {}
    alone = _name(group[0].batch or group[0].call) if len(group) == 1 else None
    for item in group:
        if getattr(item, "batch", None) is not None:  # one wrapper per batch function
            name = _name(item.batch)
            if item.batch not in batches:
                batches[item.batch] = _timed(item.batch, name, lambda a: len(a[0]))
            item.batch = batches[item.batch]
            # an item alone in its unit of the group is written by its own call
            item.call = _timed(item.call, name, lambda a: 1)
        else:
            item.call = _timed(item.call, _name(item.call), lambda a: 1)
    try:
        _run_group(conn, group)
    finally:
        _calls["<group>"][1] += time.thread_time() - start
        _calls["<group>"][0] += 1
        _groups[len(group)] += 1
        if alone is not None:
            _alone[alone] += 1


def run_read(conn: Any, fn: Callable[..., Any]) -> Any:
    start = time.thread_time()
    try:
        return _run_read(conn, fn)
    finally:
        spent = _calls[f"read:{_name(fn)}"]
        spent[0] += 1
        spent[1] += time.thread_time() - start


def _dump() -> None:
    calls = dict(_calls)
    group = calls.pop("<group>", [0, 0.0])
    inside = sum(cpu for name, (_, cpu) in calls.items() if not name.startswith("read:"))
    calls["<commit>"] = [group[0], max(0.0, group[1] - inside)]
    out = os.environ.get("STEEPLE_BENCH_STORE_CALLS")
    if out:
        with open(out, "w") as f:
            json.dump({"calls": calls, "groups": dict(_groups), "alone": dict(_alone)}, f)


def main() -> None:
    database.run_group = run_group  # type: ignore[attr-defined]
    database.run_read = run_read
    atexit.register(_dump)
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
