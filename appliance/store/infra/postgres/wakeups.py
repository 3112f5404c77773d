"""Wake-ups across replicas: PostgreSQL's ``LISTEN/NOTIFY``, as a hint only.

A replica that changes work others should see soon (a schedule created, edited, resumed
or triggered; the leader resigning) sends ``NOTIFY steeple_wake`` after its transaction
commits (:meth:`PgDatabase.announce`). Every replica listens on one connection of its own
(outside the pool) and nudges its planner and dispatcher when a notification arrives.

Nothing depends on it. A notification lost, or sent while a replica was reconnecting, is
made up for by the due-time timers and the bounded poll (``replica_poll_ms``). PgBouncer
in transaction mode cannot hold a ``LISTEN``: set ``database_listen = false`` there
(docs/scale-out.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

from appliance.store.infra.postgres.database import WAKE_CHANNEL
from appliance.store.infra.postgres.urls import redacted

log = logging.getLogger(__name__)

RECONNECT_S = 2.0  # after a lost listening connection
POLL_S = 0.5  # how often the listening thread looks at ``stop``


def listen(url: str, on_wake: Callable[[], None], stop: threading.Event) -> None:
    """Listen until ``stop`` is set, calling ``on_wake`` for each notification (from this
    thread). Blocking: run it in a thread of its own."""
    while not stop.is_set():
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
                conn.execute(f"LISTEN {WAKE_CHANNEL}")
                while not stop.is_set():
                    for _ in conn.notifies(timeout=POLL_S):
                        on_wake()
        except psycopg.Error as exc:
            log.info("listening for other replicas on %s: %s", redacted(url), exc)
            stop.wait(RECONNECT_S)
