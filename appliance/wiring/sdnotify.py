"""systemd's readiness protocol (``Type=notify``), stdlib only: one datagram per state to
``$NOTIFY_SOCKET`` (a leading ``@`` names the Linux abstract namespace). The protocol is
stable and meant to be reimplemented; nothing is sent when the variable is unset.

The runtime sends ``STATUS=`` while booting, ``READY=1`` once migrated, reclaimed and
bound, ``STOPPING=1`` at the first signal, and ``WATCHDOG=1`` every third of
``$WATCHDOG_USEC`` only while the engine runs and a write round-trip through the single
writer succeeds (so a wedged appliance is restarted, never kept alive by a timer).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


def notify(state: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``state`` (``READY=1``, ``STATUS=…``); False when not under systemd. A socket
    that cannot be reached is ignored: readiness must never stop the appliance."""
    address = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """How often to send ``WATCHDOG=1`` (a third of ``$WATCHDOG_USEC``), or None when
    systemd expects no pings from this process."""
    env = os.environ if environ is None else environ
    usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 1_000_000 / 3
