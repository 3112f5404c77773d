"""The pieces of observability without a process: notify datagrams, the watchdog's gate,
log redaction and formats, /metrics' access rules and metric names."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from appliance.api.app import create_app
from appliance.api.metrics import Observability
from appliance.clock import SystemClock
from appliance.core.addresses import AddressPolicy
from appliance.core.lifecycle import Lifecycle
from appliance.live.hub import EventHub
from appliance.settings.load import load_settings
from appliance.store.incarnations import PreviousIncarnation
from appliance.store.infra.database import Database
from appliance.store.restarts import downtime_report, record_restart
from appliance.wiring.logs import configure
from appliance.wiring.sdnotify import notify, watchdog_interval_s
from appliance.wiring.watchdog import pet_watchdog


def test_notify_sends_one_datagram_to_a_path_or_an_abstract_socket(tmp_path: Path) -> None:
    assert notify("READY=1", environ={}) is False  # not under systemd: nothing sent
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(tmp_path / "n"))
        assert notify("READY=1\nSTATUS=x", environ={"NOTIFY_SOCKET": str(tmp_path / "n")})
        assert listener.recv(100) == b"READY=1\nSTATUS=x"
    name = f"steeple-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind("\0" + name)
        assert notify("STOPPING=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert listener.recv(100) == b"STOPPING=1"
    assert notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "gone")}) is False


def test_watchdog_interval_is_a_third_and_only_for_this_pid() -> None:
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000"}) == 10
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval_s({}) is None


async def test_the_watchdog_is_silent_unless_the_engine_runs_and_the_writer_answers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sent: list[str] = []
    lifecycle = Lifecycle()
    wedged = trio.Event()

    async def round_trip() -> None:
        if wedged.is_set():
            await trio.sleep_forever()  # the writer never answers

    async with trio.open_nursery() as nursery:
        await nursery.start(pet_watchdog, lifecycle, round_trip, 1.0, sent.append)
        await trio.sleep(2.5)
        assert sent == []  # the engine is not running yet
        lifecycle.engine_running = True
        await trio.sleep(2)
        assert sent == ["WATCHDOG=1", "WATCHDOG=1"]
        wedged.set()
        await trio.sleep(3)
        assert len(sent) <= 3  # at most the ping already under way
        nursery.cancel_scope.cancel()


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """``configure`` replaces the root logger's handlers: put pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


def test_api_keys_and_secrets_are_masked_in_every_format(root_logger: logging.Logger) -> None:
    for fmt in ("text", "json", "journal"):
        out = io.StringIO()
        settings = load_settings(environ={"STEEPLE_LOG_FORMAT": fmt})
        configure(settings, {}, stream=out)
        log = logging.getLogger("steeple.test")
        log.warning("key %s and secret %s", "stk_abcdefghijklmnop", "whsec_c2VjcmV0c2VjcmV0")
        text = out.getvalue()
        assert "stk_abcdefgh" not in text and "c2VjcmV0" not in text, fmt
        assert "stk_…" in text and "whsec_…" in text
    out = io.StringIO()
    configure(load_settings(environ={"STEEPLE_LOG_FORMAT": "json"}), {}, stream=out)
    logging.getLogger("steeple.test").error("boom")
    document = json.loads(out.getvalue())
    assert document["level"] == "error" and document["logger"] == "steeple.test"
    assert document["ts"].endswith("Z") and document["msg"] == "boom"
    out = io.StringIO()
    configure(load_settings(environ={}), {"JOURNAL_STREAM": "8:1234"}, stream=out)  # auto
    logging.getLogger("steeple.test").error("boom")
    assert out.getvalue() == "<3>steeple.test: boom\n"


@pytest.fixture
def metrics_db(tmp_path: Path) -> Iterator[Database]:
    db = Database.open(tmp_path / "steeple.db")
    yield db
    db.close()


@pytest.fixture
async def app(metrics_db: Database):  # type: ignore[no-untyped-def]
    db = metrics_db

    async def no_check(url: str) -> None:
        return None

    def build(observability: Observability):  # type: ignore[no-untyped-def]
        return create_app(
            db=db,
            clock=SystemClock(),
            nudge=lambda: None,
            check_destination=no_check,
            policy=AddressPolicy.parse([]),
            version="1.2.3",
            event_hub=EventHub(db),
            replay_rate_per_second=5,
            observability=observability,
        )

    return build


