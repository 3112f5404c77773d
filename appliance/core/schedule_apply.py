"""An apply: the tenant's desired set of keyed schedules in, the plan that makes the stored
set match it out (docs/schedules-in-git.md, "Apply").

Rules this module guards:

- Schedules are matched by ``key``. An item whose key no live schedule has is a
  ``create``; one whose spec differs from its schedule's is a ``change``, listed field by
  field (old → new, as the API documents draw them; header by header, secret-bearing
  values masked); one whose spec is equal is ``unchanged``. With ``prune`` a keyed
  schedule no item names is a ``delete``. A schedule without a key is never touched: the
  plan counts them.
- An item is the whole desired schedule: a field it leaves out takes its default, as on a
  create — except an interval's anchor (``start_at``), which keeps the stored one, so an
  unchanged file never moves it.
- ``timing_changed`` says whether the change moves the occurrences (``timing_key``): one
  that keeps them keeps the cursor (no replay, no gap); one that moves them plans from
  now on by the new timing.
- Every item is read by :func:`~appliance.core.schedule_input.parse_schedule` exactly as a
  single create reads its body (a header sent back masked keeps the stored value); every
  problem of every item is reported at once with the item's ``index``.

Pure: no I/O.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from appliance.core.addresses import AddressPolicy
from appliance.core.schedule_batch import MAX_BATCH, at_index, timing_key
from appliance.core.schedule_input import parse_schedule, schedule_document
from appliance.core.schedules import Schedule, ScheduleSpec
from appliance.core.secret_headers import MASK, looks_secret
from appliance.errors import FieldError, ValidationError

ITEMS: Final = "schedules"
_OPTIONS: Final = ("prune", "dry_run")


class Action(enum.StrEnum):
    CREATE = "create"
    CHANGE = "change"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldChange:
    """One field of a change: its path (``cron``, ``headers.Authorization``) and its JSON
    values before and after (None: absent)."""

    field: str
    old: object
    new: object


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    action: Action
    key: str
    index: int | None  # the item's, None for a delete
    schedule_id: str | None  # the stored schedule's, None for a create
    spec: ScheduleSpec | None  # the desired spec, None for a delete
    changes: tuple[FieldChange, ...] = ()
    timing_changed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    steps: tuple[Step, ...]
    unkeyed: int  # live schedules without a key: never touched
    unlisted: int  # keyed schedules no item names, kept: there is no prune

    def of(self, action: Action) -> list[Step]:
        return [step for step in self.steps if step.action is action]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyRequest:
    items: list[object]
    prune: bool
    dry_run: bool


def read_request(obj: object) -> ApplyRequest:
    """The shape of an apply body, ``{"schedules": [...], "prune": …, "dry_run": …}``;
    the items are read by :func:`read_items`, against the stored schedules."""
    if not isinstance(obj, dict):
        raise ValidationError.single("$", f'the request body must be {{"{ITEMS}": [...]}}')
    errors = [
        FieldError(field=name, message=f"is not a field of an apply; send {ITEMS}, prune, dry_run")
        for name in obj
        if name != ITEMS and name not in _OPTIONS
    ]
    items = obj.get(ITEMS)
    if not isinstance(items, list) or len(items) > MAX_BATCH:
        got = f"{len(items)} items" if isinstance(items, list) else "no list"
        message = f"must be a list of at most {MAX_BATCH} schedules (got {got})"
        errors.append(FieldError(field=ITEMS, message=message))
    flags = {}
    for name in _OPTIONS:
        value = obj.get(name, False)
        if not isinstance(value, bool):
            errors.append(FieldError(field=name, message="must be true or false"))
        flags[name] = value is True
    if errors:
        raise ValidationError(errors)
    assert isinstance(items, list)
    return ApplyRequest(items=items, prune=flags["prune"], dry_run=flags["dry_run"])


def read_items(
    items: Sequence[object], stored: Mapping[str, Schedule], *, policy: AddressPolicy
) -> list[ScheduleSpec]:
    """Each item's spec (``stored``: the live schedules by key, whose masked headers an
    item keeps); ValidationError listing every problem with its item's ``index``."""
    errors: list[FieldError] = []
    specs: list[ScheduleSpec] = []
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        key = item.get("key") if isinstance(item, dict) else None
        current = stored.get(key) if isinstance(key, str) else None
        try:
            spec = parse_schedule(
                item, policy=policy, stored_headers=current.spec.headers if current else ()
            )
            specs.append(spec)
        except ValidationError as error:
            errors.extend(at_index(index, error.errors))
        if isinstance(item, dict) and key is None:
            errors.append(_no_key(index))
        elif isinstance(key, str) and key in first:
            message = f"{key!r} is already the key of item {first[key]}"
            errors.append(FieldError(field="key", message=message, index=index))
        elif isinstance(key, str):
            first[key] = index
    if errors:
        raise ValidationError(errors)
    return specs


