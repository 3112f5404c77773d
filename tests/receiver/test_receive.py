"""Receiver.receive: verify, claim, handle, record — with both dedupers. The two ways the
one-phase helper lost a delivery are here as regressions: a handler that dies leaves the
key retryable, and a retry that arrives while the first handler runs is never a 2xx."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from appliance.receiver import (
    Deduper,
    DeliveryInProgress,
    MemoryDeduper,
    Receiver,
    SqliteDeduper,
    VerificationError,
    VerifiedDelivery,
)
from tests.receiver.signed import KEY, SECRET, SIGNED_AT_S, signed


@contextmanager
def _memory(tmp_path: Path) -> Iterator[Deduper]:
    yield MemoryDeduper()


@contextmanager
def _sqlite(tmp_path: Path) -> Iterator[Deduper]:
    with SqliteDeduper(tmp_path / "keys.db") as deduper:
        yield deduper


DeduperFactory = Callable[[Path], AbstractContextManager[Deduper]]
DEDUPERS = [pytest.param(_memory, id="memory"), pytest.param(_sqlite, id="sqlite")]


def _deliver(
    receiver: Receiver,
    handle: Callable[[VerifiedDelivery], None],
    *,
    attempt: int = 1,
    now_s: int = SIGNED_AT_S,
) -> bool:
    request = signed(attempt=attempt, signed_at_s=now_s)
    receipt = receiver.receive(request.headers, request.body, now_s=now_s, handle=handle)
    assert receipt.delivery.attempt == attempt
    return receipt.first_seen


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_each_key_is_handled_once(open_deduper: DeduperFactory, tmp_path: Path) -> None:
    handled: list[VerifiedDelivery] = []
    with open_deduper(tmp_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        seen = [
            _deliver(receiver, handled.append, attempt=n, now_s=SIGNED_AT_S + n) for n in (1, 2, 3)
        ]
    assert seen == [True, False, False]
    assert [d.attempt for d in handled] == [1]


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_a_failed_handling_is_released_so_the_retry_is_handled(
    open_deduper: DeduperFactory, tmp_path: Path
) -> None:
    def fail(delivery: VerifiedDelivery) -> None:
        raise RuntimeError("database down")

    handled: list[VerifiedDelivery] = []
    with open_deduper(tmp_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        with pytest.raises(RuntimeError, match="database down"):
            _deliver(receiver, fail)
        assert _deliver(receiver, handled.append, attempt=2)
    assert [d.attempt for d in handled] == [2]


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_a_handler_that_never_finished_is_run_again_once_its_hold_ends(
    open_deduper: DeduperFactory, tmp_path: Path
) -> None:
    """The one-phase helper recorded the key before handling, so a process that died in
    the handler left it recorded and the redelivery was acknowledged as a duplicate. Here
    the dead handling is a claim never finished (tests/receiver/test_processes.py kills a
    real process): redeliveries during its hold are refused, the one after it is handled."""
    handled: list[VerifiedDelivery] = []
    with open_deduper(tmp_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper, hold_s=60)
        deduper.claim(KEY, now_s=SIGNED_AT_S, hold_s=60)  # the handler that died
        with pytest.raises(DeliveryInProgress) as caught:
            _deliver(receiver, handled.append, attempt=2, now_s=SIGNED_AT_S + 5)
        assert caught.value.retry_after_s == 55
        assert _deliver(receiver, handled.append, attempt=3, now_s=SIGNED_AT_S + 60)
    assert [d.attempt for d in handled] == [3]


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_a_retry_during_a_slow_handling_is_refused_and_the_next_one_acts(
    open_deduper: DeduperFactory, tmp_path: Path
) -> None:
    """The second way a delivery was lost: the first handler is still running when the
    retry arrives; the retry was answered 2xx (run succeeded), then the first handler
    failed and nothing ever retried. Now the retry is refused, and after the failure the
    next retry runs the effect."""
    entered, finish = threading.Event(), threading.Event()
    effects: list[int] = []

    def slow_then_fail(delivery: VerifiedDelivery) -> None:
        entered.set()
        assert finish.wait(30)
        raise RuntimeError("downstream timed out")

    with open_deduper(tmp_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        failures: list[BaseException] = []

        def first_attempt() -> None:
            try:
                _deliver(receiver, slow_then_fail, attempt=1)
            except RuntimeError as exc:
                failures.append(exc)

        worker = threading.Thread(target=first_attempt)
        worker.start()
        assert entered.wait(30)
        with pytest.raises(DeliveryInProgress) as caught:
            _deliver(receiver, lambda d: effects.append(d.attempt), attempt=2)
        assert caught.value.retry_after_s == receiver.hold_s
        finish.set()
        worker.join(30)
        assert [str(f) for f in failures] == ["downstream timed out"]
        assert _deliver(receiver, lambda d: effects.append(d.attempt), attempt=3)
    assert effects == [3]


def test_an_unverified_request_never_claims_its_key() -> None:
    deduper = MemoryDeduper()
    receiver = Receiver(secrets=(SECRET,), deduper=deduper)
    request = signed()
    with pytest.raises(VerificationError):
        receiver.receive(request.headers, b"forged", now_s=SIGNED_AT_S, handle=lambda d: None)
    assert len(deduper) == 0
