"""The overlap decision: what an occurrence due while an earlier run of its schedule is
still open becomes (docs/schedules.md, "Overlap"). The claim's gate
(:mod:`appliance.store.usecases.overlap`) reads one schedule's open gated runs, asks
:func:`gate` and applies the verdicts in the claim's transaction; nothing here reads a
clock or a row.

- A schedule is *busy* while one of its gated runs is ``running`` or ``retry_wait``, or is
  a tenant's replay waiting to run (``pending`` with attempts behind it). Manual triggers
  and replays are the tenant's explicit requests: the gate never judges them.
- The occurrences that have *come* (``scheduled_for <= now``, pending, never attempted)
  are judged oldest first; one not yet due (``due_at > now``: jitter) keeps its place in
  that order but gets no verdict until it is due. ``skip`` lets one through only when the
  schedule is not busy; ``buffer_one`` lets one more wait (:attr:`Gate.HOLD`). Any come
  occurrence beyond that is :attr:`Gate.SKIP` (a ``missed`` row, reason ``overlap``).
- A waiting occurrence is held back by moving its ``due_at`` :data:`HOLD_MS` ahead (ADR
  0033: only ``due_at`` moves, never ``scheduled_for`` or the key); each time it comes
  due the gate looks again, so it starts at most that long after the schedule stops being
  busy.
- So ``skip`` never has two runs of a schedule open for delivery at once, and
  ``buffer_one`` at most one running and one waiting; ``allow`` lets everything through.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final, Protocol, TypeVar

from appliance.core.runs import RunState
from appliance.core.schedules import Overlap

HOLD_MS: Final = 1_000
OVERLAP_REASON: Final = "overlap"  # a skipped run's failure_reason and its event's reason


class Gate(enum.StrEnum):
    """The verdict on one come, due occurrence."""

    CLAIM = "claim"  # let through: the claim may take it
    HOLD = "hold"  # waits behind an open run: its due_at moves HOLD_MS ahead
    SKIP = "skip"  # becomes `missed` with reason `overlap`


class GatedRun(Protocol):
    """An open run of a schedule whose ``overlap`` is not ``allow``, as plain values."""

    @property
    def scheduled_for(self) -> int: ...
    @property
    def due_at(self) -> int: ...
    @property
    def state(self) -> str: ...  # a RunState value
    @property
    def attempt(self) -> int: ...
    @property
    def overlap(self) -> str: ...  # an Overlap value, as planned with the run


R = TypeVar("R", bound=GatedRun)


def is_busy(runs: Sequence[GatedRun]) -> bool:
    """Whether one of the schedule's open runs is being delivered or is a replay waiting."""
    return any(run.state != RunState.PENDING or run.attempt > 0 for run in runs)


def has_come(run: GatedRun, *, now: int) -> bool:
    """A planned occurrence whose instant has passed and that was never attempted."""
    return run.state == RunState.PENDING and not run.attempt and run.scheduled_for <= now


def gate(runs: Sequence[R], *, now: int) -> list[tuple[R, Gate]]:
    """The verdict on each come occurrence of one schedule that is due at ``now``.
    ``runs``: the schedule's open gated runs (pending, running, retry_wait), oldest
    ``scheduled_for`` first. The policy is the oldest come occurrence's (the policy
    travels with each run as it is planned)."""
    come = [run for run in runs if has_come(run, now=now)]
    if not come:
        return []
    policy = Overlap(come[0].overlap)
    if policy is Overlap.ALLOW:
        return [(run, Gate.CLAIM) for run in come if run.due_at <= now]
    busy = is_busy(runs)
    waiters = 1 if policy is Overlap.BUFFER_ONE else 0
    allowed = waiters if busy else waiters + 1
    verdicts = []
    for index, run in enumerate(come):
        if run.due_at > now:
            continue  # not due yet (jitter): judged when it is
        if index >= allowed:
            verdicts.append((run, Gate.SKIP))
        elif busy or index >= 1:  # the one waiting behind a run still open
            verdicts.append((run, Gate.HOLD))
        else:
            verdicts.append((run, Gate.CLAIM))
    return verdicts
