"""The next occurrences of a cron spec as a preview shows them: one home for the API's
``POST /v1/cron/preview`` and the web UI's live preview (docs/ui.md), so both show exactly
what a schedule with that spec would plan (:func:`appliance.core.cron.occurrences_after`).

Each item carries the local wall time, the UTC offset and the zone's abbreviation, and
whether the offset changed since the previous item (a DST transition in between: the
reader should look twice at that row).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from appliance.core.cron import CronSpec, local_wall_time, occurrences_after
from appliance.core.instants import to_datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class PreviewItem:
    scheduled_for: int  # epoch ms, UTC
    local_time: str  # "2026-03-29T03:00:00" in the spec's zone
    utc_offset: str  # "+02:00"
    abbreviation: str  # "CEST"
    offset_changed: bool  # the offset differs from the previous item's (DST in between)


def preview_occurrences(spec: CronSpec, after: int, count: int) -> list[PreviewItem]:
    """The first ``count`` occurrences of ``spec`` after ``after`` (epoch ms)."""
    zone = ZoneInfo(spec.timezone)
    items: list[PreviewItem] = []
    for ms in itertools.islice(occurrences_after(spec, after), count):
        local_time, offset = local_wall_time(ms, spec.timezone)
        previous = items[-1].utc_offset if items else offset
        items.append(
            PreviewItem(
                scheduled_for=ms,
                local_time=local_time,
                utc_offset=offset,
                abbreviation=to_datetime(ms).astimezone(zone).tzname() or offset,
                offset_changed=offset != previous,
            )
        )
    return items


def soonest_occurrences(
    specs: Sequence[tuple[str, CronSpec]], after: int, count: int
) -> list[tuple[str, int]]:
    """The ``count`` soonest occurrences after ``after`` across several specs, each as
    ``(key, epoch ms)`` in time order (ties by key): a dashboard's "next up"."""
    streams = [_keyed(key, spec, after, count) for key, spec in specs]
    return [(key, ms) for ms, key in itertools.islice(heapq.merge(*streams), count)]


def _keyed(key: str, spec: CronSpec, after: int, count: int) -> Iterator[tuple[int, str]]:
    for ms in itertools.islice(occurrences_after(spec, after), count):
        yield ms, key
