"""SqliteDeduper across real processes: two receivers sharing one file never both run a
key's effect, two-phase or with ``once``; a receiver SIGKILLed inside its handler leaves
the key to be run again once its hold ends; a retry that arrives while another process's
handler runs is refused, and after that handler fails the next retry acts. Processes meet
at barriers and events, never at sleeps."""

from __future__ import annotations

import multiprocessing
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from appliance.core.ids import idempotency_key
from appliance.core.instants import format_scheduled_for, parse_instant
from appliance.receiver import DeliveryInProgress, Receiver, SqliteDeduper, VerifiedDelivery
from tests.receiver import processes
from tests.receiver.signed import SCHEDULE_ID, SECRET, SIGNED_AT_S, signed

SPAWN = multiprocessing.get_context("spawn")
KEYS = 60


def _effects(effects_path: Path) -> Counter[str]:
    with sqlite3.connect(effects_path) as conn:
        rows = conn.execute("SELECT key FROM effects").fetchall()
    conn.close()
    return Counter(key for (key,) in rows)


def _instants(count: int) -> list[str]:
    start = parse_instant("2026-08-06T03:00:00Z")
    return [format_scheduled_for(start + n * 1000) for n in range(count)]


@pytest.mark.parametrize("transactional", [False, True], ids=["two-phase", "once"])
def test_two_processes_sharing_one_file_never_both_run_a_keys_effect(
    tmp_path: Path, transactional: bool
) -> None:
    keys_path = tmp_path / "keys.db"
    effects_path = keys_path if transactional else tmp_path / "effects.db"
    with SqliteDeduper(keys_path) as deduper:  # the schema exists before the race starts
        deduper.connection.execute("CREATE TABLE effects (key TEXT, pid INTEGER)")
    instants = _instants(KEYS)
    barrier = SPAWN.Barrier(2)
    outcomes = [SPAWN.Queue(), SPAWN.Queue()]
    racers = [
        SPAWN.Process(
            target=processes.race_for_keys,
            args=(keys_path, effects_path, instants, barrier, out, transactional),
        )
        for out in outcomes
    ]
    for racer in racers:
        racer.start()
    per_process = [[out.get(timeout=processes.WAIT_S) for _ in instants] for out in outcomes]
    for racer in racers:
        racer.join(processes.WAIT_S)
        assert racer.exitcode == 0
    for out in outcomes:
        out.close()
        out.join_thread()
    for first, second in zip(*per_process, strict=True):
        assert sorted((first, second)) in (["duplicate", "handled"], ["handled", "in_progress"])
    effects = _effects(effects_path)
    assert effects == Counter({idempotency_key(SCHEDULE_ID, i): 1 for i in instants})


def _redeliver(keys_path: Path, *, now_s: int, handled: list[VerifiedDelivery]) -> bool:
    with SqliteDeduper(keys_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper, hold_s=60)
        request = signed(attempt=2, signed_at_s=now_s)
        receipt = receiver.receive(
            request.headers, request.body, now_s=now_s, handle=handled.append
        )
        return receipt.first_seen


def test_a_receiver_killed_inside_its_handler_does_not_lose_the_delivery(
    tmp_path: Path,
) -> None:
    keys_path = tmp_path / "keys.db"
    victim = SPAWN.Process(target=processes.die_in_handler, args=(keys_path, 60))
    victim.start()
    victim.join(processes.WAIT_S)
    assert victim.exitcode == -signal.SIGKILL
    handled: list[VerifiedDelivery] = []
    with pytest.raises(DeliveryInProgress) as caught:  # its hold still stands: refuse
        _redeliver(keys_path, now_s=SIGNED_AT_S + 5, handled=handled)
    assert caught.value.retry_after_s == 55
    assert _redeliver(keys_path, now_s=SIGNED_AT_S + 60, handled=handled)  # hold over: act
    assert not _redeliver(keys_path, now_s=SIGNED_AT_S + 61, handled=handled)
    assert [d.attempt for d in handled] == [2]


def test_a_retry_while_another_process_handles_is_refused_then_runs_after_its_failure(
    tmp_path: Path,
) -> None:
    keys_path = tmp_path / "keys.db"
    entered, finish, out = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    first = SPAWN.Process(target=processes.slow_then_fail, args=(keys_path, entered, finish, out))
    first.start()
    try:
        assert entered.wait(processes.WAIT_S)
        handled: list[VerifiedDelivery] = []
        with pytest.raises(DeliveryInProgress):
            _redeliver(keys_path, now_s=SIGNED_AT_S + 5, handled=handled)
        finish.set()
        assert out.get(timeout=processes.WAIT_S) == "downstream failed"
        first.join(processes.WAIT_S)
        assert first.exitcode == 0
        assert _redeliver(keys_path, now_s=SIGNED_AT_S + 6, handled=handled)
        assert [d.attempt for d in handled] == [2]
    finally:
        finish.set()
        first.join(processes.WAIT_S)
        out.close()
        out.join_thread()
