"""The real API app over a real SQLite file, with two tenants, a settable wall clock, a
counting ``nudge`` and the real write-time destination check over a dictionary for DNS."""

from __future__ import annotations

import functools
import ipaddress
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from quart_trio import QuartTrio
from werkzeug.datastructures import Headers

from appliance.api.app import create_app
from appliance.core.addresses import AddressPolicy, IPAddress
from appliance.core.cron import parse_cron
from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.core.hosts import AllowedHosts
from appliance.core.instants import parse_instant
from appliance.core.jitter import planned_occurrences
from appliance.core.runs import AttemptOutcome, RunState, Transition, Trigger, occurrence_run
from appliance.core.schedules import Schedule
from appliance.engine.delivery import check_destination
from appliance.engine.delivery.connect import name_not_resolved
from appliance.live.hub import EventHub
from appliance.live.limits import StreamRegistry
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.materialise import insert_runs, store_body
from appliance.store.schedules import get_schedule
from appliance.store.tenants import create_tenant

START = parse_instant("2026-03-02T10:00:00.400Z")

# The fake resolver: what these names would resolve to.
FAKE_DNS: dict[str, IPAddress] = {
    "hooks.example.com": ipaddress.ip_address("93.184.216.34"),
    "intranet.example.com": ipaddress.ip_address("10.1.2.3"),
}


REPLAY_RATE = 50  # replay_rate_per_second of the test app: one replayed run every 20 ms


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class Nudges:
    count: int = 0

    def __call__(self) -> None:
        self.count += 1


def make_check_destination(
    policy: AddressPolicy, dns: dict[str, IPAddress] | None = None
) -> Callable[[str], Awaitable[None]]:
    """The real ``engine.delivery.check_destination`` with a dictionary for DNS (unknown
    names do not resolve)."""
    names = FAKE_DNS if dns is None else dns

    async def resolve(host: str) -> list[IPAddress]:
        if host not in names:
            raise name_not_resolved(f"could not resolve host {host!r}")
        return [names[host]]

    return functools.partial(check_destination, policy, resolve=resolve)


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Headers
    body: Any  # parsed JSON, or None for an empty body

    @property
    def fields(self) -> list[str]:
        """The ``field`` of every problem entry."""
        return [error["field"] for error in self.body.get("errors", [])]


@dataclass
class Api:
    """One tenant's view of the app: requests carry its key unless told otherwise."""

    app: QuartTrio
    key: str | None
    tenant_id: str = ""
    default_headers: dict[str, str] = field(default_factory=dict)

    async def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> Reply:
        sent = dict(self.default_headers)
        if self.key is not None:
            sent["Authorization"] = f"Bearer {self.key}"
        kwargs: dict[str, Any] = {}
        if json_body is not None:
            kwargs["data"] = json.dumps(json_body)
            sent["Content-Type"] = "application/json"
        elif data is not None:
            kwargs["data"] = data
        sent.update(headers or {})
        client = self.app.test_client()
        response = await client.open(
            path, method=method, headers=sent, query_string=query, **kwargs
        )
        raw = await response.get_data(as_text=True)
        body = json.loads(raw) if raw else None
        if response.status_code >= 400:
            assert response.mimetype == "application/problem+json", raw
            assert body["status"] == response.status_code
            assert {"type", "title", "status", "detail"} <= set(body)
        return Reply(status=response.status_code, headers=response.headers, body=body)

    async def create(self, **overrides: Any) -> dict[str, Any]:
        reply = await self.call("POST", "/v1/schedules", json_body=schedule_json(**overrides))
        assert reply.status == 201, reply.body
        return reply.body  # type: ignore[no-any-return]


def schedule_json(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "nightly report",
        "cron": "*/5 * * * *",
        "target_url": "https://hooks.example.com/steeple",
        "payload": {"report": "nightly", "n": 1},
    }
    for key, value in overrides.items():
        if value is ...:
            document.pop(key, None)
        else:
            document[key] = value
    return document


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def nudges() -> Nudges:
    return Nudges()


@pytest.fixture
def policy() -> AddressPolicy:
    return AddressPolicy()


@pytest.fixture
def dns() -> dict[str, IPAddress]:
    """The fake DNS of this test's app; a test may change it."""
    return dict(FAKE_DNS)


