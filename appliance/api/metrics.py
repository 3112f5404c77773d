"""``GET /metrics`` (Prometheus text format, official ``prometheus_client``) and
``GET /readyz`` (docs/operations.md, "What to monitor").

``/metrics`` answers only clients in ``metrics_allow`` (loopback by default) and, when
``metrics_token`` is set, with ``Authorization: Bearer <token>``. Each scrape reads the
database once, off the event loop: gauges from
:func:`appliance.store.figures.operator.operator_figures` (the figures ``/admin/health`` and
``steeple status`` show; the cost does not grow with history), counters from the events
recorded since the previous scrape (:mod:`appliance.store.figures.counters`), so the engine
carries no instrumentation. Counters count from this process's start, as
Prometheus expects: the first scrape counts the events after the newest one when the
process started (``Lifecycle.events_at_start``), deliveries before anyone scraped
included. No label carries a tenant, schedule or run: outcome and reason sets are closed
enums.

``/readyz`` is 200 only when the engine runs, the appliance is not draining (503 from the
first SIGTERM), the schema is current and the database answers within a second.
"""

from __future__ import annotations

import hmac
import ipaddress
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field

import trio
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from quart import Response, current_app, request
from quart_trio import QuartTrio

from appliance.api.bodies import json_response
from appliance.api.context import context, request_client
from appliance.api.problems import Problem
from appliance.core.lifecycle import Lifecycle
from appliance.errors import StoreError
from appliance.live.limits import Surface
from appliance.store.figures.counters import Reading, SeenEvent, read_since
from appliance.store.figures.database import sqlite_version
from appliance.store.figures.operator import Figures
from appliance.store.infra.backend import Store
from appliance.store.infra.database import WalCheckpoint
from appliance.store.infra.schema import needed_version, schema_version
from appliance.store.restarts import LastRestart

_EXTENSION = "steeple.observability"
OUTCOMES = ("succeeded", "retrying", "failed")
MISSED_REASONS = ("catchup_skip", "outside_catchup_window", "catchup_latest_superseded")
FAILED_REASONS = ("gone", "destination_blocked", "exhausted", "non_retryable_status")
LATENESS_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
READY_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Observability:
    lifecycle: Lifecycle
    metrics_allow: tuple[str, ...] = ("127.0.0.0/8", "::1/128")
    metrics_token: str = ""

    @property
    def networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in self.metrics_allow)

    @staticmethod
    def without_runtime() -> Observability:
        """For an app built without the runtime (the API's tests): nothing to wait for."""
        return Observability(lifecycle=Lifecycle(engine_running=True))


@dataclass(slots=True, kw_only=True)
class Counts:
    """Process-lifetime counters, advanced at each scrape from the event log."""

    events_cursor: int = 0  # the last event counted: at first, the process start's newest
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    missed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MISSED_REASONS, 0))
    failed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAILED_REASONS, 0))
    clock_jumps: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENESS_BUCKETS_S))
    lateness_count: int = 0
    lateness_sum_s: float = 0.0

    def apply(self, reading: Reading) -> None:
        self.events_cursor = reading.events_to
        for event in reading.events:
            self._event(event)

    def _event(self, event: SeenEvent) -> None:
        if event.type == "clock.jump_detected":
            self.clock_jumps += event.count
            return
        if event.type == "schedule.run.missed":
            self._add(self.missed, event.reason, event.count)
            return
        outcome = event.type.removeprefix("schedule.run.")
        self._add(self.outcomes, outcome, 1)
        if outcome == "failed":
            self._add(self.failed, event.reason, 1)
        if event.lateness_ms is not None:
            self._late(max(0, event.lateness_ms) / 1000)

    @staticmethod
    def _add(into: dict[str, int], key: str | None, n: int) -> None:
        if key is not None:
            into[key] = into.get(key, 0) + n

    def _late(self, seconds: float) -> None:
        self.lateness_count += 1
        self.lateness_sum_s += seconds
        for i, bound in enumerate(LATENESS_BUCKETS_S):
            if seconds <= bound:
                self.buckets[i] += 1


