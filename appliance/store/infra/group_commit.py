"""Group commit on SQLite's one writer connection: the writes that waited together, run
in one transaction (:class:`appliance.store.infra.database.Database` decides when; this module
how).

- Each write runs in its own savepoint inside the group's ``BEGIN IMMEDIATE``, and one
  ``COMMIT`` (one fsync) commits them all. A write that raises is rolled back to its
  savepoint alone; the others commit. A failed ``COMMIT`` fails every write of the group.
- Batched writes (:meth:`appliance.store.infra.database.Database.write_batched`): the items of
  one batch function that wait together are written by one call of it, in one savepoint
  (the dispatcher's completions: one ``executemany`` per statement, not a savepoint and
  three statements each). If that call raises, it is rolled back and each item is written
  alone in its own savepoint: only the failing item's caller sees the error.
- Order: a group runs its writes in order of arrival, each batch at its first item's
  place, then the writes that asked to run after the batches
  (:meth:`appliance.store.infra.database.Database.write_after_batched`), in order of
  arrival. Every write of a group is concurrent with the others, so any order is one they
  could have had; only the last rule is promised: the dispatcher's claim rides in its
  completions' group and sees the runs they finished (docs/adr/0033-claim-queue-scheduling.md,
  "Claim"). tests/store/test_write_ordering.py fails if it is reversed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import apsw
import trio

T = TypeVar("T")

MAX_GROUP = 256  # writes per group commit


@dataclass(slots=True, eq=False)
class PendingWrite(Generic[T]):
    """One caller's write waiting for, or done by, a group commit."""

    call: Callable[[apsw.Connection], T]
    batch: Callable[[apsw.Connection, Sequence[Any]], Sequence[T]] | None = None
    item: Any = None  # this write's item of ``batch``
    after_batches: bool = False  # runs after every batch of its group (module rules)
    taken: bool = False
    done: trio.Event | None = None  # its group's, set once that group is over
    result: T | None = None
    error: BaseException | None = None

    def outcome(self) -> T:
        """Its result, or the error its write raised (apsw's untranslated)."""
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set whenever error is None


def run_group(conn: apsw.Connection, group: Sequence[PendingWrite[Any]]) -> None:
    """Run every write of ``group`` in its own savepoint inside one transaction; the
    items of one batch function in one savepoint, by one call (alone if it raises)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for unit in _units(group):
            if len(unit) == 1 or not _run_batch(conn, unit):
                for item in unit:
                    _run_one(conn, item)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # a failed COMMIT may already have rolled back
            conn.execute("ROLLBACK")
        raise


def _units(group: Sequence[PendingWrite[Any]]) -> list[list[PendingWrite[Any]]]:
    """The group's writes in the order they run, those of one batch function together
    (see the module rules): by arrival, a batch at its first item's place; then the
    writes that run after the batches."""
    units: list[list[PendingWrite[Any]]] = []
    batches: dict[object, list[PendingWrite[Any]]] = {}
    after: list[list[PendingWrite[Any]]] = []
    for item in group:
        if item.after_batches:
            after.append([item])
        elif item.batch is None:
            units.append([item])
        elif item.batch in batches:
            batches[item.batch].append(item)
        else:
            batches[item.batch] = [item]
            units.append(batches[item.batch])
    return [*units, *after]


def _run_one(conn: apsw.Connection, item: PendingWrite[Any]) -> None:
    conn.execute("SAVEPOINT one_write")
    try:
        item.result = item.call(conn)
    except Exception as exc:  # noqa: BLE001 - re-raised to its caller by unwrap()
        conn.execute("ROLLBACK TO one_write")
        item.error = exc
    conn.execute("RELEASE one_write")


def _run_batch(conn: apsw.Connection, unit: Sequence[PendingWrite[Any]]) -> bool:
    """Write the items of one batch function by one call; False (nothing written) if it
    raised: then each is written alone, so one bad item does not fail the others."""
    batch = unit[0].batch
    assert batch is not None
    conn.execute("SAVEPOINT one_write")
    try:
        results = list(batch(conn, [item.item for item in unit]))
        if len(results) != len(unit):
            raise ValueError(f"{batch!r} returned {len(results)} results for {len(unit)} items")
    except Exception:  # noqa: BLE001 - each item is tried again alone, errors to its caller
        conn.execute("ROLLBACK TO one_write")
        conn.execute("RELEASE one_write")
        return False
    conn.execute("RELEASE one_write")
    for item, result in zip(unit, results, strict=True):
        item.result = result
    return True
