"""The dedupers: one contract suite (appliance.receiver.claims' table) run against both, then
what only SqliteDeduper does — durable records, transactional ``once``, pruning."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from appliance.receiver import (
    Claim,
    Deduper,
    DeliveryInProgress,
    MemoryDeduper,
    Seen,
    SqliteDeduper,
)


@contextmanager
def _memory(tmp_path: Path) -> Iterator[Deduper]:
    yield MemoryDeduper()


@contextmanager
def _sqlite(tmp_path: Path) -> Iterator[Deduper]:
    with SqliteDeduper(tmp_path / "keys.db") as deduper:
        yield deduper


DeduperFactory = Callable[[Path], AbstractContextManager[Deduper]]
DEDUPERS = [pytest.param(_memory, id="memory"), pytest.param(_sqlite, id="sqlite")]


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_a_key_is_new_then_in_progress_then_done(
    open_deduper: DeduperFactory, tmp_path: Path
) -> None:
    with open_deduper(tmp_path) as deduper:
        first = deduper.claim("k", now_s=100, hold_s=30)
        assert (first.seen, first.expires_at_s) == (Seen.NEW, 130)
        assert first.token
        busy = deduper.claim("k", now_s=129, hold_s=30)
        assert (busy.seen, busy.expires_at_s, busy.token) == (Seen.IN_PROGRESS, 130, "")
        deduper.finish(first, now_s=129)
        assert deduper.claim("k", now_s=130, hold_s=30).seen is Seen.DONE
        assert deduper.claim("k", now_s=10**9, hold_s=30).seen is Seen.DONE  # done never expires
        assert deduper.claim("other", now_s=130, hold_s=30).seen is Seen.NEW


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_an_expired_hold_is_taken_over_and_only_its_holder_releases(
    open_deduper: DeduperFactory, tmp_path: Path
) -> None:
    """A handler that died leaves a hold that expires; the redelivery takes it over. The
    dead (or merely slow) first handling can no longer release the new holder's record."""
    with open_deduper(tmp_path) as deduper:
        crashed = deduper.claim("k", now_s=100, hold_s=30)
        assert deduper.claim("k", now_s=129, hold_s=30).seen is Seen.IN_PROGRESS
        retry = deduper.claim("k", now_s=130, hold_s=30)
        assert (retry.seen, retry.expires_at_s) == (Seen.NEW, 160)
        assert retry.token != crashed.token
        deduper.release(crashed)  # a stale token: no effect
        assert deduper.claim("k", now_s=131, hold_s=30).seen is Seen.IN_PROGRESS
        deduper.release(retry)
        assert deduper.claim("k", now_s=131, hold_s=30).seen is Seen.NEW


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_a_failed_handling_is_released_for_the_next_delivery(
    open_deduper: DeduperFactory, tmp_path: Path
) -> None:
    with open_deduper(tmp_path) as deduper:
        failed = deduper.claim("k", now_s=100, hold_s=300)
        deduper.release(failed)
        assert deduper.claim("k", now_s=101, hold_s=300).seen is Seen.NEW


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_finishing_records_done_even_after_a_takeover(
    open_deduper: DeduperFactory, tmp_path: Path
) -> None:
    """The effect happened: the key is done whoever holds it, and the other holder's
    release cannot undo that."""
    with open_deduper(tmp_path) as deduper:
        slow = deduper.claim("k", now_s=100, hold_s=10)
        taker = deduper.claim("k", now_s=111, hold_s=10)
        deduper.finish(slow, now_s=112)
        deduper.release(taker)
        assert deduper.claim("k", now_s=113, hold_s=10).seen is Seen.DONE


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_forget_drops_any_record(open_deduper: DeduperFactory, tmp_path: Path) -> None:
    with open_deduper(tmp_path) as deduper:
        deduper.finish(deduper.claim("done", now_s=1, hold_s=5), now_s=1)
        deduper.claim("held", now_s=1, hold_s=5)
        for key in ("done", "held", "never-seen"):
            deduper.forget(key)
            assert deduper.claim(key, now_s=2, hold_s=5).seen is Seen.NEW


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_a_hold_must_be_positive(open_deduper: DeduperFactory, tmp_path: Path) -> None:
    with open_deduper(tmp_path) as deduper, pytest.raises(ValueError, match="hold_s"):
        deduper.claim("k", now_s=1, hold_s=0)


def test_memory_deduper_evicts_the_oldest_done_keys_never_a_hold() -> None:
    deduper = MemoryDeduper(max_keys=2)
    held = deduper.claim("held", now_s=0, hold_s=60)
    for key in ("a", "b", "c"):
        deduper.finish(deduper.claim(key, now_s=0, hold_s=60), now_s=0)
    assert len(deduper) == 2
    assert deduper.claim("held", now_s=1, hold_s=60).seen is Seen.IN_PROGRESS
    assert deduper.claim("c", now_s=1, hold_s=60).seen is Seen.DONE
    assert deduper.claim("a", now_s=1, hold_s=60).seen is Seen.NEW  # evicted: new again
    deduper.release(held)


# --- SqliteDeduper only ------------------------------------------------------------------