@dataclass(slots=True, eq=False)  # the registry keys collectors by identity
class Collector:
    """The registry's one custom collector: :meth:`refresh` reads the database (off the
    event loop), :meth:`collect` only renders what was read."""

    counts: Counts = field(default_factory=Counts)
    figures: Figures | None = None
    checkpoint: WalCheckpoint | None = None  # this process's last passive checkpoint
    version: str = ""
    round_trips: int = 0  # the store's, at the last scrape
    open_streams: dict[Surface, int] = field(default_factory=dict)  # this process's, now
    lock: trio.Lock = field(default_factory=trio.Lock)

    async def refresh(self, db: Store, now: int, version: str) -> None:
        async with self.lock:  # two scrapes at once must not count a row twice
            reading = await db.read(
                read_since, events_from=self.counts.events_cursor, disk=db.disk, now=now
            )
            self.counts.apply(reading)
            self.figures, self.version = reading.figures, version
            self.checkpoint = db.last_checkpoint
            self.round_trips = db.round_trips

    def collect(self) -> Iterator[Metric]:
        c, h = self.counts, self.figures
        yield _info(self.version)
        outcomes = CounterMetricFamily(
            "steeple_deliveries",
            "Finished delivery attempts by what they meant for their run (succeeded, retrying,"
            " failed), since this process started.",
            labels=["outcome"],
        )
        for outcome, n in sorted(c.outcomes.items()):
            outcomes.add_metric([outcome], n)
        yield outcomes
        yield _by_reason("steeple_runs_missed", "Occurrences recorded as missed.", c.missed)
        yield _by_reason("steeple_runs_failed", "Runs that ended failed.", c.failed)
        yield CounterMetricFamily(
            "steeple_clock_jumps", "Wall-clock jumps the planner detected.", value=c.clock_jumps
        )
        cumulative = [(str(b), n) for b, n in zip(LATENESS_BUCKETS_S, c.buckets, strict=True)]
        yield HistogramMetricFamily(
            "steeple_dispatch_lateness_seconds",
            "Runs finished at their first attempt: its start minus the run's due time.",
            buckets=[*cumulative, ("+Inf", c.lateness_count)],
            sum_value=c.lateness_sum_s,
        )
        if h is not None:
            yield from _gauges(h)
            yield from _recent(h)
        if self.checkpoint is not None:
            yield from _checkpoint(self.checkpoint)
        yield CounterMetricFamily(
            "steeple_db_round_trips",
            "Waits for the database server's answer (statements, BEGIN, COMMIT) since this"
            " process started; 0 on SQLite, which runs in process.",
            value=self.round_trips,
        )
        streams = GaugeMetricFamily(
            "steeple_open_streams",
            "Live event streams open now in this process, by surface (api, ui).",
            labels=["surface"],
        )
        for surface, n in sorted(self.open_streams.items()):
            streams.add_metric([str(surface)], n)
        yield streams


def _info(version: str) -> Metric:
    info = GaugeMetricFamily(
        "steeple_build_info",
        "Steeple's version, Python's and SQLite's; always 1.",
        labels=["version", "python", "sqlite"],
    )
    info.add_metric([version, platform.python_version(), sqlite_version()], 1)
    return info


def _by_reason(name: str, documentation: str, counts: dict[str, int]) -> Metric:
    family = CounterMetricFamily(
        name, documentation + " Since this process started.", labels=["reason"]
    )
    for reason, n in sorted(counts.items()):
        family.add_metric([reason], n)
    return family


