"""The composition root and the process's life: :mod:`appliance.wiring.runtime` builds every
part from the settings and runs them in one nursery; the store the settings choose, the log
formats, and systemd's readiness protocol and watchdog sit beside it."""
