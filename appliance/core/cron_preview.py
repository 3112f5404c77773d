"""The next occurrences of a schedule's timing (any kind: cron, one-off, interval, with its
bounds) as a preview shows them: one home for the API's ``POST /v1/cron/preview``, the web
UI's live preview and schedule pages and the dashboard (docs/ui.md), so each shows exactly
what the planner would plan (:func:`appliance.core.timing.occurrences`).

Each item carries the local wall time, the UTC offset and the zone's abbreviation,
whether the offset changed since the previous item (a DST transition in between: the
reader should look twice at that row), and for a cron what a transition did to it
(``core.dst.DstMark``: a gap time shifted, a fold time's first or last instant) with a
note in words ("02:30 does not exist on 2026-03-29: runs at 03:00"; "02:30 happens twice
on 2026-10-25: this is the first time; the second is not run (dst.fold: first)").
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from zoneinfo import ZoneInfo

from appliance.core.cron import CronSpec, dst_mark, local_wall_time
from appliance.core.dst import DstMark, Fold
from appliance.core.instants import to_datetime
from appliance.core.timing import ScheduleKind, Timing, cron_spec, kind_of, occurrences


@dataclass(frozen=True, slots=True, kw_only=True)
class PreviewItem:
    scheduled_for: int  # epoch ms, UTC
    local_time: str  # "2026-03-29T03:00:00" in the spec's zone
    utc_offset: str  # "+02:00"
    abbreviation: str  # "CEST"
    offset_changed: bool  # the offset differs from the previous item's (DST in between)
    dst: DstMark | None = None  # what a DST transition did to it (a cron only)
    dst_note: str | None = None  # the same in words


def preview_occurrences(timing: Timing, after: int, count: int) -> list[PreviewItem]:
    """The first ``count`` occurrences of ``timing`` after ``after`` (epoch ms)."""
    zone = ZoneInfo(timing.timezone)
    spec = cron_spec(timing) if kind_of(timing) is ScheduleKind.CRON else None
    items: list[PreviewItem] = []
    for ms in itertools.islice(occurrences(timing, after_ms=after), count):
        local_time, offset = local_wall_time(ms, timing.timezone)
        previous = items[-1].utc_offset if items else offset
        mark, note = _mark(spec, ms, local_time)
        items.append(
            PreviewItem(
                scheduled_for=ms,
                local_time=local_time,
                utc_offset=offset,
                abbreviation=to_datetime(ms).astimezone(zone).tzname() or offset,
                offset_changed=offset != previous,
                dst=mark,
                dst_note=note,
            )
        )
    return items


def _mark(spec: CronSpec | None, ms: int, local_time: str) -> tuple[DstMark | None, str | None]:
    found = None if spec is None else dst_mark(spec, ms)
    if found is None:
        return None, None
    mark, wall = found
    clock = f"{wall:%H:%M}" + (f":{wall:%S}" if wall.second else "")
    if mark is DstMark.GAP_SHIFTED:
        return mark, f"{clock} does not exist on {wall:%Y-%m-%d}: runs at {local_time[11:16]}"
    assert spec is not None  # only a cron has a mark
    which = "first" if mark is DstMark.FOLD_FIRST else "second"
    return mark, (
        f"{clock} happens twice on {wall:%Y-%m-%d}: this is the {which} time; "
        f"{_FOLD_WORDS[spec.dst.fold]}"
    )


# What the schedule does with the other instant of a repeated wall time (ADR 0043).
_FOLD_WORDS: Final = {
    Fold.FIRST: "the second is not run (dst.fold: first)",
    Fold.LAST: "the first was not run (dst.fold: last)",
    Fold.BOTH: "it runs both times (dst.fold: both)",
}


def soonest_each(
    timings: Sequence[tuple[str, Timing]], after: int, count: int
) -> list[tuple[str, int]]:
    """Each timing's next occurrence after ``after``, the ``count`` soonest as ``(key,
    epoch ms)`` in time order (ties by key): a dashboard's "next up", one line per
    schedule however often it fires. A timing that never fires again has no line."""
    firsts = (
        (ms, key)
        for key, timing in timings
        for ms in itertools.islice(occurrences(timing, after_ms=after), 1)
    )
    return [(key, ms) for ms, key in heapq.nsmallest(count, firsts)]