def _gauges(f: Figures) -> Iterator[Metric]:
    h = f.health
    queue = GaugeMetricFamily(
        "steeple_runs_open", "Open runs: waiting (not due yet), due, running.", labels=["state"]
    )
    queue.add_metric(["waiting"], h.runs_pending - h.runs_due)
    queue.add_metric(["due"], h.runs_due)
    queue.add_metric(["running"], h.runs_running)
    yield queue
    yield GaugeMetricFamily(
        "steeple_runs_retrying",
        "Open runs waiting for a retry (a part of waiting and due above).",
        value=h.runs_retrying,
    )
    yield GaugeMetricFamily(
        "steeple_runs_breaker_waiting",
        "Retrying runs held by their target's open circuit breaker (a part of retrying).",
        value=h.runs_breaker_waiting,
    )
    yield GaugeMetricFamily(
        "steeple_oldest_due_age_seconds",
        "How long the oldest due run has waited for a slot (0: none waits).",
        value=h.oldest_due_age_ms / 1000,
    )
    yield GaugeMetricFamily(
        "steeple_planner_lag_seconds",
        "How far the earliest unplanned occurrence is in the past (0: the planner keeps up).",
        value=h.planner_lag_ms / 1000,
    )
    yield GaugeMetricFamily(
        "steeple_active_schedules",
        "Live, unpaused schedules of active (not suspended) tenants.",
        value=h.active_schedules,
    )
    yield GaugeMetricFamily("steeple_tenants", "Tenants.", value=h.tenants)
    yield GaugeMetricFamily("steeple_db_bytes", "The database file's size.", value=f.db_bytes)
    yield GaugeMetricFamily("steeple_db_wal_bytes", "The WAL file's size.", value=f.wal_bytes)
    if f.free_disk_bytes is not None:  # None on PostgreSQL: its disk is the server's
        yield GaugeMetricFamily(
            "steeple_disk_free_bytes",
            "Free space on the data directory's file system.",
            value=f.free_disk_bytes,
        )
    yield GaugeMetricFamily(
        "steeple_db_freelist_pages", "Free pages in the database file.", value=h.freelist_count
    )
    yield GaugeMetricFamily(
        "steeple_schema_version", "The database's schema version.", value=h.schema_version
    )
    if h.last_restart is not None:
        yield from _restart(h.last_restart)
    if f.last_backup_ms is not None:
        yield GaugeMetricFamily(
            "steeple_backup_last_success_timestamp_seconds",
            "When `steeple backup` last wrote a checked copy.",
            value=f.last_backup_ms / 1000,
        )
    if f.last_check_ms is not None:
        yield GaugeMetricFamily(
            "steeple_db_check_last_success_timestamp_seconds",
            "When the database check (quick_check at start) last passed.",
            value=f.last_check_ms / 1000,
        )
    if h.last_start_ms is not None:
        yield GaugeMetricFamily(
            "steeple_start_timestamp_seconds",
            "When the appliance process started.",
            value=h.last_start_ms / 1000,
        )


def _restart(restart: LastRestart) -> Iterator[Metric]:
    """The last downtime report (contracts/events/appliance.restarted.json)."""
    yield GaugeMetricFamily(
        "steeple_last_restart_downtime_seconds",
        "How long the appliance was down before its last restart.",
        value=restart.data["downtime_ms"] / 1000,
    )
    for name, what in (("late", "delivered late"), ("missed", "recorded as missed")):
        yield GaugeMetricFamily(
            f"steeple_last_restart_{name}_occurrences",
            f"Occurrences due while the appliance was down, {what} after its last restart.",
            value=restart.data[name],
        )


def _checkpoint(done: WalCheckpoint) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "steeple_db_last_checkpoint_timestamp_seconds",
        "When the checkpointer last copied the WAL into the database file.",
        value=done.at_ms / 1000,
    )
    yield GaugeMetricFamily(
        "steeple_db_checkpoint_held_back_frames",
        "WAL frames the last checkpoint could not copy (a reader still needed them).",
        value=done.held_back_frames,
    )


