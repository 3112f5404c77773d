"""One delivery in flight in the dispatcher: its claimed run and the trio cancel scope
that bounds it — by the schedule's own timeout and by the lease, whichever ends first.
The heartbeat moves the lease deadline forward when the database renewed the lease, and
cancels the delivery at once when it did not (:mod:`appliance.engine.dispatcher`)."""

from __future__ import annotations

import trio

from appliance.store.claims import ClaimedRun


class InFlight:
    """One delivery in flight: its run and the cancel scope that bounds it (trio time)."""

    def __init__(self, run: ClaimedRun, *, claimed_at: float, lease_s: float) -> None:
        self.run = run
        self.own_deadline = claimed_at + run.timeout_seconds
        self.lease_deadline = claimed_at + lease_s
        self.lapsed = False
        self.scope = trio.CancelScope(deadline=min(self.own_deadline, self.lease_deadline))

    def renewed(self, lease_deadline: float) -> None:
        self.lease_deadline = max(self.lease_deadline, lease_deadline)
        self.scope.deadline = min(self.own_deadline, self.lease_deadline)

    def lease_lapsed(self) -> None:
        """The heartbeat did not renew this lease (it expired — e.g. the wall clock stepped
        past it — or was taken back): the run may be claimed again at any moment, so stop
        delivering now."""
        self.lapsed = True
        self.scope.cancel()