def _no_key(index: int) -> FieldError:
    message = 'every schedule of an apply needs a key, its stable name, such as "nightly-report"'
    return FieldError(field="key", message=message, index=index)


def plan_apply(specs: Sequence[ScheduleSpec], current: Sequence[Schedule], *, prune: bool) -> Plan:
    """The steps that make ``current`` (the tenant's live schedules) match ``specs`` (keyed,
    each key once), in item order, then the deletes in ``current``'s order."""
    by_key = {s.spec.key: s for s in current if s.spec.key is not None}
    steps = [_step(index, spec, by_key) for index, spec in enumerate(specs)]
    wanted = {spec.key for spec in specs}
    unlisted = [(key, s) for key, s in by_key.items() if key not in wanted]
    if prune:
        steps.extend(
            Step(action=Action.DELETE, key=key, index=None, schedule_id=s.id, spec=None)
            for key, s in unlisted
        )
    return Plan(
        steps=tuple(steps),
        unkeyed=sum(s.spec.key is None for s in current),
        unlisted=0 if prune else len(unlisted),
    )


def _step(index: int, spec: ScheduleSpec, by_key: Mapping[str, Schedule]) -> Step:
    key = spec.key
    assert key is not None  # read_items refused an item without one
    current = by_key.get(key)
    if current is None:
        return Step(action=Action.CREATE, key=key, index=index, schedule_id=None, spec=spec)
    spec = desired_spec(spec, current.spec)
    changes = field_changes(current.spec, spec)
    return Step(
        action=Action.CHANGE if changes else Action.UNCHANGED,
        key=key,
        index=index,
        schedule_id=current.id,
        spec=spec,
        changes=changes,
        timing_changed=timing_key(current.spec) != timing_key(spec),
    )


def desired_spec(spec: ScheduleSpec, current: ScheduleSpec) -> ScheduleSpec:
    """``spec`` as it replaces ``current``: an interval given no anchor keeps the stored
    one (a create would anchor it at now)."""
    unanchored = spec.every_seconds is not None and spec.start_at is None
    if unanchored and current.every_seconds is not None and current.start_at is not None:
        return replace(spec, start_at=current.start_at)
    return spec


def field_changes(before: ScheduleSpec, after: ScheduleSpec) -> tuple[FieldChange, ...]:
    """The API fields that differ, in document order; ``headers`` one header at a time,
    a secret-bearing one's values shown as the mask."""
    old, new = schedule_document(before), schedule_document(after)
    names = [*new, *(name for name in old if name not in new)]
    changes: list[FieldChange] = []
    for name in names:
        if name == "headers":
            changes.extend(_header_changes(before.headers, after.headers))
        elif _json(old.get(name)) != _json(new.get(name)):
            changes.append(FieldChange(field=name, old=old.get(name), new=new.get(name)))
    return tuple(changes)


def _header_changes(
    before: Sequence[tuple[str, str]], after: Sequence[tuple[str, str]]
) -> list[FieldChange]:
    old, new = dict(before), dict(after)
    changes = []
    for name in [*new, *(n for n in old if n not in new)]:
        if old.get(name) != new.get(name):
            shown = (lambda v: None if v is None else MASK) if looks_secret(name) else _same
            changes.append(
                FieldChange(
                    field=f"headers.{name}", old=shown(old.get(name)), new=shown(new.get(name))
                )
            )
    return changes


def _same(value: str | None) -> str | None:
    return value


def _json(value: object) -> str:
    """The JSON text of a document value: ``1``, ``1.0`` and ``true`` differ (in Python
    they are equal), as do objects whose keys come in another order (their bytes do)."""
    return json.dumps(value, ensure_ascii=False)
