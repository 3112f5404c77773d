"""An apply (``POST /v1/schedules/apply``): the tenant's keyed schedules made to match a
desired set, in the caller's one write transaction (docs/schedules-in-git.md).

Rules this module guards:

- The plan is :func:`appliance.core.schedule_apply.plan_apply` over the tenant's live
  schedules as this transaction reads them; the specs were read (masked headers resolved)
  against the keyed schedules at the versions in ``seen``: if those changed meanwhile,
  :class:`VersionMismatch` (the caller reads again and retries).
- Each step is the single operation's own store function, events included: a delete is
  :func:`~appliance.store.schedules.delete_schedule` (``schedule.deleted``), a change
  :func:`~appliance.store.schedules.update_schedule` (``schedule.updated``; it keeps the
  cursor unless the change re-plans), the creates one
  :func:`~appliance.store.schedules.create_schedules` (``schedule.created``, counted
  against the tenant's limit after the deletes). Unchanged schedules are not written.
- All or nothing: every refusal of a step is collected with its item's ``index`` and
  raised as one ValidationError, which rolls the caller's transaction back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Final

from appliance.core.events import Actor
from appliance.core.schedule_apply import Action, Plan, Step, plan_apply
from appliance.core.schedule_batch import at_index
from appliance.core.schedules import Schedule, ScheduleSpec
from appliance.errors import FieldError, ValidationError
from appliance.store import schedules as store
from appliance.store.infra.connection import Connection
from appliance.store.schedules import VersionMismatch

_PAGE: Final = 1000


def live_schedules(conn: Connection, *, tenant_id: str) -> list[Schedule]:
    """Every live schedule of the tenant, by id (the tenant's limit bounds them)."""
    return list(_pages(conn, tenant_id))


def _pages(conn: Connection, tenant_id: str) -> Iterator[Schedule]:
    after: str | None = None
    while page := store.list_schedules(conn, tenant_id=tenant_id, limit=_PAGE, after_id=after):
        yield from page
        after = page[-1].id


def keyed_versions(schedules: Sequence[Schedule]) -> dict[str, int]:
    """The version of each keyed schedule, by id: what ``seen`` is."""
    return {s.id: s.version for s in schedules if s.spec.key is not None}


def plan_schedules(
    conn: Connection, *, tenant_id: str, specs: Sequence[ScheduleSpec], prune: bool
) -> Plan:
    """The plan of an apply, written nowhere (a dry run)."""
    return plan_apply(specs, live_schedules(conn, tenant_id=tenant_id), prune=prune)


def apply_schedules(
    conn: Connection,
    *,
    tenant_id: str,
    specs: Sequence[ScheduleSpec],
    prune: bool,
    seen: Mapping[str, int],
    now: int,
    max_schedules: int | None,
    actor: Actor,
) -> Plan:
    """Apply the plan, all or nothing; the plan, its creates carrying their new ids."""
    current = live_schedules(conn, tenant_id=tenant_id)
    if keyed_versions(current) != dict(seen):
        raise VersionMismatch("the tenant's keyed schedules changed while the apply was read")
    plan = plan_apply(specs, current, prune=prune)
    versions = {s.id: s.version for s in current}
    errors: list[FieldError] = []
    for step in plan.of(Action.DELETE):
        assert step.schedule_id is not None
        store.delete_schedule(
            conn, tenant_id=tenant_id, schedule_id=step.schedule_id, now=now,
            expected_version=versions[step.schedule_id], actor=actor,
        )  # fmt: skip
    for step in plan.of(Action.CHANGE):
        errors.extend(_change(conn, tenant_id, step, versions, now=now, actor=actor))
    creates = plan.of(Action.CREATE)
    created = _create(conn, tenant_id, creates, now, max_schedules, actor, errors)
    if errors:
        raise ValidationError(sorted(errors, key=lambda e: e.index or 0))
    ids = {step.key: schedule.id for step, schedule in zip(creates, created, strict=True)}
    steps = tuple(
        replace(step, schedule_id=ids[step.key]) if step.action is Action.CREATE else step
        for step in plan.steps
    )
    return replace(plan, steps=steps)


def _change(
    conn: Connection,
    tenant_id: str,
    step: Step,
    versions: Mapping[str, int],
    *,
    now: int,
    actor: Actor,
) -> list[FieldError]:
    assert step.schedule_id is not None and step.spec is not None and step.index is not None
    try:
        store.update_schedule(
            conn, tenant_id=tenant_id, schedule_id=step.schedule_id, spec=step.spec, now=now,
            expected_version=versions[step.schedule_id], actor=actor,
        )  # fmt: skip
    except ValidationError as error:  # a new timing that never fires after now
        return at_index(step.index, error.errors)
    return []


def _create(
    conn: Connection,
    tenant_id: str,
    creates: Sequence[Step],
    now: int,
    max_schedules: int | None,
    actor: Actor,
    errors: list[FieldError],
) -> list[Schedule]:
    if not creates:
        return []
    specs = [step.spec for step in creates if step.spec is not None]
    try:
        return store.create_schedules(
            conn, tenant_id=tenant_id, specs=specs, now=now, max_schedules=max_schedules,
            actor=actor,
        )  # fmt: skip
    except ValidationError as error:  # indexes of the creates: the items' instead
        for found in error.errors:
            index = creates[found.index or 0].index
            errors.append(replace(found, index=index))
        return []
