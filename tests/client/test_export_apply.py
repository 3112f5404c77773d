"""Export then apply is a no-op, without an appliance: a schedule as the API renders it,
exported (secrets masked), written by ``dump``, read by ``load``, read as an apply item
against the stored schedule and planned, is ``unchanged`` — over generated schedules.
The same promise end to end is tests/e2e/test_schedules_as_code.py's."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.api.rendering import render_schedule
from appliance.client.apply import exported
from appliance.client.schedules_file import dump, load
from appliance.core.addresses import AddressPolicy
from appliance.core.cursor import anchored
from appliance.core.schedule_apply import Action, plan_apply, read_items
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import Schedule
from appliance.core.secret_headers import MASK, looks_secret

NOW = 1_780_000_000_000
POLICY = AddressPolicy()

_words = st.text("abcdefghijklmnopqrstuvwxyz -_.${}", min_size=1, max_size=12).filter(str.strip)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_timing = st.one_of(
    st.fixed_dictionaries(
        {"cron": st.sampled_from(["*/5 * * * *", "0 3 * * *", "30 2 * * 0", "0 0 1 * *"])},
        optional={
            "timezone": st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
            "dst": st.just({"gap": "skip"}),
        },
    ),
    st.fixed_dictionaries({"every": st.sampled_from(["15m", "1h", "90s"])}),
    st.fixed_dictionaries({"at": st.just("2026-12-24T18:00:00Z")}),
)
_body = st.one_of(
    st.fixed_dictionaries({"payload": _json_values.filter(lambda v: v is not None)}),
    st.fixed_dictionaries({"body": st.text(max_size=20), "content_type": st.just("text/plain")}),
    st.fixed_dictionaries({"payload_template": st.just({"at": "{{scheduled_for}}"})}),
)
_headers = st.dictionaries(
    st.sampled_from(["Authorization", "X-Team", "X-Api-Key", "Accept"]),
    st.text("abc XYZ09=/+", min_size=1, max_size=10).filter(lambda v: v.strip() == v),
    max_size=3,
)
_rest = st.fixed_dictionaries(
    {},
    optional={
        "headers": _headers,
        "jitter_seconds": st.integers(0, 60),
        "catchup": st.fixed_dictionaries({"policy": st.sampled_from(["all", "latest", "skip"])}),
        "retry": st.fixed_dictionaries({"max_attempts": st.integers(1, 10)}),
        "timeout_seconds": st.integers(1, 300),
        "paused": st.booleans(),
        "overlap": st.sampled_from(["allow", "skip", "buffer_one"]),
    },
)


@st.composite
def schedules(draw: st.DrawFn) -> list[Schedule]:
    count = draw(st.integers(1, 4))
    found = []
    for n in range(count):
        document: dict[str, Any] = {
            "key": f"s-{n}",
            "name": draw(_words),
            "target_url": "https://hooks.example.com/x",
            **draw(_timing),
            **draw(_body),
            **draw(_rest),
        }
        spec = anchored(parse_schedule(document, policy=POLICY), now=NOW)
        found.append(
            Schedule(id=f"sch_{n:026d}", tenant_id="ten_1", spec=spec, version=1,
                     next_fire_at=NOW + 60_000, created_at=NOW, updated_at=NOW)
        )  # fmt: skip
    return found


@settings(max_examples=60, deadline=None)
@given(schedules())
def test_export_then_apply_plans_nothing(stored: list[Schedule]) -> None:
    documents = [exported(render_schedule(s, now=NOW)) for s in stored]
    for schedule, document in zip(stored, documents, strict=True):
        headers = document.get("headers", {})
        assert isinstance(headers, dict)
        for name, _ in schedule.spec.headers:
            assert headers[name] == (
                MASK if looks_secret(name) else dict(schedule.spec.headers)[name]
            )
    text = dump(documents)
    items = load(text, env={})
    by_key = {s.spec.key: s for s in stored if s.spec.key is not None}
    specs = read_items([item.document for item in items], by_key, policy=POLICY)
    plan = plan_apply(specs, stored, prune=True)
    assert [step.action for step in plan.steps] == [Action.UNCHANGED] * len(stored)
