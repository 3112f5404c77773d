"""The leadership service: which replica runs the planner, reaper and pruner.

On PostgreSQL every replica runs this service. It takes or renews the leader row
(:mod:`appliance.store.leadership`) every third of a term, on the shared clock. While this
replica leads, :meth:`Leadership.leads` is true and its planner, reaper and pruner work;
the others' skip their passes and look again at their next deadline. A replica that
gains the lead nudges its planner and reaper at once. A clean shutdown resigns, so
another replica leads at its next renewal instead of after a whole term.

An optimisation only (docs/adr/0044-postgresql-store.md). A replica that stopped (SIGSTOP)
still believes it leads until it runs again and renews, and nothing breaks: the unique
index and the cursor's compare-and-set keep planning exactly-once with two leaders or none.
A lone SQLite appliance runs no such service, and always leads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import trio

from appliance.clock import WallClock
from appliance.errors import StoreError
from appliance.store.infra.backend import Store
from appliance.store.leadership import Term, lead, resign

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeadershipConfig:
    term_ms: int = 3_000  # a dead leader's services pause at most this long

    @property
    def renew_s(self) -> float:
        return self.term_ms / 3 / 1000


def always() -> bool:
    """The lone appliance's answer: it leads."""
    return True


class Leadership:
    def __init__(
        self,
        *,
        db: Store,
        clock: WallClock,
        incarnation_id: str,
        on_elected: Callable[[], None],
        config: LeadershipConfig,
    ) -> None:
        self._db = db
        self._clock = clock
        self._me = incarnation_id
        self._on_elected = on_elected
        self._config = config
        self._term: Term | None = None

    def leads(self) -> bool:
        """Whether this replica holds an unexpired term, by the last renewal it saw."""
        term = self._term
        return term is not None and term.held_by(self._me, now=self._clock.now_ms())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self.renew()
                await trio.sleep(self._config.renew_s)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await self._resign()

    async def renew(self) -> None:
        """Take or renew the lead once; say so when it changes hands here."""
        before = self.leads()
        try:
            self._term = await self._db.write(
                lead,
                incarnation_id=self._me,
                now=self._clock.now_ms(),
                term_ms=self._config.term_ms,
            )
        except StoreError as exc:  # the database is away: this replica cannot know
            log.warning("could not renew the leadership: %s", exc)
            self._term = None
        now_leads = self.leads()
        if now_leads and not before:
            log.info("this replica leads the planner, reaper and pruner")
            self._on_elected()
        elif before and not now_leads:
            log.warning("this replica no longer leads")

    async def _resign(self) -> None:
        if self.leads():
            try:
                await self._db.write(resign, incarnation_id=self._me)
            except StoreError as exc:
                log.warning("could not resign the leadership: %s", exc)
            self._term = None
