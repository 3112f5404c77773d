"""A spec as the ``schedules`` columns (``store.schedule_rows.spec_values``): each column's
value is the spec's field as stored — enums as their values, flags as 0/1, headers as
JSON pairs, the retry policy as ``max_attempts`` and the rest's text — and equal retry
policies (a batch's items share a few) are turned into text once."""

from __future__ import annotations

from appliance.core.addresses import AddressPolicy
from appliance.core.retry_input import stored_retry
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import ScheduleSpec
from appliance.store import schedule_rows
from appliance.store.infra import rows
from appliance.store.schedule_rows import SPEC_FIELDS, spec_values
from tests.api.conftest import schedule_json


def column_by_column(spec: ScheduleSpec) -> tuple[object, ...]:
    """Each column's value worked out by its own rule, the long way."""
    stored: dict[str, object] = {
        "payload_kind": spec.payload_kind.value,
        "headers": rows.headers_column(spec.headers),
        "catchup_policy": spec.catchup_policy.value,
        "paused": int(spec.paused),
        "templated": int(spec.templated),
        "max_attempts": spec.retry.max_attempts,
        "retry_policy": stored_retry(spec.retry),
    }
    return tuple(stored[name] if name in stored else getattr(spec, name) for name in SPEC_FIELDS)


SPECS = [
    schedule_json(),
    schedule_json(headers={"X-A": "1", "X-B": "two"}, paused=True, jitter_seconds=5),
    {**schedule_json(body="plain", content_type="text/plain"), "payload": None},
    {**schedule_json(payload_template={"at": "{{scheduled_for}}"}), "payload": None},
    schedule_json(retry={"max_attempts": 3, "backoff": {"initial": 2, "factor": 3, "max": 3600}}),
    schedule_json(retry={"backoff": [1, 2], "retry_on_status": [503]}, overlap="skip"),
    {**schedule_json(every="15m", start_at="2030-01-01T00:00:00Z"), "cron": None},
    {**schedule_json(at="2030-01-01T00:00:00Z"), "cron": None},
    schedule_json(dst={"gap": "skip", "fold": "both"}, catchup={"policy": "latest"}),
]


def test_each_column_holds_the_specs_field_as_stored() -> None:
    for document in SPECS:
        spec = parse_schedule(document, policy=AddressPolicy())
        assert spec_values(spec) == column_by_column(spec), document


def test_equal_retry_policies_are_turned_into_text_once() -> None:
    document = schedule_json(retry={"backoff": [7, 8], "max_age_seconds": 3600})
    specs = [
        parse_schedule({**document, "name": f"n{i}"}, policy=AddressPolicy()) for i in range(5)
    ]
    before = schedule_rows._stored_retry.cache_info()
    for spec in specs:
        spec_values(spec)
    after = schedule_rows._stored_retry.cache_info()
    assert after.misses - before.misses <= 1
    assert after.hits - before.hits >= 4