LOOPBACK = {"client": ("127.0.0.1", 40000)}


async def test_metrics_answer_only_allowed_clients_and_the_token(app) -> None:  # type: ignore[no-untyped-def]
    lifecycle = Lifecycle(engine_running=True)
    client = app(Observability(lifecycle=lifecycle)).test_client()
    assert (await client.get("/metrics", scope_base={"client": ("10.1.2.3", 1)})).status_code == 403
    assert (await client.get("/metrics", scope_base=LOOPBACK)).status_code == 200
    wide = app(Observability(lifecycle=lifecycle, metrics_allow=("10.0.0.0/8",)))
    assert (
        await wide.test_client().get("/metrics", scope_base={"client": ("10.1.2.3", 1)})
    ).status_code == 200
    token = "t" * 20
    locked = app(Observability(lifecycle=lifecycle, metrics_token=token)).test_client()
    assert (await locked.get("/metrics", scope_base=LOOPBACK)).status_code == 403
    good = {"Authorization": f"Bearer {token}"}
    assert (await locked.get("/metrics", scope_base=LOOPBACK, headers=good)).status_code == 200


async def test_metric_names_follow_the_conventions(app) -> None:  # type: ignore[no-untyped-def]
    client = app(Observability(lifecycle=Lifecycle(engine_running=True))).test_client()
    text = await (await client.get("/metrics", scope_base=LOOPBACK)).get_data(as_text=True)
    families = list(text_string_to_metric_families(text))
    ours = [f for f in families if f.name.startswith("steeple_")]
    assert len(ours) >= 12
    for family in ours:
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.name
        if "bytes" in family.name or "seconds" in family.name:
            assert family.name.endswith(("_bytes", "_seconds", "_timestamp_seconds"))
        for sample in family.samples:
            assert set(sample.labels) <= {
                "outcome",
                "reason",
                "state",
                "le",
                "version",
                "python",
                "sqlite",
                "surface",  # api | ui (steeple_open_streams)
            }
    assert not any(s.name.endswith("_created") for f in families for s in f.samples)


async def test_metrics_show_the_last_checkpoint(app, metrics_db: Database) -> None:  # type: ignore[no-untyped-def]
    client = app(Observability(lifecycle=Lifecycle(engine_running=True))).test_client()

    async def gauges() -> dict[str, float]:
        text = await (await client.get("/metrics", scope_base=LOOPBACK)).get_data(as_text=True)
        return {
            sample.name: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if "checkpoint" in sample.name
        }

    assert await gauges() == {}  # none yet in this process
    metrics_db.checkpoint(now_ms=1_700_000_000_500)
    assert await gauges() == {
        "steeple_db_last_checkpoint_timestamp_seconds": 1_700_000_000.5,
        "steeple_db_checkpoint_held_back_frames": 0,
    }


async def test_metrics_show_the_last_restart(app, metrics_db: Database) -> None:  # type: ignore[no-untyped-def]
    client = app(Observability(lifecycle=Lifecycle(engine_running=True))).test_client()

    async def gauges() -> dict[str, float]:
        text = await (await client.get("/metrics", scope_base=LOOPBACK)).get_data(as_text=True)
        return {
            sample.name: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if "restart" in sample.name
        }

    assert await gauges() == {}  # never restarted
    previous = PreviousIncarnation(id="inc_x", started_at=0, ended_at=None, last_seen_at=1_000)
    report = metrics_db.read_now(
        downtime_report, previous=previous, restarted_at=91_000, reclaimed=0
    )
    metrics_db.write_now(record_restart, report=report, now=92_000)
    assert await gauges() == {
        "steeple_last_restart_downtime_seconds": 90.0,
        "steeple_last_restart_late_occurrences": 0,
        "steeple_last_restart_missed_occurrences": 0,
    }


async def test_readyz_names_what_is_not_ready(app) -> None:  # type: ignore[no-untyped-def]
    lifecycle = Lifecycle()
    client = app(Observability(lifecycle=lifecycle)).test_client()
    reply = await client.get("/readyz")
    assert (
        reply.status_code == 503 and "engine is not running" in (await reply.get_json())["detail"]
    )
    lifecycle.engine_running = True
    assert (await client.get("/readyz")).status_code == 200
    lifecycle.draining = True
    reply = await client.get("/readyz")
    assert reply.status_code == 503 and "draining" in (await reply.get_json())["detail"]
