"""Child-process bodies for tests/receiver/test_processes.py (a module of its own: the
``spawn`` start method imports it by name in the child)."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Sequence
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path

from appliance.receiver import DeliveryInProgress, Receiver, SqliteDeduper, VerifiedDelivery
from tests.receiver.signed import SECRET, SIGNED_AT_S, signed

WAIT_S = 60  # generous: the machine may be loaded; a healthy run never waits this long


def record_effect(effects_path: Path, delivery: VerifiedDelivery) -> None:
    """The effect under test: one row per run of a handler, in a file of its own."""
    with sqlite3.connect(effects_path, timeout=WAIT_S, isolation_level=None) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS effects (key TEXT, pid INTEGER)")
        conn.execute("INSERT INTO effects VALUES (?, ?)", (delivery.idempotency_key, os.getpid()))
    conn.close()


def race_for_keys(
    keys_path: Path,
    effects_path: Path,
    instants: list[str],
    barrier: Barrier,
    out: Queue[str],
    transactional: bool,
) -> None:
    """For each occurrence: meet the other process at the barrier, then receive the same
    signed delivery — two-phase (``Receiver.receive``), or ``transactional``
    (``SqliteDeduper.once``, the effect a row in the keys file itself, so ``effects_path``
    must be ``keys_path``). Puts one outcome per occurrence: handled, duplicate or
    in_progress."""
    with SqliteDeduper(keys_path, timeout_s=WAIT_S) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        for instant in instants:
            request = signed(scheduled_for=instant)
            barrier.wait(WAIT_S)
            try:
                if transactional:
                    first = _once(receiver, deduper, request.headers, request.body)
                else:
                    receipt = receiver.receive(
                        request.headers,
                        request.body,
                        now_s=SIGNED_AT_S,
                        handle=lambda d: record_effect(effects_path, d),
                    )
                    first = receipt.first_seen
            except DeliveryInProgress:
                out.put("in_progress")
            else:
                out.put("handled" if first else "duplicate")


def _once(
    receiver: Receiver, deduper: SqliteDeduper, headers: Sequence[tuple[str, str]], body: bytes
) -> bool:
    """docs/receiver.md's transactional pattern."""
    delivery = receiver.verify(headers, body, now_s=SIGNED_AT_S)
    with deduper.once(delivery.idempotency_key, now_s=SIGNED_AT_S) as first:
        if first:
            deduper.connection.execute(
                "INSERT INTO effects VALUES (?, ?)", (delivery.idempotency_key, os.getpid())
            )
    return first


def die_in_handler(keys_path: Path, hold_s: int) -> None:
    """Receive a delivery whose handler is SIGKILLed before it returns."""
    with SqliteDeduper(keys_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper, hold_s=hold_s)
        request = signed()
        receiver.receive(
            request.headers,
            request.body,
            now_s=SIGNED_AT_S,
            handle=lambda d: os.kill(os.getpid(), signal.SIGKILL),
        )


def slow_then_fail(keys_path: Path, entered: Event, finish: Event, out: Queue[str]) -> None:
    """Receive a delivery whose handler waits for ``finish`` (a slow downstream), then fails."""

    def handle(delivery: VerifiedDelivery) -> None:
        entered.set()
        if not finish.wait(WAIT_S):
            raise AssertionError("never told to finish")
        raise RuntimeError("downstream failed")

    with SqliteDeduper(keys_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        request = signed()
        try:
            receiver.receive(request.headers, request.body, now_s=SIGNED_AT_S, handle=handle)
        except RuntimeError as exc:
            out.put(str(exc))
