"""The composition root and the process's life: :mod:`appliance.wiring.runtime` builds every
part from the settings and runs them in one nursery, the web app and its HTTP server
(:mod:`appliance.wiring.http`) last; the store the settings choose, the log formats, and
systemd's readiness protocol and watchdog sit beside it."""