@pytest.fixture
def app(
    db: Database,
    clock: FakeClock,
    nudges: Nudges,
    policy: AddressPolicy,
    dns: dict[str, IPAddress],
) -> QuartTrio:
    return build_app(db=db, clock=clock, nudges=nudges, policy=policy, dns=dns)


def build_app(
    *,
    db: Database,
    clock: FakeClock,
    nudges: Nudges,
    policy: AddressPolicy,
    dns: dict[str, IPAddress] | None = None,
    max_schedules: int | None = None,
    send_probe: Callable[[DeliveryRequest], Awaitable[ProbeAnswer]] | None = None,
    allowed_hosts: AllowedHosts | None = None,
    trust_proxy: int = 0,
    streams: StreamRegistry | None = None,
) -> QuartTrio:
    return create_app(
        db=db,
        clock=clock,
        nudge=nudges,
        check_destination=make_check_destination(policy, dns),
        policy=policy,
        version="9.9.9-test",
        event_hub=EventHub(db),
        streams=streams,
        max_schedules=max_schedules,
        replay_rate_per_second=REPLAY_RATE,
        send_probe=send_probe,
        allowed_hosts=allowed_hosts,
        trust_proxy=trust_proxy,
    )


@pytest.fixture
def api(app: QuartTrio, db: Database) -> Api:
    tenant = db.write_now(create_tenant, name="alpha", now=START)
    return Api(app=app, key=tenant.api_key, tenant_id=tenant.tenant_id)


@pytest.fixture
def other(app: QuartTrio, db: Database) -> Api:
    """A second tenant, for isolation."""
    tenant = db.write_now(create_tenant, name="beta", now=START)
    return Api(app=app, key=tenant.api_key, tenant_id=tenant.tenant_id)


@pytest.fixture
def anonymous(app: QuartTrio) -> Api:
    return Api(app=app, key=None)


def load_schedule(db: Database, tenant_id: str, schedule_id: str) -> Schedule:
    schedule = db.read_now(get_schedule, tenant_id=tenant_id, schedule_id=schedule_id)
    assert schedule is not None
    return schedule


def plan_runs(db: Database, schedule: Schedule, *, after: int, count: int) -> list[int]:
    """Materialise the next ``count`` occurrences after ``after`` the way the planner does
    (same occurrence function, same row builder); returns their ``scheduled_for``."""
    spec = schedule.spec
    planned = list(
        itertools.islice(
            planned_occurrences(
                parse_cron(spec.cron, spec.timezone),
                schedule_id=schedule.id,
                jitter_seconds=spec.jitter_seconds,
                after_ms=after,
            ),
            count,
        )
    )

    def write(conn: Any) -> None:
        digest = store_body(conn, content_type=spec.content_type, body=spec.body)
        for occurrence in planned:
            run = occurrence_run(
                schedule_id=schedule.id,
                tenant_id=schedule.tenant_id,
                schedule_version=schedule.version,
                scheduled_for=occurrence.scheduled_for,
                due_at=occurrence.due_at,
                state=RunState.PENDING,
                trigger=Trigger.SCHEDULE,
                body_digest=digest,
            )
            assert insert_runs(conn, [run], now=after) == {run.id}

    db.write_now(write)
    return [occurrence.scheduled_for for occurrence in planned]


def deliver_due(db: Database, *, now: int, status: int = 200) -> list[str]:
    """Claim every due run and record one finished attempt for each, through the same store
    functions the dispatcher uses; 2xx succeeds, anything else fails permanently."""
    owner = db.write_now(register_incarnation, pid=1, now=now)
    batch = db.write_now(claim_runs, owner=owner, now=now, lease_ms=60_000, limit=100)
    ok = 200 <= status < 300
    completion = Completion(
        outcome=AttemptOutcome.OK if ok else AttemptOutcome.PERMANENT,
        transition=Transition.SUCCEED if ok else Transition.FAIL,
        due_at=None,
        failure_reason=None if ok else "gone",
        http_status=status,
        error=None if ok else f"HTTP {status}",
        latency_ms=12,
        response_excerpt="ok" if ok else "gone",
    )
    for run in batch.runs:
        assert db.write_now(complete_run, run=run, completion=completion, now=now + 12)
    return [run.run_id for run in batch.runs]
