"""An unreachable PostgreSQL server, told apart from a failed statement and waited out
(docs/adr/0044-postgresql-store.md, "Outages and lost commits")."""

from __future__ import annotations

import logging
import time
from typing import Final

import psycopg
import psycopg_pool

from appliance.store.infra.postgres.urls import redacted

log = logging.getLogger("appliance.store.infra.postgres.database")

OUTAGE_S: Final = 120.0  # how long a transaction waits for an unreachable server


def unreachable(exc: BaseException) -> bool:
    """A connection-level failure (no server, a dropped link, an admin shutdown), not a
    statement's error: SQLSTATE class 08, 57P01-57P03, or none at all (client side). A
    store this process closed is not an outage: nothing will reopen it, so it is not
    waited for."""
    if isinstance(exc, psycopg_pool.PoolClosed):
        return False
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class Outage:
    """One transaction's wait for an unreachable server: backoff, at most :data:`OUTAGE_S`."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._until: float | None = None
        self._pause = 0.1

    def wait(self, cause: BaseException) -> None:
        now = time.monotonic()
        if self._until is None:
            self._until = now + OUTAGE_S
            log.warning("the database %s is unreachable; waiting: %s", redacted(self._url), cause)
        if now >= self._until:
            raise cause from None
        time.sleep(self._pause)
        self._pause = min(self._pause * 2, 2.0)
