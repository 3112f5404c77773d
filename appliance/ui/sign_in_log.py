"""What the operator's log says of sign-ins no tenant may see (docs/ui.md, "Security").

A failed sign-in at an email no tenant's user has (unknown, or an operator's without a
tenant) belongs to no tenant: telling any
tenant would let owners learn which emails are tried, and recording it per tenant would
need a tenant it does not have. It goes to the operator's log instead, bounded: the first
failure of a minute as a line with its address, the rest of that minute as one count, so
a flood of guesses adds about two lines a minute. An operator without a tenant signing in
is a log line too (operators have no tenant feed).
"""

from __future__ import annotations

import logging
from typing import Final

log = logging.getLogger("appliance.ui.signin")

MINUTE_MS: Final = 60_000


class UnknownSignIns:
    """The bounded log of failed sign-ins at unknown emails, one per process."""

    def __init__(self) -> None:
        self._since: int | None = None  # when the current minute's line was written
        self._held = 0  # failures since then, not yet told

    def failed(self, *, address: str, now: int) -> None:
        if self._since is not None and now - self._since < MINUTE_MS:
            self._held += 1
            return
        if self._held:
            log.warning(
                "%d more failed sign-ins at emails of no tenant's user in the minute", self._held
            )
        log.warning("failed sign-in at an email of no tenant's user, from %s", address)
        self._since, self._held = now, 0


def operator_signed_in(*, email: str, address: str) -> None:
    log.info("operator %s signed in from %s", email, address)
