"""The schedule as a value: what a tenant asked for (``ScheduleSpec``) and what is stored
(``Schedule``). Input parsing and validation of tenant JSON lives in ``core.schedule_input``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from appliance.core.dst import Fold, Gap
from appliance.core.retry import DEFAULT_POLICY, RetryPolicy

DEFAULT_CATCHUP_WINDOW_SECONDS = 3600
DEFAULT_TIMEOUT_SECONDS = 30
DEFAULT_CONTENT_TYPE = "application/json"


class CatchupPolicy(enum.StrEnum):
    ALL = "all"  # every misfired occurrence inside the window, oldest first
    LATEST = "latest"  # only the newest misfired occurrence inside the window
    SKIP = "skip"  # none: every misfired occurrence becomes a `missed` row


# The one default: an API create without ``catchup.policy`` and the web form's blank
# form and a form post without the field (a schedule behaves the same after an outage
# wherever it was made).
DEFAULT_CATCHUP_POLICY = CatchupPolicy.ALL


class Overlap(enum.StrEnum):
    """What an occurrence due while an earlier run of its schedule is still open becomes
    (docs/schedules.md, "Overlap")."""

    ALLOW = "allow"  # delivered regardless (concurrent runs are possible)
    SKIP = "skip"  # recorded `missed` with reason `overlap`
    BUFFER_ONE = "buffer_one"  # at most one waits; later ones recorded like `skip`


class Method(enum.StrEnum):
    """The HTTP method every delivery of a schedule uses (docs/schedules.md, "HTTP
    methods"). GET and DELETE carry no body: no content, no ``Content-Type``, no
    ``Content-Length``; their signature signs the empty body (ADR 0032)."""

    POST = "POST"  # the default: what every schedule did before methods
    PUT = "PUT"
    PATCH = "PATCH"
    GET = "GET"
    DELETE = "DELETE"

    @property
    def carries_body(self) -> bool:
        return self not in _BODILESS


_BODILESS = frozenset({Method.GET, Method.DELETE})
# The methods' names whose requests carry no body, as tenant JSON and forms spell them.
BODILESS_METHODS = frozenset(m.value for m in Method if not m.carries_body)


class PayloadKind(enum.StrEnum):
    JSON = "json"  # tenant gave `payload` (any JSON value), sent as compact JSON
    BODY = "body"  # tenant gave `body` (a string), sent verbatim


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSpec:
    name: str
    cron: str
    timezone: str
    target_url: str
    payload_kind: PayloadKind
    body: bytes  # exact bytes sent on every attempt; a template's when ``templated``
    content_type: str
    headers: tuple[tuple[str, str], ...]  # tenant headers, none reserved
    jitter_seconds: int
    catchup_policy: CatchupPolicy
    catchup_window_seconds: int
    timeout_seconds: int
    paused: bool
    # Timing besides ``cron`` (core.timing): at most one of ``at`` and ``every_seconds``
    # is set, and then ``cron`` is ''. Instants are epoch ms, whole seconds.
    at: int | None = None  # a one-off: the single occurrence
    every_seconds: int | None = None  # an interval from ``start_at`` (its anchor)
    start_at: int | None = None  # nothing is planned before it (inclusive)
    end_at: int | None = None  # nothing is planned after it (inclusive)
    overlap: Overlap = Overlap.ALLOW
    retry: RetryPolicy = DEFAULT_POLICY  # decides every retry of the schedule's runs
    # ``body`` is a ``payload_template`` (core.payload_template): each run sends it with
    # its own instants and ids substituted, fixed when the run is materialised. Only with
    # payload_kind JSON.
    templated: bool = False

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts

    # A cron schedule's DST policy (core.dst, ADR 0043); None: ADR 0037's rule.
    dst_gap: Gap | None = None
    dst_fold: Fold | None = None
    # The tenant's stable name for the schedule (core.schedule_input.KEY_PATTERN), unique
    # among its live schedules; None: it has none.
    key: str | None = None
    # Every delivery's method. A bodiless one (``Method.carries_body``) has ``body`` b"",
    # ``content_type`` "", payload_kind JSON and ``templated`` False.
    method: Method = Method.POST


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    id: str
    tenant_id: str
    spec: ScheduleSpec
    version: int
    next_fire_at: int | None  # forward-only planning cursor (ms); None: never fires again
    created_at: int
    updated_at: int


class ScheduleStatus(enum.StrEnum):
    """What a schedule is doing, as the API's ``status`` and every page of the UI show it."""

    ACTIVE = "active"  # planned
    PAUSED = "paused"
    COMPLETED = "completed"  # nothing more will be planned: a one-off done, past end_at


def schedule_status(schedule: Schedule) -> ScheduleStatus:
    """Paused wins; otherwise a schedule with no next occurrence is completed. The store's
    status filter (``store.overview.find_schedules``) says the same rule in SQL."""
    if schedule.spec.paused:
        return ScheduleStatus.PAUSED
    return ScheduleStatus.ACTIVE if schedule.next_fire_at is not None else ScheduleStatus.COMPLETED
