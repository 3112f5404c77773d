"""The pure plan of an apply: matched by key, changes field by field, the interval's
anchor kept, JSON values compared as JSON, deletes only with prune, unkeyed untouched."""

from __future__ import annotations

from typing import Any

import pytest

from appliance.core.addresses import AddressPolicy
from appliance.core.cursor import anchored
from appliance.core.schedule_apply import Action, FieldChange, plan_apply, read_items
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import Schedule
from appliance.errors import ValidationError

NOW = 1_780_000_000_000
POLICY = AddressPolicy()


def document(key: str | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": key or "unkeyed",
        "cron": "0 3 * * *",
        "target_url": "https://hooks.example.com/x",
        "payload": {"n": 1},
    }
    if key is not None:
        base["key"] = key
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def stored(n: int, doc: dict[str, Any]) -> Schedule:
    spec = anchored(parse_schedule(doc, policy=POLICY), now=NOW - 3_600_000)
    return Schedule(id=f"sch_{n}", tenant_id="ten_1", spec=spec, version=3,
                    next_fire_at=NOW + 1000, created_at=NOW, updated_at=NOW)  # fmt: skip


def plan(items: list[dict[str, Any]], current: list[Schedule], *, prune: bool = False) -> Any:
    by_key = {s.spec.key: s for s in current if s.spec.key is not None}
    return plan_apply(read_items(items, by_key, policy=POLICY), current, prune=prune)


def test_steps_are_matched_by_key_in_item_order_then_the_deletes() -> None:
    current = [stored(1, document("a")), stored(2, document("gone")), stored(3, document(None))]
    found = plan([document("new"), document("a")], current, prune=True)
    assert [(s.action, s.key, s.index, s.schedule_id) for s in found.steps] == [
        (Action.CREATE, "new", 0, None),
        (Action.UNCHANGED, "a", 1, "sch_1"),
        (Action.DELETE, "gone", None, "sch_2"),
    ]
    assert (found.unkeyed, found.unlisted) == (1, 0)
    kept = plan([], current)
    assert kept.steps == ()  # without prune nothing is deleted
    assert (kept.unkeyed, kept.unlisted) == (1, 2)  # "a" and "gone" kept, and counted


def test_a_change_lists_each_field_and_says_whether_the_timing_moved() -> None:
    current = [stored(1, document("a", headers={"Authorization": "Bearer x", "X-A": "1"}))]
    wanted = document("a", name="b", headers={"Authorization": "Bearer y", "X-B": "2"})
    (step,) = plan([wanted], current).steps
    assert step.action is Action.CHANGE and not step.timing_changed
    assert step.changes == (
        FieldChange(field="name", old="a", new="b"),
        FieldChange(field="headers.Authorization", old="<masked>", new="<masked>"),
        FieldChange(field="headers.X-B", old=None, new="2"),
        FieldChange(field="headers.X-A", old="1", new=None),
    )
    (step,) = plan([document("a", cron="0 4 * * *")], current).steps
    assert step.timing_changed
    assert step.changes[0] == FieldChange(field="cron", old="0 3 * * *", new="0 4 * * *")


@pytest.mark.parametrize(
    ("old", "new"), [(1, True), (1, 1.0), ({"a": 1, "b": 2}, {"b": 2, "a": 1})]
)
def test_payloads_equal_in_python_but_not_as_json_differ(old: object, new: object) -> None:
    (step,) = plan([document("a", payload=new)], [stored(1, document("a", payload=old))]).steps
    assert [c.field for c in step.changes] == ["payload"]


def test_an_interval_without_an_anchor_keeps_the_stored_one() -> None:
    interval = document("a", cron=None, every="15m")
    (step,) = plan([interval], [stored(1, interval)]).steps
    assert step.action is Action.UNCHANGED
    anchored_elsewhere = {**interval, "start_at": "2026-01-01T00:00:00Z"}
    (step,) = plan([anchored_elsewhere], [stored(1, interval)]).steps
    assert step.timing_changed and [c.field for c in step.changes] == ["start_at"]


def test_every_item_problem_is_named_by_index() -> None:
    items = [document("a", cron="x"), document(None), document("a"), "not an object"]
    with pytest.raises(ValidationError) as caught:
        read_items(items, {}, policy=POLICY)
    assert [(e.index, e.field) for e in caught.value.errors] == [
        (0, "cron"),
        (1, "key"),
        (2, "key"),
        (3, "$"),
    ]
