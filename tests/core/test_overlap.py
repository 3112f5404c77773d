"""The overlap decision as a pure function (docs/schedules.md, "Overlap"): the examples
the guide gives — after downtime ``skip`` delivers the oldest and skips the rest,
``buffer_one`` lets one wait; a replay waiting counts as open — and, as Hypothesis
properties over any open runs of one schedule, that ``skip`` never lets a second run open
and ``buffer_one`` never more than one waiting, that every come, due occurrence gets a
verdict and the oldest are the ones kept."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given
from hypothesis import strategies as st

from appliance.core.overlap import Gate, gate, has_come, is_busy
from appliance.core.runs import RunState
from appliance.core.schedules import Overlap

SECOND = 1000
NOW = 1_000_000 * SECOND


@dataclass(frozen=True)
class Run:
    scheduled_for: int
    due_at: int
    state: str = RunState.PENDING
    attempt: int = 0
    overlap: str = Overlap.SKIP


def come(*seconds_ago: int, overlap: Overlap = Overlap.SKIP) -> list[Run]:
    """Planned occurrences that have come and are due, oldest first."""
    instants = sorted(NOW - s * SECOND for s in seconds_ago)
    return [Run(scheduled_for=t, due_at=t, overlap=overlap) for t in instants]


def verdicts(runs: list[Run]) -> list[Gate]:
    return [verdict for _, verdict in gate(runs, now=NOW)]


def test_after_downtime_skip_delivers_the_oldest_and_skips_the_rest() -> None:
    assert verdicts(come(30, 20, 10)) == [Gate.CLAIM, Gate.SKIP, Gate.SKIP]


def test_after_downtime_buffer_one_lets_one_wait() -> None:
    runs = come(30, 20, 10, overlap=Overlap.BUFFER_ONE)
    assert verdicts(runs) == [Gate.CLAIM, Gate.HOLD, Gate.SKIP]


def test_while_a_run_is_open_skip_skips_and_buffer_one_holds_one() -> None:
    for state in (RunState.RUNNING, RunState.RETRY_WAIT):
        open_run = Run(scheduled_for=NOW - 60 * SECOND, due_at=NOW, state=state, attempt=1)
        assert verdicts([open_run, *come(10)]) == [Gate.SKIP]
        buffered = [replace(open_run, overlap=Overlap.BUFFER_ONE)]
        assert verdicts(buffered + come(20, 10, overlap=Overlap.BUFFER_ONE)) == [
            Gate.HOLD,
            Gate.SKIP,
        ]


def test_a_replay_waiting_to_run_counts_as_open_and_is_never_judged() -> None:
    replay = Run(scheduled_for=NOW - 60 * SECOND, due_at=NOW, attempt=2)  # pending, attempted
    assert is_busy([replay]) and not has_come(replay, now=NOW)
    judged = gate([replay, *come(10)], now=NOW)
    assert [(run.scheduled_for, verdict) for run, verdict in judged] == [
        (NOW - 10 * SECOND, Gate.SKIP)
    ]


def test_an_occurrence_not_yet_due_keeps_its_place_without_a_verdict() -> None:
    jittered = Run(scheduled_for=NOW - 20 * SECOND, due_at=NOW + SECOND)
    (due,) = come(10)
    assert gate([jittered, due], now=NOW) == [(due, Gate.SKIP)]  # the jittered one goes first
    assert gate([jittered, due], now=NOW + SECOND) == [(jittered, Gate.CLAIM), (due, Gate.SKIP)]


def test_nothing_has_come_nothing_is_decided() -> None:
    future = Run(scheduled_for=NOW + SECOND, due_at=NOW + SECOND)
    assert gate([], now=NOW) == []
    assert gate([future], now=NOW) == []


def test_allow_lets_every_due_occurrence_through() -> None:
    running = Run(scheduled_for=NOW - 60 * SECOND, due_at=NOW, state=RunState.RUNNING, attempt=1)
    assert verdicts([running, *come(20, 10, overlap=Overlap.ALLOW)]) == [Gate.CLAIM, Gate.CLAIM]


@st.composite
def open_runs(draw: st.DrawFn) -> list[Run]:
    """One schedule's open gated runs, oldest first: some being delivered, replays
    waiting, occurrences come (due, or not yet by jitter) and planned ahead."""
    policy = draw(st.sampled_from([Overlap.SKIP, Overlap.BUFFER_ONE]))
    offsets = draw(st.lists(st.integers(-60, 60), min_size=0, max_size=12, unique=True))
    runs = []
    for offset in sorted(offsets):
        scheduled_for = NOW + offset * SECOND
        kind = draw(st.sampled_from(["planned", "planned", "running", "retry_wait", "replay"]))
        due_at = scheduled_for + draw(st.integers(0, 5)) * SECOND
        if kind == "planned":
            runs.append(Run(scheduled_for=scheduled_for, due_at=due_at, overlap=policy))
        else:
            state = RunState.PENDING if kind == "replay" else RunState(kind)
            attempt = draw(st.integers(1, 5))
            runs.append(Run(scheduled_for, due_at, state, attempt, policy))
    return runs


@given(runs=open_runs())
def test_skip_never_opens_a_second_run_and_buffer_one_holds_at_most_one(runs: list[Run]) -> None:
    judged = verdicts(runs)
    claimed, held = judged.count(Gate.CLAIM), judged.count(Gate.HOLD)
    assert claimed <= (0 if is_busy(runs) else 1)
    policies = {Overlap(run.overlap) for run in runs}
    assert held <= (1 if Overlap.BUFFER_ONE in policies else 0)


@given(runs=open_runs())
def test_every_come_due_occurrence_gets_one_verdict_and_the_oldest_are_kept(
    runs: list[Run],
) -> None:
    judged = gate(runs, now=NOW)
    due = [run for run in runs if has_come(run, now=NOW) and run.due_at <= NOW]
    assert [run for run, _ in judged] == due  # no silent drop, none judged twice, in order
    kept = [verdict is not Gate.SKIP for _, verdict in judged]
    assert kept == sorted(kept, reverse=True)  # what is skipped is newer than what is kept
