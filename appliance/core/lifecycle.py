"""Where the running appliance is in its life, as ``/readyz`` and the systemd watchdog see
it. The runtime sets it; nothing else does; the systemd watchdog
(:func:`appliance.wiring.watchdog.pet_watchdog`) is its other reader."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, kw_only=True)
class Lifecycle:
    """Mutable on purpose: one per process, written by the runtime as it starts and stops.
    The database has migrated before one exists (it is made after ``Database.open``)."""

    engine_running: bool = False  # every engine service started, none has stopped
    draining: bool = False  # the first SIGTERM/SIGINT arrived: take this one out of rotation

    @property
    def ready(self) -> bool:
        return self.engine_running and not self.draining