def test_records_survive_reopening_and_are_shared_by_connections(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    with SqliteDeduper(path) as first, SqliteDeduper(path) as second:
        held = first.claim("k", now_s=100, hold_s=30)
        assert second.claim("k", now_s=101, hold_s=30).seen is Seen.IN_PROGRESS
        first.finish(held, now_s=101)
    with SqliteDeduper(path) as reopened:
        assert reopened.claim("k", now_s=102, hold_s=30).seen is Seen.DONE


def test_prune_drops_old_done_keys_and_ended_holds_only(tmp_path: Path) -> None:
    with SqliteDeduper(tmp_path / "keys.db") as deduper:
        deduper.finish(deduper.claim("old", now_s=100, hold_s=10), now_s=100)
        deduper.claim("old-hold", now_s=100, hold_s=10)  # a crashed handler's leftover
        deduper.claim("long-hold", now_s=100, hold_s=500)
        deduper.finish(deduper.claim("new", now_s=200, hold_s=10), now_s=200)
        assert deduper.prune(older_than_s=150) == 2
        assert deduper.claim("old", now_s=300, hold_s=10).seen is Seen.NEW
        assert deduper.claim("long-hold", now_s=300, hold_s=10).seen is Seen.IN_PROGRESS
        assert deduper.claim("new", now_s=300, hold_s=10).seen is Seen.DONE


def _effects(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute("SELECT key, note FROM effects ORDER BY rowid").fetchall()


@pytest.fixture
def deduper(tmp_path: Path) -> Iterator[SqliteDeduper]:
    with SqliteDeduper(tmp_path / "app.db") as deduper:
        deduper.connection.execute("CREATE TABLE effects (key TEXT, note TEXT)")
        yield deduper


def test_once_commits_the_effect_with_the_key(deduper: SqliteDeduper) -> None:
    conn = deduper.connection
    for note in ("first", "repeat"):
        with deduper.once("k", now_s=100) as first:
            if first:
                conn.execute("INSERT INTO effects VALUES ('k', ?)", (note,))
        assert first is (note == "first")
    assert _effects(conn) == [("k", "first")]
    assert deduper.claim("k", now_s=101, hold_s=5).seen is Seen.DONE


def test_once_rolls_back_the_effect_and_the_key_together(deduper: SqliteDeduper) -> None:
    conn = deduper.connection
    with pytest.raises(RuntimeError, match="downstream"), deduper.once("k", now_s=100) as first:
        assert first
        conn.execute("INSERT INTO effects VALUES ('k', 'half done')")
        raise RuntimeError("downstream said no")
    assert _effects(conn) == []
    with deduper.once("k", now_s=101) as first:
        assert first  # the key went with the effect: the retry acts
        conn.execute("INSERT INTO effects VALUES ('k', 'retried')")
    assert _effects(conn) == [("k", "retried")]


def test_once_answers_in_progress_while_a_two_phase_handling_holds_the_key(
    deduper: SqliteDeduper,
) -> None:
    held: Claim = deduper.claim("k", now_s=100, hold_s=30)
    with pytest.raises(DeliveryInProgress) as caught, deduper.once("k", now_s=110):
        pytest.fail("the block must not run")
    assert (caught.value.key, caught.value.retry_after_s) == ("k", 20)
    with deduper.once("k", now_s=130) as first:  # the hold expired: taken over
        assert first
    deduper.release(held)


def test_once_answers_in_progress_while_another_process_holds_the_write_lock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "app.db"
    with SqliteDeduper(path, timeout_s=0.05) as deduper:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process in the middle of its once()
        try:
            with pytest.raises(DeliveryInProgress), deduper.once("k", now_s=1):
                pytest.fail("the block must not run")
            with pytest.raises(DeliveryInProgress):
                deduper.claim("k", now_s=1, hold_s=5)
        finally:
            other.execute("ROLLBACK")
            other.close()
        with deduper.once("k", now_s=2) as first:
            assert first


def test_keys_can_live_in_the_tenants_own_connection(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "app.db")  # Python's default (legacy) transactions
    conn.execute("CREATE TABLE effects (key TEXT, note TEXT)")
    deduper = SqliteDeduper(conn)
    with deduper.once("k", now_s=1) as first:
        assert first
        conn.execute("INSERT INTO effects VALUES ('k', 'mine')")
    deduper.close()  # not ours to close: the tenant's connection stays open
    assert _effects(conn) == [("k", "mine")]
    conn.execute("INSERT INTO effects VALUES ('x', 'open transaction')")
    with pytest.raises(RuntimeError, match="outside a transaction"), deduper.once("y", now_s=2):
        pytest.fail("the block must not run")
    conn.close()


def test_keys_recorded_by_the_one_phase_helper_are_adopted_as_done(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    legacy = sqlite3.connect(path, isolation_level=None)
    legacy.execute(
        "CREATE TABLE steeple_deliveries ("
        " idempotency_key TEXT PRIMARY KEY, first_seen_at INTEGER NOT NULL)"
    )
    legacy.execute("INSERT INTO steeple_deliveries VALUES ('k', 100)")
    legacy.close()
    with SqliteDeduper(path) as deduper:
        assert deduper.claim("k", now_s=200, hold_s=5).seen is Seen.DONE
        assert deduper.prune(older_than_s=101) == 1  # its first-seen time carried over
    with SqliteDeduper(path) as reopened:  # adopted once; the old table is gone
        tables = reopened.connection.execute("SELECT name FROM sqlite_master").fetchall()
        assert ("steeple_deliveries",) not in tables
