"""The schedule form's date-time fields (``At``, ``Start at``, ``End at``): what a person
types to the RFC 3339 text the API takes, and a stored instant back to text.

Rules this module guards (docs/ui.md, "The schedule form"):

- A date and time without an offset (``2026-12-24 18:00`` or ``2026-12-24T18:00:00``) is
  a wall time in the schedule's timezone, converted with that zone: a time inside a
  spring-forward gap does not exist and is refused on its field; a time that happens twice
  (the clocks go back) is the earlier instant unless an offset is given.
- Text with an offset (``Z`` or ``±hh:mm``) or anything else is passed on untouched: the
  API's own reading (``core.timing_input``) validates it, so there is one rule set.
- A stored instant is shown in the schedule's zone *with* its offset, so saving the form
  unchanged gives back the very instant, even one in a repeated hour.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from appliance.core.instants import to_datetime

_LOCAL: Final = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}(?::\d{2})?)")


def instant_text(text: str, timezone: str) -> tuple[str, str | None]:
    """``(text for the API, problem)``: a local wall time converted to RFC 3339 with the
    zone's offset; any other text as given (the API judges it). ``problem`` is set only
    for what the form alone can know: a wall time that does not exist, or a zone it cannot
    convert with."""
    match = _LOCAL.fullmatch(text.strip())
    if match is None:
        return text.strip(), None
    try:
        wall = datetime.fromisoformat(f"{match.group(1)}T{match.group(2)}")
    except ValueError:
        return text.strip(), None  # "2026-02-30 10:00": the API says what is wrong
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return text.strip(), "is read in the schedule's timezone; fix the timezone first"
    moment = wall.replace(tzinfo=zone)  # fold 0: the earlier of a repeated wall time
    if moment.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
        return text.strip(), (
            f"{wall:%Y-%m-%d %H:%M} does not exist in {timezone} (the clocks jump forward"
            " then); pick another time or give an offset such as +01:00"
        )
    return moment.isoformat(timespec="seconds"), None


def shown_instant(ms: int | None, timezone: str) -> str:
    """A stored instant as the form shows it: its wall time in ``timezone`` with the
    offset (``2026-12-24T18:00:00+01:00``); '' when unset."""
    if ms is None:
        return ""
    return to_datetime(ms).astimezone(ZoneInfo(timezone)).isoformat(timespec="seconds")
