"""Run states and the one transition table (ADR 0033).

    pending ──claim──▶ running ──2xx──────────▶ succeeded
       ▲                 │  ├──retryable─────▶ retry_wait ──claim──▶ running
       │                 │  └──permanent/exh.─▶ failed
       │                 └──lease lost/reclaim▶ retry_wait | failed
    missed, cancelled: recorded, never delivered unless replayed
    replay: any terminal state ──▶ pending (same run, same key)

Every state change in the engine and the store goes through :func:`check_transition`;
anything the table does not list raises :class:`IllegalTransition`.
"""

from __future__ import annotations

import enum

from appliance.errors import IllegalTransition


class RunState(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    MISSED = "missed"
    CANCELLED = "cancelled"


class Transition(enum.StrEnum):
    CLAIM = "claim"
    SUCCEED = "succeed"
    RETRY = "retry"
    FAIL = "fail"
    RECLAIM = "reclaim"  # lease expired or a previous incarnation died: back to retry_wait
    CANCEL = "cancel"  # schedule deleted, paused or edited before the run started
    REPLAY = "replay"  # tenant asked for a terminal run again


class AttemptOutcome(enum.StrEnum):
    OK = "ok"
    RETRYABLE = "retryable"
    PERMANENT = "permanent"
    ABANDONED = "abandoned"  # its executor died or lost the lease; counted as an attempt
    STALE = "stale"  # completed after its lease was taken away: recorded, changes nothing


TERMINAL: frozenset[RunState] = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.MISSED, RunState.CANCELLED}
)
CLAIMABLE: frozenset[RunState] = frozenset({RunState.PENDING, RunState.RETRY_WAIT})

_S = RunState
TRANSITIONS: dict[tuple[RunState, Transition], RunState] = {
    (_S.PENDING, Transition.CLAIM): _S.RUNNING,
    (_S.RETRY_WAIT, Transition.CLAIM): _S.RUNNING,
    (_S.RUNNING, Transition.SUCCEED): _S.SUCCEEDED,
    (_S.RUNNING, Transition.RETRY): _S.RETRY_WAIT,
    (_S.RUNNING, Transition.FAIL): _S.FAILED,
    (_S.RUNNING, Transition.RECLAIM): _S.RETRY_WAIT,
    (_S.PENDING, Transition.CANCEL): _S.CANCELLED,
    (_S.RETRY_WAIT, Transition.CANCEL): _S.CANCELLED,
    (_S.RETRY_WAIT, Transition.FAIL): _S.FAILED,  # reclaimed with no attempts left
    **{(state, Transition.REPLAY): _S.PENDING for state in TERMINAL},
}


def check_transition(state: RunState, transition: Transition) -> RunState:
    """The state ``transition`` leads to from ``state``; raises if the table forbids it."""
    try:
        return TRANSITIONS[(state, transition)]
    except KeyError:
        raise IllegalTransition(f"a {state} run cannot {transition}") from None


def sources(transition: Transition) -> frozenset[RunState]:
    """Every state ``transition`` may start from (for SQL ``state IN (...)`` guards)."""
    return frozenset(state for (state, t) in TRANSITIONS if t is transition)
