"""Scenario 3 — wall-clock jumps (ADR 0034 materialisation exactly-once; ADR 0033 clocks).

The wall clock steps like a bad NTP correction — backwards 1 min, 1 h, 25 h; forwards 1 h,
3 d — while the engine runs three schedules (catch-up ``all``, ``latest``, ``skip``) and a
delivery is in flight. Invariants, checked on the database and at the endpoint:

- 0 duplicate rows, and rows materialised in increasing ``scheduled_for`` (the cursor never
  moved back, whatever the clock did);
- every occurrence up to the last cursor has exactly one row, ``missed`` exactly when the
  catch-up policy says so at the instant it was planned, each missed row told by a
  ``schedule.run.missed`` event (or a summary);
- nothing that should be delivered is lost, nothing missed is delivered, every copy carries
  its occurrence's key;
- the jump is recorded as ``clock.jump_detected`` with its size.

Two drivers: the engine in process with the injected clock (``TrioWallClock.jump``) under
virtual time, and the real appliance process under libfaketime (Debian's ``faketime``),
whose offset is rewritten in a file while the process runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.instants import parse_instant
from appliance.core.timing_input import TimingInput
from appliance.engine.delivery import Answer
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant as store_create_tenant
from tests.chaos.conftest import Profile
from tests.chaos.recorder import (
    Figures,
    When,
    catchup_violations,
    classify,
    delivery_from_request,
    duplicate_rows,
    expected_occurrences,
    open_runs,
    out_of_order_rows,
    publish,
    query,
    run_states,
)
from tests.chaos.test_sigkill_loop import wait_until
from tests.e2e.harness import Appliance, Delivery, Receiver, create_tenant
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0, ScheduleRow, insert_schedule

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WINDOW_S = 3600
POLICIES = ("all", "latest", "skip")
CRON = "* * * * *"
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


@pytest.mark.parametrize(
    "jump_ms",
    [-MINUTE, -HOUR, -25 * HOUR, HOUR, 3 * DAY],
    ids=["back-1min", "back-1h", "back-25h", "fwd-1h", "fwd-3d"],
)
async def test_a_clock_jump_in_process(
    autojump_clock: MockClock, inline_db: Database, profile: Profile, jump_ms: int
) -> None:
    tenant = inline_db.write_now(store_create_tenant, name="acme", now=T0).tenant_id
    sids: dict[str, tuple[When, str]] = {
        inline_db.write_now(
            insert_schedule,
            tenant_id=tenant,
            row=ScheduleRow(
                cron=CRON,
                catchup_policy=policy,
                catchup_window_seconds=WINDOW_S,
                next_fire_at=T0,
            ),
            now=T0,
        ): (CRON, policy)
        for policy in POLICIES
    }
    # An interval and a one-off (docs/schedules.md) ride along: every 45 s from T0, and
    # once at T0 + 15 min (after the jump's old timeline, inside a forward jump's gap).
    for name, kind in KINDS.items():
        row = ScheduleRow(cron="", catchup_window_seconds=WINDOW_S, next_fire_at=T0, **kind)
        sid = inline_db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)
        sids[sid] = (_timing(kind), name)
    wall = TrioWallClock(T0)
    copies: list[Delivery] = []
    jumped_at: list[int] = []

    async def respond(request: Received, n: int) -> Answer:
        copies.append(delivery_from_request(request, arrived=trio.current_time()))
        if n == 31:  # ten minutes in: jump while this delivery is in flight
            jumped_at.append(wall.now_ms())
            wall.jump(jump_ms)
            await trio.sleep(5)
        return reply(200, b"ok")

    async with running_engine(inline_db, wall, Endpoint(respond=respond)):
        # Run until the wall clock is 10 minutes past both the jump and the old timeline.
        await trio.sleep((20 * MINUTE + max(-jump_ms, 0)) / 1000)
        for _ in range(360):  # then up to an hour more, until every run has finished
            if jumped_at and not inline_db.read_now(_open):
                break
            await trio.sleep(10)
    path = inline_db.sqlite_file
    figures, missed = _check_jump(path, sids, copies, jump_ms=jump_ms)
    publish(
        "clock_jump_in_process",
        jump=_label(jump_ms),
        seed=profile.seed,
        **figures.as_dict(),
        rows=len(run_states(path)),
        missed="/".join(f"{name}:{n}" for name, n in missed.items()),
        dup_rows=duplicate_rows(path),
    )
    if jump_ms > 0:  # the policies differ only where occurrences were misfired
        assert missed["skip"] >= missed["latest"] >= missed["all"]
        assert missed["skip"] > 0 and missed["latest"] > 0


KINDS: dict[str, dict[str, int]] = {
    "every-45s": {"every_seconds": 45, "start_at": T0},
    "one-off": {"at": T0 + 15 * MINUTE},
}


def _timing(kind: dict[str, int]) -> TimingInput:
    fields = {"cron": "", "timezone": "UTC", "at": None, "every_seconds": None}
    return TimingInput(**{**fields, "start_at": None, "end_at": None, **kind})  # type: ignore[arg-type]


def _open(conn: apsw.Connection) -> int:
    ((n,),) = conn.execute(
        "SELECT COUNT(*) FROM job_runs WHERE state IN ('pending','running','retry_wait')"
    )
    return int(n)


def _label(jump_ms: int) -> str:
    sign = "+" if jump_ms > 0 else "-"
    size = abs(jump_ms)
    for unit, ms in (("d", DAY), ("h", HOUR), ("min", MINUTE), ("s", 1000)):
        if size % ms == 0:
            return f"{sign}{size // ms}{unit}"
    return f"{jump_ms:+d}ms"


def _check_jump(
    path: Path,
    schedules: dict[str, tuple[When, str]],
    copies: list[Delivery],
    *,
    jump_ms: int,
    until_ms: int | None = None,
    tolerance_ms: int = 2_500,
    planned_from_creation: bool = True,
) -> tuple[Figures, dict[str, int]]:
    """The invariants shared by both drivers, for ``schedules`` (id → (cron, policy));
    returns (figures, missed rows per policy; an interval or one-off is filed under its name,
    with policy ``all``). ``until_ms``: the end of the judged window
    (the driver paused the schedules after it: later rows are cancelled or withdrawn).
    ``planned_from_creation``: the schedule's first row may fall on its creation instant
    (the in-process driver inserts the cursor at ``created_at``); a schedule created through
    the API is planned strictly after it (core/cursor.first_fire_at), which differs only
    when the create lands on a whole second."""
    assert duplicate_rows(path) == 0
    assert out_of_order_rows(path) == []
    states = run_states(path)
    deliver: list[tuple[str, int]] = []
    missed: dict[str, int] = {}
    for sid, (cron, name) in schedules.items():
        policy = name if name in POLICIES else "all"
        rows = sorted(at for (s, at) in states if s == sid)
        ((created,),) = query(path, "SELECT created_at FROM schedules WHERE id = ?", (sid,))
        first_after = int(str(created)) - (1 if planned_from_creation else 0)
        every = expected_occurrences(sid, cron, after_ms=first_after, until_ms=rows[-1])
        assert rows == [at for _, at in every], f"{policy}: rows are not one per occurrence"
        problems = catchup_violations(
            path, schedule_id=sid, cron=cron, policy=policy, window_ms=WINDOW_S * 1000
        )
        assert problems == [], problems[:5]
        missed[name] = sum(1 for (s, _), st in states.items() if s == sid and st == "missed")
        window = [o for o in every if until_ms is None or o[1] <= until_ms]
        assert all(states[o] != "cancelled" for o in window)
        deliver += [o for o in window if states[o] != "missed"]
    figures = classify(copies, deliver, until_ms=until_ms)
    assert figures.lost == 0, figures.lost_list[:5]
    assert figures.unexpected == 0, figures.unexpected_list[:5]
    assert figures.dup_diff_key == 0
    jumps = [
        json.loads(str(data))
        for (data,) in query(path, "SELECT data FROM events WHERE type = 'clock.jump_detected'")
    ]
    assert any(abs(j["divergence_ms"] - jump_ms) <= tolerance_ms for j in jumps), jumps
    return figures, missed


# --- the real process under libfaketime -------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def faketime_env(offset_file: Path) -> dict[str, str]:
    """libfaketime reads its offset from ``offset_file`` on every call (no cache); the
    monotonic clock stays real, as in an NTP step."""
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",
        "DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # Debian's libfaketime 0.9.10 rewrites the deadline of every pthread_cond_timedwait
        # on a CLOCK_MONOTONIC condition (its "monotonic fix"), CPython's GIL included:
        # a thread waiting for the GIL waits many switch intervals instead of one, enough
        # to stretch one API request past the client's 10 s timeout on a
        # loaded 2-core CI machine. The monotonic clock is real here, so nothing needs it.
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
    }


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("faketime") is None or not LIBFAKETIME.exists(),
    reason="Debian's faketime (libfaketime) is not installed: apt-get install faketime",
)
def test_clock_jumps_under_faketime_in_a_real_process(
    tmp_path: Path, profile: Profile, receiver: Receiver
) -> None:
    offset_file = tmp_path / "faketime"
    _set_offset(offset_file, "+0")
    tenant = create_tenant(tmp_path)
    db_path = tmp_path / "steeple.db"
    app = Appliance(tmp_path, env=faketime_env(offset_file)).start()
    specs = {"all": "* * * * * *", "skip": "* * * * * *", "latest": "*/10 * * * * *"}
    schedules: dict[str, tuple[str, str]] = {}
    try:
        with app.client(tenant["api_key"]) as api:
            for policy, cron in specs.items():
                body = {
                    "name": policy,
                    "cron": cron,
                    "target_url": receiver.url,
                    "payload": {},
                    "catchup": {"policy": policy, "window_seconds": WINDOW_S},
                }
                created = api.post("/v1/schedules", json=body)
                assert created.status_code == 201, created.text
                schedules[created.json()["id"]] = (cron, policy)
            receiver.wait_for(lambda ds: len(ds) >= 3)
            # Back an hour, forward to the true time again, then forward five minutes.
            for n, offset in enumerate(("-3600", "+0", "+300"), start=1):
                _set_offset(offset_file, offset)
                # A write through the API nudges the planner, which compares its clocks at
                # once (otherwise within its 60 s maximum sleep).
                poke = {"name": f"poke-{n}", "cron": "0 0 1 1 *", "target_url": receiver.url}
                api.post("/v1/schedules", json={**poke, "payload": {}, "paused": True})
                wait_until(lambda n=n: _jumps_recorded(db_path) >= n, f"jump {n} to be recorded")
            # The window ends a few seconds after the last jump (in the process's time).
            ((detected_at,),) = query(
                db_path, "SELECT MAX(occurred_at) FROM events WHERE type = 'clock.jump_detected'"
            )
            until_ms = int(str(detected_at)) + 3_000
            receiver.wait_for(  # caught up, and firing on time again
                lambda ds: any(parse_instant(d.scheduled_for) > until_ms for d in ds), 120
            )
            wait_until(lambda: _open_until(db_path, until_ms) == 0, "the catch-up to finish")
            for sid in schedules:
                api.post(f"/v1/schedules/{sid}/pause").raise_for_status()
            wait_until(lambda: open_runs(db_path) == 0, "no open run")
    except BaseException:
        print("appliance log:\n" + "".join(app.log))  # pytest shows it with the failure
        raise
    finally:
        code = app.kill(signal.SIGTERM)
    assert code == 0, "".join(app.log)
    figures, missed = _check_jump(
        db_path,
        schedules,
        receiver.snapshot(),
        jump_ms=300_000,
        until_ms=until_ms,
        planned_from_creation=False,
    )
    jumps = query(db_path, "SELECT data FROM events WHERE type = 'clock.jump_detected'")
    publish(
        "clock_jump_faketime",
        seed=profile.seed,
        jumps="-1h,+1h,+5min",
        detected=len(jumps),
        **figures.as_dict(),
        missed="/".join(f"{p}:{missed[p]}" for p in POLICIES),
        dup_rows=duplicate_rows(db_path),
    )
    divergences = sorted(json.loads(str(d))["divergence_ms"] for (d,) in jumps)
    assert len(divergences) >= 3 and divergences[0] < -3_590_000 and divergences[-1] > 3_590_000
    assert missed["skip"] > 0


def _set_offset(offset_file: Path, offset: str) -> None:
    """Replace the offset atomically: libfaketime rereads the file on every clock call and
    must never see it truncated and half written."""
    partial = offset_file.with_suffix(".partial")
    partial.write_text(offset + "\n")
    os.replace(partial, offset_file)


def _jumps_recorded(db_path: Path) -> int:
    ((n,),) = query(db_path, "SELECT COUNT(*) FROM events WHERE type = 'clock.jump_detected'")
    return int(str(n))


def _open_until(db_path: Path, until_ms: int) -> int:
    ((n,),) = query(
        db_path,
        "SELECT COUNT(*) FROM job_runs WHERE scheduled_for <= ?"
        " AND state IN ('pending', 'running', 'retry_wait')",
        (until_ms,),
    )
    return int(str(n))
