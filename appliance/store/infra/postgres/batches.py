"""Batched writes on PostgreSQL: the items of one batch function that wait together,
written by one call of it in one transaction (the dispatcher's outcomes: a few round
trips and one commit for the batch, not for each item; docs/scale-out.md).

Rules this module guards:
- **No timer.** An item arriving when no batch of its function is being written is
  written at once, alone or with whatever is queued; items arriving meanwhile wait for
  that batch to end and go together in the next (at most ``MAX_GROUP`` per batch).
- **One bad item fails alone.** If a batch's transaction raises (its function's bug
  included, or the wrong number of results), each of its items is written again in a transaction of
  its own, so only the failing item's caller sees the error (as SQLite's group commit,
  :mod:`appliance.store.infra.group_commit`).
- **A cancelled caller's item is not written by another**, unless its batch's
  transaction had begun. A batch cancelled before its transaction ran puts the other
  callers' items back at the front of the queue.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from appliance.store.infra.group_commit import MAX_GROUP

BatchFn = Callable[[Any, Sequence[Any]], Sequence[Any]]
WriteBatch = Callable[[BatchFn, Sequence[Any]], Awaitable[Sequence[Any]]]


@dataclass(slots=True, eq=False)
class _Queued:
    """One item waiting for, or written by, a batch."""

    item: Any
    done: bool = False
    alone: bool = False  # its batch failed: it is written in a transaction of its own
    result: Any = None


class Batches:
    """The queued items of each batch function; ``write_batch(fn, items)`` writes items
    in one transaction and returns one result per item."""

    def __init__(self, write_batch: WriteBatch) -> None:
        self._write_batch = write_batch
        self._queues: dict[BatchFn, list[_Queued]] = {}
        self._writing: dict[BatchFn, trio.Event] = {}  # set when fn's batch is over

    async def write(self, fn: BatchFn, item: Any) -> Any:
        """``item`` written with ``fn``, batched with the items that waited with it."""
        queued = _Queued(item)
        queue = self._queues.setdefault(fn, [])
        queue.append(queued)
        try:
            while not queued.done:
                writing = self._writing.get(fn)
                if writing is None:
                    await self._write_next(fn, queued)
                else:
                    await writing.wait()
        except BaseException:  # cancelled while it waited: not written after all
            if queued in queue:
                queue.remove(queued)
            raise
        if queued.alone:
            (result,) = await self._write_batch(fn, [item])
            return result
        return queued.result

    async def _write_next(self, fn: BatchFn, mine: _Queued) -> None:
        """Write the queued items of ``fn``, ``mine`` among them, in one transaction."""
        queue = self._queues[fn]
        batch, queue[:] = queue[:MAX_GROUP], queue[MAX_GROUP:]
        self._writing[fn] = over = trio.Event()
        try:
            results = await self._write_batch(fn, [queued.item for queued in batch])
            if len(results) != len(batch):
                raise ValueError(f"{fn!r} returned {len(results)} results for {len(batch)} items")
        except Exception:  # noqa: BLE001 - each item is tried again alone, errors to its caller
            for queued in batch:
                queued.done = queued.alone = True
        except BaseException:  # cancelled before it ran: the others' items wait again
            queue[:0] = [queued for queued in batch if queued is not mine]
            raise
        else:
            for queued, result in zip(batch, results, strict=True):
                queued.done, queued.result = True, result
        finally:
            del self._writing[fn]
            over.set()
