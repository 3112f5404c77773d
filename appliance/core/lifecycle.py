"""Where the running appliance is in its life, as ``/readyz``, ``/metrics`` and the systemd
watchdog see it. The runtime sets it; nothing else does; the systemd watchdog
(:func:`appliance.wiring.watchdog.pet_watchdog`) is its other reader."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, kw_only=True)
class Lifecycle:
    """Mutable on purpose: one per process, written by the runtime as it starts and stops.
    The database has migrated before one exists (it is made after ``Database.open``)."""

    engine_running: bool = False  # every engine service started, none has stopped
    draining: bool = False  # the first SIGTERM/SIGINT arrived: take this one out of rotation
    # The newest event's seq as the process started, read before it changed anything:
    # /metrics counts the events after it, so its counters start with the process, not
    # with the first scrape (0, an app without a runtime: everything its database holds).
    events_at_start: int = 0

    @property
    def ready(self) -> bool:
        return self.engine_running and not self.draining
