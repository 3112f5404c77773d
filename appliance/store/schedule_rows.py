"""A schedule as a row of ``schedules``: its columns, how a row becomes a
:class:`~appliance.core.schedules.Schedule` and a spec becomes column values — for the
queries of :mod:`appliance.store.schedules`."""

from __future__ import annotations

from functools import lru_cache
from operator import attrgetter
from typing import Any, Final

from appliance.core.dst import Fold, Gap
from appliance.core.retry_input import stored_policy, stored_retry
from appliance.core.schedules import (
    CatchupPolicy,
    Method,
    Overlap,
    PayloadKind,
    Schedule,
    ScheduleSpec,
)
from appliance.store.infra import rows

# The spec's fields are the schedules columns of the same names, but for ``retry``: its
# ``max_attempts`` column and the rest in ``retry_policy`` (core.retry_input).
SPEC_FIELDS: Final = (
    *(name for name in ScheduleSpec.__dataclass_fields__ if name != "retry"),
    "max_attempts",
    "retry_policy",
)


def _schedule(
    *,
    id: str,
    tenant_id: str,
    next_fire_at: int | None,
    version: int,
    created_at: int,
    updated_at: int,
    max_attempts: int,
    retry_policy: str | None,
    **spec: Any,
) -> Schedule:
    return Schedule(
        id=id,
        tenant_id=tenant_id,
        spec=ScheduleSpec(retry=stored_policy(max_attempts, retry_policy), **spec),
        version=version,
        next_fire_at=next_fire_at,
        created_at=created_at,
        updated_at=updated_at,
    )


COLUMNS: Final = rows.Columns(
    _schedule,
    ["id", "tenant_id", *SPEC_FIELDS, "next_fire_at", "version", "created_at", "updated_at"],
    convert={
        "id": rows.text,
        "tenant_id": rows.text,
        "name": rows.text,
        "cron": rows.text,
        "timezone": rows.text,
        "target_url": rows.text,
        "payload_kind": rows.enum_of(PayloadKind),
        "body": rows.blob,
        "content_type": rows.text,
        "headers": rows.headers,
        "jitter_seconds": rows.integer,
        "catchup_policy": rows.enum_of(CatchupPolicy),
        "catchup_window_seconds": rows.integer,
        "max_attempts": rows.integer,
        "retry_policy": rows.optional_text,
        "templated": rows.flag,
        "timeout_seconds": rows.integer,
        "paused": rows.flag,
        "at": rows.optional_integer,
        "every_seconds": rows.optional_integer,
        "start_at": rows.optional_integer,
        "end_at": rows.optional_integer,
        "overlap": rows.enum_of(Overlap),
        "dst_gap": rows.optional_enum_of(Gap),
        "dst_fold": rows.optional_enum_of(Fold),
        "key": rows.optional_text,
        "method": rows.enum_of(Method),
        "next_fire_at": rows.optional_integer,
        "version": rows.integer,
        "created_at": rows.integer,
        "updated_at": rows.integer,
    },
)


def spec_values(spec: ScheduleSpec) -> tuple[object, ...]:
    """The spec's column values, in ``SPEC_FIELDS`` order: its fields read at once, then
    the ones stored differently put in their places (a batch writes a thousand)."""
    values = list(_FIELDS_OF(spec))
    values[_AT["payload_kind"]] = spec.payload_kind.value
    values[_AT["method"]] = spec.method.value
    values[_AT["headers"]] = rows.headers_column(spec.headers) if spec.headers else "[]"
    values[_AT["catchup_policy"]] = spec.catchup_policy.value
    values[_AT["paused"]] = int(spec.paused)
    values[_AT["templated"]] = int(spec.templated)
    values[_AT["max_attempts"]] = spec.retry.max_attempts
    values[_AT["retry_policy"]] = _stored_retry(spec.retry)
    return tuple(values)


_AT: Final = {name: index for index, name in enumerate(SPEC_FIELDS)}
# Each column's field of the spec; max_attempts and retry_policy read "retry", replaced.
_FIELDS_OF: Final = attrgetter(
    *(name if name in ScheduleSpec.__dataclass_fields__ else "retry" for name in SPEC_FIELDS)
)
# RetryPolicy is a frozen dataclass: equal policies, one text. A batch shares a few.
_stored_retry: Final = lru_cache(maxsize=256)(stored_retry)
