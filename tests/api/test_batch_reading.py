"""A batch's per-item shortcuts, without the app: items that repeat another item's fields
are read from its spec (``core.schedule_batch.parse_batch`` → ``parse_like``), next runs
are worked out once per timing (``api.rendering.render_schedules``), and a request body
without surrogate escapes is not re-encoded (``api.bodies.decode_json``). Each gives
exactly what the long way gives, problems included, and each is held to doing less."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.api import bodies, rendering
from appliance.api.problems import Problem
from appliance.api.rendering import render_schedule, render_schedules
from appliance.core import schedule_batch
from appliance.core.addresses import AddressPolicy
from appliance.core.cursor import first_fire_at
from appliance.core.schedule_batch import _shared_key, parse_batch
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import Schedule, ScheduleSpec
from appliance.errors import FieldError, ValidationError
from tests.api.conftest import START, schedule_json

POLICY = AddressPolicy()


def one_by_one(items: list[Any]) -> list[ScheduleSpec] | list[FieldError]:
    """What parse_batch must answer: each item read in full."""
    specs, errors = [], []
    for index, item in enumerate(items):
        try:
            specs.append(parse_schedule(item, policy=POLICY))
        except ValidationError as error:
            errors.extend(schedule_batch.at_index(index, error.errors))
    return errors or specs


def batched(items: list[Any]) -> list[ScheduleSpec] | list[FieldError]:
    try:
        return parse_batch({"schedules": items}, policy=POLICY)
    except ValidationError as error:
        return error.errors


ALIKE = [
    schedule_json(name="a"),
    schedule_json(name="b", payload=[1, 2]),
    {**schedule_json(name="c", body="plain"), "payload": None},
    {**schedule_json(name="d", payload_template={"at": "{{scheduled_for}}"}), "payload": None},
    schedule_json(name="e", content_type="text/plain"),
    schedule_json(name="f", content_type="text/plain", payload="x"),
]
# Items like ALIKE's first but for their own fields, each with a problem of its own.
ALIKE_BUT_WRONG = [
    schedule_json(name=" "),
    schedule_json(name=None),
    schedule_json(name=7),
    schedule_json(name="g", body="also"),
    schedule_json(name="h", payload=None),
    {**schedule_json(name="i", payload=None), "body": 3},
    {**schedule_json(name="j", payload=None), "payload_template": {"x": "{{nope}}"}},
    schedule_json(name="k", payload="x" * 70_000),
]


def test_items_alike_but_for_name_and_body_read_as_they_would_alone() -> None:
    assert batched(ALIKE) == one_by_one(ALIKE)
    mixed = [ALIKE[0], *ALIKE_BUT_WRONG, ALIKE[4]]
    assert batched(mixed) == one_by_one(mixed)


def test_items_alike_are_read_in_full_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def counted(obj: object, *, policy: AddressPolicy) -> ScheduleSpec:
        calls.append(obj)
        return parse_schedule(obj, policy=policy)

    monkeypatch.setattr(schedule_batch, "parse_schedule", counted)
    items = [schedule_json(name=f"n{i}", payload={"i": i}) for i in range(500)]
    items += [schedule_json(name=f"m{i}", cron="0 9 * * *") for i in range(500)]
    specs = parse_batch({"schedules": items}, policy=POLICY)
    assert len(calls) == 2  # one per distinct rest of the fields
    assert [s.name for s in specs] == [item["name"] for item in items]
    assert specs[7].body == b'{"i":7}'


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (1, 1.0),
        (1, True),
        (0.0, -0.0),
        (None, "None"),
        ({"a": 1}, [["a", 1]]),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # another order: only a miss, never wrong
    ],
)
def test_the_key_of_the_shared_fields_tells_json_values_apart(one: object, other: object) -> None:
    assert _shared_key({"jitter_seconds": one}) != _shared_key({"jitter_seconds": other})


def test_a_value_too_deep_to_key_is_read_in_full() -> None:
    deep: Any = 1
    for _ in range(10):
        deep = {"x": deep}
    assert _shared_key({"headers": deep}) is None
    items = [schedule_json(name="a", headers=deep), schedule_json(name="b", headers=deep)]
    assert batched(items) == one_by_one(items)


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 100), st.floats(-1, 1e4), st.sampled_from(["", "a"])
)
FIELD_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner)
)
FIELD_NAMES = st.sampled_from(
    ["jitter_seconds", "timeout_seconds", "paused", "headers", "retry", "catchup", "every",
     "content_type", "overlap", "name", "body", "payload", "id", "jitter"]
)  # fmt: skip


@given(st.lists(st.dictionaries(FIELD_NAMES, FIELD_VALUES, max_size=3), min_size=2, max_size=6))
@settings(max_examples=60, deadline=None)
def test_any_items_read_in_a_batch_as_they_would_alone(changes: list[dict[str, Any]]) -> None:
    items = [{**schedule_json(), **change} for change in changes]
    items += [{**item, "name": f"again {i}"} for i, item in enumerate(items)]
    assert batched(items) == one_by_one(items)


def schedule(spec: ScheduleSpec, schedule_id: str) -> Schedule:
    return Schedule(
        id=schedule_id,
        tenant_id="ten_1",
        spec=spec,
        version=1,
        next_fire_at=first_fire_at(spec, schedule_id=schedule_id, now=START),
        created_at=START,
        updated_at=START,
    )


def batch_of_schedules() -> list[Schedule]:
    bodies_ = [
        schedule_json(name="a"),
        schedule_json(name="b", jitter_seconds=30),
        schedule_json(name="c", paused=True),
        schedule_json(name="d", cron="0 9 * * *", timezone="Europe/Berlin"),
        {**schedule_json(name="e", at="2020-01-01T00:00:00Z"), "cron": None},
        schedule_json(name="f", jitter_seconds=30),
    ]
    # each three times: the same, then with a name and a body of its own
    again = [{**b, "name": f"{b['name']} again"} for b in bodies_]
    again = [{**b, "payload": [b["name"]]} if "payload" in b else b for b in again]
    specs = [parse_schedule(b, policy=POLICY) for b in [*bodies_, *bodies_, *again]]
    return [schedule(spec, f"sch_{i:026d}") for i, spec in enumerate(specs)]


def test_a_batch_renders_as_each_schedule_alone() -> None:
    schedules = batch_of_schedules()
    expected = [render_schedule(s, now=START) for s in schedules]
    assert json.dumps(render_schedules(schedules, now=START)) == json.dumps(expected)


def test_a_batch_works_out_next_runs_once_per_timing_without_jitter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real = rendering.next_runs

    def counted(schedule: Schedule, **kwargs: Any) -> list[dict[str, str]]:
        calls.append(schedule.spec.name.split()[0])
        return real(schedule, **kwargs)

    monkeypatch.setattr(rendering, "next_runs", counted)
    render_schedules(batch_of_schedules(), now=START)
    # a, c (paused), d, e once each; b and f (jitter: by schedule id) three times each
    assert sorted(calls) == sorted(["a", "c", "d", "e", *["b", "f"] * 3])


def test_a_body_without_surrogate_escapes_is_not_encoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = json.dumps({"schedules": [schedule_json(name=f"é {i}") for i in range(1000)]})

    def refused(*args: object, **kwargs: object) -> str:
        raise AssertionError("re-encoded")

    monkeypatch.setattr(bodies.json, "dumps", refused)
    assert bodies.decode_json(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ('{"n": "\\ud800"}', True),
        ('{"n": "\\uDFFF"}', True),
        ('{"\\udc00": 1}', True),
        ('{"n": "\\ud83d\\ude00"}', False),  # a pair: one character
        ('{"n": "\\\\ud800"}', False),  # a backslash, then text
        ('{"n": "\\u00e9 \\u2603"}', False),
    ],
)
def test_surrogate_escapes_are_still_checked(text: str, refused: bool) -> None:
    if refused:
        with pytest.raises(Problem, match="surrogate"):
            bodies.decode_json(text.encode())
    else:
        assert bodies.decode_json(text.encode()) == json.loads(text)


def test_a_batch_makes_one_document_of_specs_alike_but_for_name_and_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real = rendering.schedule_document

    def counted(spec: ScheduleSpec) -> dict[str, object]:
        calls.append(spec.name)
        return real(spec)

    monkeypatch.setattr(rendering, "schedule_document", counted)
    schedules = batch_of_schedules()
    documents = render_schedules(schedules, now=START)
    assert sorted(calls) == ["a", "b", "c", "d", "e"]  # f: b but for its name
    assert [d["name"] for d in documents] == [s.spec.name for s in schedules]
