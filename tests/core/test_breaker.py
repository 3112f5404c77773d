"""The breaker's pure rules: what counts as a failure, when it opens, the one probe, the
doubling wait, and closing."""

from __future__ import annotations

import pytest

from appliance.core.breaker import (
    CLOSED,
    BreakerConfig,
    Change,
    OriginState,
    admit,
    is_failure,
    origin_of,
    record,
)
from appliance.core.retry import TransportFailure

CONFIG = BreakerConfig(threshold=3, first_wait_ms=1_000, max_wait_ms=3_000)


def fail(state: OriginState, now: int, tenant: str = "ten_a") -> tuple[OriginState, Change | None]:
    return record(state, failed=True, tenant_id=tenant, now=now, config=CONFIG)


@pytest.mark.parametrize(
    ("status", "failure", "failed"),
    [
        (None, TransportFailure.CONNECT, True),
        (None, TransportFailure.DEADLINE, True),
        (None, TransportFailure.BLOCKED, False),  # the policy's refusal, not the receiver
        (503, None, True),
        (500, None, True),
        (429, None, True),
        (200, None, False),
        (404, None, False),
        (410, None, False),
    ],
)
def test_what_counts_as_a_failure(
    status: int | None, failure: TransportFailure | None, failed: bool
) -> None:
    assert is_failure(status, failure) is failed


def test_origins_are_scheme_host_and_port() -> None:
    assert origin_of("https://Hooks.Example.com/a?b") == "https://hooks.example.com:443"
    assert origin_of("http://hooks.example.com:8080/") == "http://hooks.example.com:8080"
    assert origin_of("http://[::1]/x") == "http://[::1]:80"


def test_it_opens_on_the_threshold_of_consecutive_failures_only() -> None:
    state, change = fail(CLOSED, 0)
    state, change = fail(state, 1)
    assert change is None and state.failures == 2
    state, change = record(state, failed=False, tenant_id="ten_a", now=2, config=CONFIG)
    assert (state, change) == (CLOSED, None)  # a success resets the streak
    for now in range(3):
        state, change = fail(state, 10 + now, tenant=f"ten_{now}")
    assert change is Change.OPENED
    assert (state.open_until, state.wait_ms) == (12 + 1_000, 1_000)
    assert state.tenants == {"ten_0", "ten_1", "ten_2"}


def test_one_probe_at_the_probe_instant_then_doubling_then_closing() -> None:
    state = OriginState(failures=3, open_until=1_000, wait_ms=1_000)
    assert admit(state, now=500) == (1_000, state)  # waits for the probe instant
    go, probing = admit(state, now=1_000)
    assert go is None and probing.probing
    assert admit(probing, now=1_001)[0] == 2_001  # others wait a period while it flies
    state, change = fail(probing, 1_100)
    assert change is None and (state.open_until, state.wait_ms) == (3_100, 2_000)
    state, _ = fail(admit(state, now=3_100)[1], 3_200)
    assert state.wait_ms == 3_000  # capped at max_wait_ms
    state, change = record(
        admit(state, now=6_200)[1], failed=False, tenant_id="ten_a", now=6_300, config=CONFIG
    )
    assert (state, change) == (CLOSED, Change.CLOSED)


def test_a_late_failure_of_a_request_sent_before_it_opened_is_no_news() -> None:
    state = OriginState(failures=3, open_until=1_000, wait_ms=1_000)
    after, change = fail(state, 500)
    assert (after.open_until, after.probing, change) == (1_000, False, None)
