"""The sign-in throttle's count under concurrency, on both stores: an attempt is counted
before its password is checked, in one write with the count, so attempts racing on one
account never get past the limit (issue: 60 concurrent attempts, 59 checked)."""

from __future__ import annotations

import trio

from appliance.store.infra.backend import Store
from appliance.store.sessions import (
    FAILURE_WINDOW_MS,
    MAX_FAILURES,
    forgive_attempt,
    reserve_attempt,
    throttled,
)
from tests.store.conftest import T0

SUBJECTS = ("email:ada@example.com", "addr:127.0.0.1")


async def test_racing_attempts_on_one_account_never_pass_the_limit(db: Store) -> None:
    granted: list[tuple[int, ...]] = []
    refused = 0

    async def attempt() -> None:
        nonlocal refused
        ids = await db.write(reserve_attempt, subjects=SUBJECTS, now=T0)
        if ids is None:
            refused += 1
        else:
            granted.append(ids)

    async with trio.open_nursery() as nursery:
        for _ in range(6 * MAX_FAILURES):
            nursery.start_soon(attempt)
    assert len(granted) == MAX_FAILURES and refused == 5 * MAX_FAILURES
    assert db.read_now(throttled, subjects=SUBJECTS, now=T0)
    assert all(len(ids) == len(SUBJECTS) for ids in granted)


def test_a_forgiven_attempt_frees_its_place_and_old_ones_age_out(db: Store) -> None:
    attempts = [db.write_now(reserve_attempt, subjects=SUBJECTS, now=T0) for _ in range(10)]
    assert db.write_now(reserve_attempt, subjects=SUBJECTS, now=T0) is None
    last = attempts[-1]
    assert last is not None
    db.write_now(forgive_attempt, ids=last)
    assert db.write_now(reserve_attempt, subjects=SUBJECTS, now=T0) is not None
    assert db.write_now(reserve_attempt, subjects=SUBJECTS, now=T0) is None
    later = T0 + FAILURE_WINDOW_MS
    assert db.write_now(reserve_attempt, subjects=SUBJECTS, now=later) is not None
    count = db.read_now(lambda c: c.execute("SELECT count(*) FROM login_failures").fetchone()[0])
    assert count == len(SUBJECTS)  # the aged-out rows were deleted
