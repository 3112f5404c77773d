"""Live pages: the schedule page and the run page follow the tenant's event stream and
refresh what they show as runs happen, with no full reload (docs/ui.md, "Live pages").

The server's part is a marker on the page's ``<main>``: the UI stream
(``/events/stream``, :mod:`appliance.ui.pages`) from the newest ``seq`` read in the page's
own snapshot (:func:`appliance.store.events.newest_feed_seq`), every event type (an
EventSource hears only the types it names) and the schedule or run the page is about.
``web/static/steeple.js`` does the rest: on an event of that schedule or run it fetches
the same URL and swaps the elements marked ``data-live-region`` by id — server-rendered
HTML of the same origin, escaped by the templates like any page. It shares the events
page's one stream per browser. Without JavaScript or a hub, a reload does the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.core.events import EventType
from appliance.ui.context import ui

EVERY_TYPE: Final = " ".join(EventType)


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveMarker:
    """What ``_live.html`` writes onto ``<main>``."""

    after: int  # the newest seq the page shows the effect of
    schedule_id: str  # the page follows this schedule's events …
    run_id: str | None = None  # … or, on a run page, only this run's

    @property
    def stream(self) -> str:
        return f"/events/stream?after={self.after}"

    @property
    def types(self) -> str:
        return EVERY_TYPE


def live_marker(after: int, *, schedule_id: str, run_id: str | None = None) -> LiveMarker | None:
    """The page's marker; None where no hub runs (no live stream to follow)."""
    if ui().event_hub is None:
        return None
    return LiveMarker(after=after, schedule_id=schedule_id, run_id=run_id)
