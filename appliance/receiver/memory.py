"""Keys in process memory: the weaker guarantee, for tests and throwaway receivers.

Within one process and among its last ``max_keys`` done keys, it follows the same table as
every deduper (:mod:`appliance.receiver.claims`): a duplicate of a done key is not handled,
a concurrent duplicate gets :class:`DeliveryInProgress`, a failed handling is released.
Beyond that it promises little, and says so:

- a restart forgets every key, so a redelivery after a restart runs the handler again;
- it is not shared: two processes each run the handler for the same key;
- a done key evicted beyond ``max_keys`` is handled again if it comes back.

So it never loses a delivery (a crash forgets the in-progress record along with the rest),
but it may repeat an effect. Use :class:`SqliteDeduper` for anything that matters.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from itertools import islice

from appliance.receiver.claims import (
    DONE_RECORD,
    Claim,
    Record,
    Seen,
    State,
    check_hold,
    decide,
    in_progress_record,
    new_token,
)


class MemoryDeduper:
    """Two-phase key records in a dict guarded by a lock (``ThreadingHTTPServer`` calls
    from threads); the oldest done keys are evicted beyond ``max_keys``."""

    def __init__(self, *, max_keys: int = 100_000) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        self._max_keys = max_keys
        self._records: OrderedDict[str, Record] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, key: str, *, now_s: int, hold_s: int) -> Claim:
        check_hold(hold_s)
        with self._lock:
            claim = decide(
                key, self._records.get(key), now_s=now_s, hold_s=hold_s, token=new_token()
            )
            if claim.seen is Seen.NEW:
                self._records[key] = in_progress_record(claim)
            return claim

    def finish(self, claim: Claim, *, now_s: int) -> None:
        with self._lock:
            self._records[claim.key] = DONE_RECORD
            self._records.move_to_end(claim.key)
            self._evict()

    def release(self, claim: Claim) -> None:
        with self._lock:
            record = self._records.get(claim.key)
            if (
                record is not None
                and record.state is State.IN_PROGRESS
                and record.token == claim.token
            ):
                del self._records[claim.key]

    def forget(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)

    def _evict(self) -> None:
        """Drop the oldest done records beyond ``max_keys``; in-progress ones stay (there
        are at most as many as handlers running at once)."""
        excess = len(self._records) - self._max_keys
        if excess <= 0:
            return
        done = (k for k, r in self._records.items() if r.state is State.DONE)
        oldest_done = list(islice(done, excess))
        for key in oldest_done:
            del self._records[key]

    def __len__(self) -> int:
        return len(self._records)
