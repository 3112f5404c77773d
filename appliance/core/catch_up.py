"""Catch-up: what a planned occurrence becomes when planning finds it late (ADR 0033
"Planning", docs/schedules.md "Catch-up"). The planner pass
(:mod:`appliance.store.usecases.plan_pass`) asks :func:`judge` about each occurrence it
examines and writes what it answers; nothing here reads a clock or a row.

- An occurrence is a *misfire* when it is planned more than ``misfire_ms`` after its
  ``due_at`` (the appliance was down, or the planner lagged). An occurrence that is not a
  misfire is always delivered, whatever the policy.
- A misfire older than the schedule's catch-up window (``window_ms`` past its ``due_at``)
  is missed (:attr:`MissReason.OUTSIDE_WINDOW`) under every policy: no misfire is delivered
  later than its window allows.
- Inside the window, ``all`` delivers it; ``skip`` misses it; ``latest`` delivers it only
  when the occurrence that follows it is not a misfire too, so of a run of misfires only
  the newest is delivered.
- A verdict depends on the occurrence, the one after it and ``now`` alone: a pass that
  stops at a bound and the next pass that resumes from the cursor judge the same
  occurrences the same way. A later ``now`` never turns a miss into a delivery.
"""

from __future__ import annotations

import enum

from appliance.core.schedules import CatchupPolicy


class MissReason(enum.StrEnum):
    """Why an occurrence became a ``missed`` row (``job_runs.missed_reason`` and the
    ``schedule.run.missed`` event's ``reason``)."""

    OUTSIDE_WINDOW = "outside_catchup_window"  # older than the schedule's catch-up window
    SKIPPED = "catchup_skip"  # policy `skip`
    SUPERSEDED = "catchup_latest_superseded"  # policy `latest`: a newer one was delivered


def is_misfire(due_at: int, *, now: int, misfire_ms: int) -> bool:
    """Whether an occurrence due at ``due_at`` and planned at ``now`` is late enough to be
    judged by the catch-up policy."""
    return now - due_at > misfire_ms


def judge(
    due_at: int,
    following_due_at: int | None,
    *,
    now: int,
    policy: CatchupPolicy,
    window_ms: int,
    misfire_ms: int,
) -> MissReason | None:
    """None if the occurrence due at ``due_at`` is to be delivered, else why it is missed.
    ``following_due_at``: when the schedule's next occurrence is due (None: there is
    none), which ``latest`` needs to know whether this one is the newest misfire."""
    if not is_misfire(due_at, now=now, misfire_ms=misfire_ms):
        return None
    if now - due_at > window_ms:
        return MissReason.OUTSIDE_WINDOW
    if policy is CatchupPolicy.ALL:
        return None
    if policy is CatchupPolicy.SKIP:
        return MissReason.SKIPPED
    newer_misfire = following_due_at is not None and is_misfire(
        following_due_at, now=now, misfire_ms=misfire_ms
    )
    return MissReason.SUPERSEDED if newer_misfire else None