def _recent(f: Figures) -> Iterator[Metric]:
    """The recent rates ``/admin/health`` and ``steeple status`` show (the last
    five minutes), beside the counters above for whoever has no PromQL at hand."""
    yield GaugeMetricFamily(
        "steeple_recent_delivered_per_minute",
        "Runs that succeeded per minute over the last five minutes.",
        value=f.delivered_per_minute,
    )
    yield GaugeMetricFamily(
        "steeple_recent_failed_per_minute",
        "Runs that failed per minute over the last five minutes.",
        value=f.failed_per_minute,
    )
    for name, value in (("p50", f.lateness_p50_ms), ("p99", f.lateness_p99_ms)):
        if value is not None:
            yield GaugeMetricFamily(
                f"steeple_recent_dispatch_lateness_{name}_seconds",
                f"The {name} dispatch lateness of runs finished at their first attempt"
                " in the last five minutes.",
                value=value / 1000,
            )
    yield GaugeMetricFamily(
        "steeple_recent_clock_jumps",
        "Wall-clock jumps the planner detected in the last 24 hours.",
        value=f.clock_jumps_24h,
    )


def register(app: QuartTrio, observability: Observability) -> None:
    # Counters start with the process (Prometheus's rule), not with the first scrape.
    collector = Collector(counts=Counts(events_cursor=observability.lifecycle.events_at_start))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    ProcessCollector(registry=registry)
    app.extensions[_EXTENSION] = (observability, collector, registry)
    app.add_url_rule("/metrics", view_func=metrics, methods=["GET"])
    app.add_url_rule("/readyz", view_func=readyz, methods=["GET"])


def _state() -> tuple[Observability, Collector, CollectorRegistry]:
    value: tuple[Observability, Collector, CollectorRegistry] = current_app.extensions[_EXTENSION]
    return value


async def metrics() -> Response:
    """Prometheus text format, for allowed clients only."""
    observability, collector, registry = _state()
    _allow(observability)
    ctx = context()
    await collector.refresh(ctx.db, ctx.clock.now_ms(), ctx.version)
    collector.open_streams = ctx.streams.open_streams()
    body = generate_latest(registry)  # a few kB from figures already read: on the loop
    return Response(body, status=200, content_type="text/plain; version=0.0.4; charset=utf-8")


def _allow(observability: Observability) -> None:
    try:
        address = ipaddress.ip_address(request_client().strip("[]"))
    except ValueError:
        address = None
    allowed = address is not None and any(address in network for network in observability.networks)
    token = observability.metrics_token
    sent = request.headers.get("Authorization", "")
    if not allowed or (token and not hmac.compare_digest(sent, f"Bearer {token}")):
        raise Problem(
            status=403,
            kind="forbidden",
            title="Forbidden",
            detail="/metrics answers the clients in metrics_allow (and the metrics_token, if"
            " one is set) only",
        )


async def readyz() -> Response:
    """200 when the engine runs, the appliance is not draining, the schema is current and
    the database answers within a second; else 503 naming the failed check."""
    observability, _, _ = _state()
    lifecycle = observability.lifecycle
    failed = "draining: the appliance is stopping" if lifecycle.draining else None
    if failed is None and not lifecycle.engine_running:
        failed = "the engine is not running"
    if failed is None:
        failed = await _database_check(context().db)
    if failed is not None:
        raise Problem(status=503, kind="unavailable", title="Not ready", detail=failed)
    return json_response({"status": "ready", "version": context().version})


async def _database_check(db: Store) -> str | None:
    with trio.move_on_after(READY_TIMEOUT_S):
        try:
            version = await db.read(schema_version)
            needed = await db.read(needed_version)
        except StoreError as exc:  # PostgreSQL away: out of the balancer until it is back
            return str(exc)
        if version != needed:
            return f"the schema is at {version}, this Steeple needs {needed}"
        return None
    return f"the database did not answer within {READY_TIMEOUT_S:.0f} s"
