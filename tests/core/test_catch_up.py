"""The catch-up policy as a pure decision (docs/schedules.md, "Catch-up"): what each
policy makes of on-time occurrences, misfires inside the window and older ones — and, as
Hypothesis properties over a schedule's stream of occurrences, that no misfire is ever
delivered beyond the window, that ``latest`` delivers only the newest misfire, and that
the verdicts depend neither on the order the occurrences are judged in nor on where a
pass stopped."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.catch_up import MissReason, is_misfire, judge
from appliance.core.schedules import CatchupPolicy

MINUTE = 60_000
HOUR = 60 * MINUTE
NOW = 1_000 * HOUR
MISFIRE = MINUTE
WINDOW = HOUR


def verdict(
    due_at: int, following: int | None = None, *, policy: CatchupPolicy
) -> MissReason | None:
    return judge(due_at, following, now=NOW, policy=policy, window_ms=WINDOW, misfire_ms=MISFIRE)


@pytest.mark.parametrize("policy", list(CatchupPolicy))
def test_an_occurrence_on_time_is_delivered_under_every_policy(policy: CatchupPolicy) -> None:
    assert verdict(NOW - MISFIRE, NOW - MISFIRE + 1, policy=policy) is None
    assert verdict(NOW + MINUTE, policy=policy) is None  # planned ahead of its time


@pytest.mark.parametrize("policy", list(CatchupPolicy))
def test_a_misfire_older_than_the_window_is_missed_under_every_policy(
    policy: CatchupPolicy,
) -> None:
    assert verdict(NOW - WINDOW - 1, policy=policy) is MissReason.OUTSIDE_WINDOW
    assert verdict(NOW - WINDOW, policy=policy) is not MissReason.OUTSIDE_WINDOW  # inclusive


def test_inside_the_window_each_policy_decides() -> None:
    late = NOW - 10 * MINUTE
    assert verdict(late, late + 5 * MINUTE, policy=CatchupPolicy.ALL) is None
    assert verdict(late, late + 5 * MINUTE, policy=CatchupPolicy.SKIP) is MissReason.SKIPPED
    # latest: superseded by a newer misfire, delivered when the next one is on time.
    superseded = verdict(late, late + 5 * MINUTE, policy=CatchupPolicy.LATEST)
    assert superseded is MissReason.SUPERSEDED
    assert verdict(late, NOW - MISFIRE, policy=CatchupPolicy.LATEST) is None
    assert verdict(late, None, policy=CatchupPolicy.LATEST) is None  # the last occurrence


def test_a_misfire_is_strictly_later_than_misfire_ms() -> None:
    assert not is_misfire(NOW - MISFIRE, now=NOW, misfire_ms=MISFIRE)
    assert is_misfire(NOW - MISFIRE - 1, now=NOW, misfire_ms=MISFIRE)


# A schedule's stream, as the planner examines it: due_at strictly increases (jitter keeps
# each occurrence before the next one's nominal instant, ADR 0037).
streams = st.lists(st.integers(-3 * HOUR, HOUR), min_size=1, max_size=30, unique=True).map(
    lambda offsets: [NOW + offset for offset in sorted(offsets)]
)


@dataclass(frozen=True)
class Policy:
    """One schedule's catch-up settings and the planner's misfire threshold."""

    policy: CatchupPolicy
    window_ms: int
    misfire_ms: int

    def judge(self, due_at: int, following: int | None, *, now: int = NOW) -> MissReason | None:
        return judge(
            due_at,
            following,
            now=now,
            policy=self.policy,
            window_ms=self.window_ms,
            misfire_ms=self.misfire_ms,
        )

    def judged(self, stream: list[int], *, now: int = NOW) -> list[MissReason | None]:
        """Each occurrence judged with the one after it, as a pass judges them."""
        following: list[int | None] = [*stream[1:], None] if stream else []
        return [self.judge(d, f, now=now) for d, f in zip(stream, following, strict=True)]

    def late(self, due_at: int, *, now: int = NOW) -> bool:
        return is_misfire(due_at, now=now, misfire_ms=self.misfire_ms)


settings_ = st.builds(
    Policy,
    policy=st.sampled_from(list(CatchupPolicy)),
    window_ms=st.integers(0, 2 * HOUR),
    misfire_ms=st.integers(0, 2 * MINUTE),
)


@given(stream=streams, p=settings_)
def test_no_misfire_is_delivered_beyond_the_window(stream: list[int], p: Policy) -> None:
    for due_at, reason in zip(stream, p.judged(stream), strict=True):
        if not p.late(due_at):
            assert reason is None  # on time: delivered, whatever the policy
        elif NOW - due_at > p.window_ms:
            assert reason is MissReason.OUTSIDE_WINDOW
        if reason is None:
            assert NOW - due_at <= max(p.misfire_ms, p.window_ms)


@given(stream=streams, p=settings_)
def test_each_policy_delivers_the_misfires_it_promises(stream: list[int], p: Policy) -> None:
    verdicts = p.judged(stream)
    late = [i for i, due_at in enumerate(stream) if p.late(due_at)]
    inside = [i for i in late if NOW - stream[i] <= p.window_ms]
    delivered = [i for i in late if verdicts[i] is None]
    if p.policy is CatchupPolicy.ALL:
        assert delivered == inside
    elif p.policy is CatchupPolicy.SKIP:
        assert delivered == []
        assert all(verdicts[i] is MissReason.SKIPPED for i in inside)
    else:  # latest: the newest misfire alone, when it is inside the window
        assert delivered == ([late[-1]] if late and late[-1] in inside else [])
        assert all(verdicts[i] is MissReason.SUPERSEDED for i in inside if i not in delivered)


@given(stream=streams, p=settings_, shuffler=st.randoms(use_true_random=False))
def test_verdicts_do_not_depend_on_the_order_occurrences_are_judged_in(
    stream: list[int], p: Policy, shuffler: random.Random
) -> None:
    pairs = list(zip(stream, [*stream[1:], None], p.judged(stream), strict=True))
    shuffler.shuffle(pairs)
    assert [p.judge(due_at, following) for due_at, following, _ in pairs] == [
        reason for _, _, reason in pairs
    ]


@given(stream=streams, p=settings_, data=st.data())
def test_a_pass_that_stops_at_a_bound_judges_as_one_that_does_not(
    stream: list[int], p: Policy, data: st.DataObject
) -> None:
    """The planner stops at a bound (``max_catchup``) having peeked at the next occurrence;
    the next pass resumes from the cursor with the rest of the stream."""
    cut = data.draw(st.integers(0, len(stream)))
    peeked: list[int | None] = [*stream[1 : cut + 1]]
    if cut == len(stream):
        peeked.append(None)
    first = [p.judge(d, f) for d, f in zip(stream[:cut], peeked, strict=True)]
    assert first + p.judged(stream[cut:]) == p.judged(stream)


@given(stream=streams, p=settings_, later=st.integers(0, 3 * HOUR))
def test_a_later_pass_never_turns_a_miss_into_a_delivery(
    stream: list[int], p: Policy, later: int
) -> None:
    then = p.judged(stream, now=NOW + later)
    missed_now = [i for i, reason in enumerate(p.judged(stream)) if reason is not None]
    assert all(then[i] is not None for i in missed_now)
