"""The planner's schedule queries: which cursors are due, and moving them forward only."""

from __future__ import annotations

import pytest

from appliance.core.schedules import CatchupPolicy
from appliance.errors import StoreError
from appliance.store.infra.database import Database
from appliance.store.planning import (
    CursorMove,
    advance_cursors,
    due_cursors,
    earliest_cursor,
)
from tests.store.conftest import T0, MakeSchedule


def test_due_cursors_are_unpaused_undeleted_and_earliest_first(
    db: Database, make_schedule: MakeSchedule
) -> None:
    late = make_schedule(next_fire_at=T0 + 5_000, catchup_policy="latest", jitter_seconds=9)
    early = make_schedule(next_fire_at=T0)
    make_schedule(next_fire_at=T0, paused=True)
    make_schedule(next_fire_at=T0, deleted_at=T0)
    make_schedule(next_fire_at=None)
    make_schedule(next_fire_at=T0 + 60_000)
    due = db.read_now(due_cursors, horizon=T0 + 5_000, limit=10)
    assert [s.id for s in due] == [early, late]
    assert db.read_now(due_cursors, horizon=T0 + 5_000, limit=1)[0].id == early
    assert due[1].catchup_policy is CatchupPolicy.LATEST and due[1].jitter_seconds == 9
    assert due[1].body == b'{"n":1}' and due[1].cursor == T0 + 5_000
    assert db.read_now(earliest_cursor) == T0


def test_the_cursor_only_moves_forward_from_the_value_read(
    db: Database, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule(next_fire_at=T0)

    def move(expected: int, new: int | None) -> None:
        db.write_now(advance_cursors, [CursorMove(sid, expected, new)])

    move(T0, T0 + 60_000)
    with pytest.raises(StoreError, match="may not move"):
        move(T0 + 60_000, T0)
    with pytest.raises(StoreError, match="moved under"):
        move(T0, T0 + 120_000)
    move(T0 + 60_000, None)
    assert db.read_now(earliest_cursor) is None
