"""A batch of schedules in, its specs out: ``{"schedules": [<schedule>, …]}``, 1 to
:data:`MAX_BATCH` items, each read by :func:`~appliance.core.schedule_input.parse_schedule`
exactly as a single create reads its body (docs/architecture.md, "The API").

Rules this module guards:

- All or nothing: every item is validated and *every* problem of every item is reported at
  once, each as a :class:`FieldError` carrying the item's ``index`` and the field's path
  within that item (``cron``, ``catchup.policy``: what a single create would name).
  Problems with the batch itself (no list, too many items, another top-level field) have
  no index.
- The linter runs once per distinct timing of a batch (:func:`batch_warnings`): a batch
  is usually many schedules of a few timings.

Pure: no I/O, ``now`` is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Final

from appliance.core.addresses import AddressPolicy
from appliance.core.schedule_input import OWN_FIELDS, parse_like, parse_schedule
from appliance.core.schedule_warnings import schedule_warnings, warning_documents
from appliance.core.schedules import ScheduleSpec
from appliance.errors import FieldError, ValidationError

MAX_BATCH: Final = 1000
ITEMS: Final = "schedules"


def parse_batch(obj: object, *, policy: AddressPolicy) -> list[ScheduleSpec]:
    """The specs of a batch body, in order; ValidationError listing every problem."""
    if not isinstance(obj, dict):
        raise ValidationError.single("$", f'the request body must be {{"{ITEMS}": [...]}}')
    errors = [
        FieldError(field=key, message=f'is not a field of a batch; send {{"{ITEMS}": [...]}}')
        for key in obj
        if key != ITEMS
    ]
    items = obj.get(ITEMS)
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        got = f"{len(items)} items" if isinstance(items, list) else "no list"
        errors.append(
            FieldError(
                field=ITEMS,
                message=f"must be a list of 1 to {MAX_BATCH} schedules (got {got});"
                " split a larger import into several batches",
            )
        )
        raise ValidationError(errors)
    specs = []
    # Items whose other fields repeat an item already read take its spec and read only
    # their own name and body (parse_like): most of a batch's fields are the same.
    alike: dict[tuple[object, ...], ScheduleSpec] = {}
    for index, item in enumerate(items):
        key = _shared_key(item)
        like = None if key is None else alike.get(key)
        try:
            if like is None:
                spec = parse_schedule(item, policy=policy)
                if key is not None:
                    alike[key] = spec
            else:
                spec = parse_like(item, like)
            specs.append(spec)
        except ValidationError as error:
            errors.extend(at_index(index, error.errors))
    if errors:
        raise ValidationError(errors)
    return specs


class _Unkeyed(Exception):
    """A value too deep to key: the item is read in full."""


_MAX_KEY_DEPTH: Final = 4


def _shared_key(item: object) -> tuple[object, ...] | None:
    """What an item's fields but :data:`OWN_FIELDS` are, as a hashable value that is
    equal only for equal JSON (types included: ``1``, ``1.0`` and ``true`` differ), in
    the item's own order. None for a non-object item or a very deep value."""
    if not isinstance(item, dict):
        return None
    try:
        return tuple(
            (key, _frozen(value, _MAX_KEY_DEPTH))
            for key, value in item.items()
            if key not in OWN_FIELDS
        )
    except _Unkeyed:
        return None


def _frozen(value: object, depth: int) -> object:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if depth == 0:
            raise _Unkeyed
        return (dict, tuple((k, _frozen(v, depth - 1)) for k, v in value.items()))
    if isinstance(value, list):
        if depth == 0:
            raise _Unkeyed
        return (list, tuple(_frozen(v, depth - 1) for v in value))
    if isinstance(value, float):
        return (float, repr(value))  # -0.0 == 0.0 in Python, not in the JSON text
    return (type(value), value)  # int, bool, None


def at_index(index: int, errors: Iterable[FieldError]) -> list[FieldError]:
    """``errors`` of one item, marked as the batch's item ``index``."""
    return [replace(error, index=index) for error in errors]


def batch_warnings(specs: Sequence[ScheduleSpec], *, now: int) -> list[list[dict[str, str]]]:
    """Each spec's linter warnings as JSON (:func:`schedule_warnings`), worked out once per
    distinct timing and jitter. ``specs`` are anchored (``core.cursor.anchored``)."""
    found: dict[tuple[object, ...], list[dict[str, str]]] = {}
    answers = []
    for spec in specs:
        key = (*timing_key(spec), spec.jitter_seconds)
        if key not in found:
            lint = schedule_warnings(spec, jitter_seconds=spec.jitter_seconds, now=now)
            found[key] = warning_documents(lint)
        answers.append(found[key])
    return answers


def timing_key(spec: ScheduleSpec) -> tuple[object, ...]:
    """The fields that decide a spec's nominal occurrences (jitter aside): equal keys,
    equal occurrences."""
    return (
        spec.cron,
        spec.timezone,
        spec.at,
        spec.every_seconds,
        spec.start_at,
        spec.end_at,
        spec.dst_gap,
        spec.dst_fold,
    )
