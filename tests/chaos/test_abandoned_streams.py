"""Scenario — streams opened and left behind, again and again, by one tenant, while
another tenant's schedule fires every second.

The real appliance runs with a low descriptor limit (``RLIMIT_NOFILE``, set on the
process). Tenant *acme* opens its event stream, by API key and by a viewer's session,
hundreds of times — more streams in all than the limit — and leaves each in one of the
ways of :data:`tests.e2e.streams.LEAVES` (bytes after the request, then close, reset or
half-close), drawn from the profile's seed. After each round the appliance's open
descriptors must be back to the baseline (polled with a deadline) and ``/healthz`` must
answer. Tenant *beta*'s schedule ``* * * * * *`` delivers to a loopback receiver
throughout: every occurrence of the window arrives, each less than 2 s after its
``scheduled_for`` (a correctness bound — a stalled or descriptor-starved appliance
misses it by far — not a performance figure). Figures: streams, rounds, occurrences,
the worst lateness, descriptors at the end.
"""

from __future__ import annotations

import resource
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance.core.instants import parse_instant
from tests.chaos.conftest import Profile
from tests.chaos.recorder import classify, expected_occurrences, publish
from tests.e2e.harness import Appliance, Delivery, Receiver, create_tenant
from tests.e2e.streams import (
    API_STREAM,
    LEAVES,
    UI_STREAM,
    open_stream,
    settled_fds,
    stream_request,
    wait_for_fds,
)
from tests.ui.test_browser import add_user
from tests.ui.test_live_feed import sign_in

pytestmark = pytest.mark.slow

FD_LIMIT = 160  # the appliance's RLIMIT_NOFILE: fewer than the streams left in all
SLACK = 3  # descriptors the appliance may open meanwhile (a reader, the log)
LATE_MS = 2_000  # every delivery within this of its scheduled_for
MIN_ROUNDS = 12  # of 25 streams: more in all than FD_LIMIT


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def lateness_ms(delivery: Delivery, offset_s: float) -> float:
    """Arrival (monotonic, moved to the wall clock by ``offset_s``) minus scheduled_for."""
    return (delivery.arrived + offset_s) * 1000 - parse_instant(delivery.scheduled_for)


def test_abandoned_streams_leave_no_descriptor_and_delay_no_delivery(
    tmp_path: Path, receiver: Receiver, profile: Profile
) -> None:
    data_dir = tmp_path / "data"
    acme = create_tenant(data_dir, "acme")["api_key"]
    beta = create_tenant(data_dir, "beta")["api_key"]
    add_user(data_dir, "viewer@acme.example", "acme", "viewer")
    app = Appliance(data_dir).start()
    seconds, per_round = (profile.minutes * 60 if profile.soak else 8.0), 25
    rng = profile.rng()
    try:
        resource.prlimit(app.pid, resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))
        heads = [
            stream_request(API_STREAM, key=acme),
            stream_request(UI_STREAM, cookie=sign_in(app.base_url, "viewer@acme.example")),
        ]
        for head in heads:  # warm: each stream's first request opens readers
            open_stream(app.base_url, head).close()
        with app.client(beta) as api:
            created = api.post(
                "/v1/schedules",
                json={
                    "name": "tick",
                    "cron": "* * * * * *",
                    "target_url": receiver.url,
                    "payload": {},
                },
            )
            assert created.status_code == 201, created.text
        schedule_id = created.json()["id"]
        receiver.wait_for(lambda ds: len(ds) >= 1)  # delivering before the first round
        baseline = settled_fds(app.pid)
        offset_s = time.time() - time.monotonic()
        window_from = int(time.time() * 1000)

        rounds, ends = 0, time.monotonic() + seconds
        while rounds < MIN_ROUNDS or time.monotonic() < ends:
            rounds += 1
            kept: list[socket.socket] = []
            for _ in range(per_round):
                _name, extra, leave = rng.choice(LEAVES)
                sock = leave(open_stream(app.base_url, rng.choice(heads), extra))
                if sock is not None:
                    kept.append(sock)
            held = wait_for_fds(app.pid, baseline + SLACK)
            for sock in kept:
                sock.close()
            assert held <= baseline + SLACK, f"round {rounds}: {held - baseline} descriptors held"
            health = httpx.get(f"{app.base_url}/healthz", trust_env=False, timeout=10)
            assert health.status_code == 200, f"round {rounds}: /healthz {health.status_code}"

        window_until = int(time.time() * 1000) - 1_000
        expected = expected_occurrences(schedule_id, "* * * * * *", after_ms=window_from,
                                        until_ms=window_until)  # fmt: skip
        wanted = set(expected)
        receiver.wait_for(
            lambda ds: wanted <= {(d.schedule_id, parse_instant(d.scheduled_for)) for d in ds}
        )
        figures = classify(receiver.snapshot(), expected, until_ms=window_until)
        in_window = [
            d
            for d in receiver.snapshot()
            if (d.schedule_id, parse_instant(d.scheduled_for)) in wanted and d.attempt == 1
        ]
        worst = max(lateness_ms(d, offset_s) for d in in_window)
        publish(
            "abandoned_streams",
            streams=rounds * per_round,
            rounds=rounds,
            fd_limit=FD_LIMIT,
            occurrences=figures.occurrences,
            lost=figures.lost,
            worst_lateness_ms=round(worst),
            fds_over_baseline=settled_fds(app.pid) - baseline,
        )
        assert figures.lost == 0 and figures.delivered == len(expected)
        assert worst < LATE_MS, f"a delivery arrived {worst:.0f} ms after its scheduled_for"
        assert wait_for_fds(app.pid, baseline + SLACK) <= baseline + SLACK
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
