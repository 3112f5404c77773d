"""The occurrence cache: parsed specs, their occurrences and the canonical text of those
instants, computed once and shared by every schedule with the same expression and zone.

Thousands of schedules share a handful of expressions (``0 * * * *`` in ``UTC``), and the
planner and the schedule views ask for the same few occurrences again and again: a parse
costs far more than croniter's step to an occurrence, and that step far more than a lookup
here (bench/HISTORY.md, "Costs once quoted in code comments").

Rules this module guards:

- It answers exactly what ``parse_cron`` and ``occurrences_after`` answer. The occurrences
  of a spec are one fixed set of instants (each wall time maps to its instants by the DST
  rules of ``core.cron``, whatever the starting point), so an entry holding *every*
  occurrence in ``(anchor, last]`` answers any start ``t`` with ``anchor <= t < last``
  from its list, and a start at ``last`` by stepping its croniter on. Any other start
  recomputes the entry from that start (a clock stepped back, a cursor far behind).
- Bounded: at most ``max_specs`` entries, at most ``max_values`` occurrences held in all
  and ``max_values_per_spec`` in one, and ``max_texts`` texts; the least recently used
  entry goes first (~25 MB at most at the defaults). Invalid specs are never kept.
- One owner, one thread: not thread-safe, and owned, not global. The planner owns one
  (used inside its write transactions, on the writer thread) and the API app owns one
  (used by the views, on the event loop); each is created where its owner is built.
- A caller may hold an iterator across other calls: every step looks its entry up again,
  so an entry evicted or recomputed meanwhile only costs time, never a wrong value.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from appliance.core.cron import CronSpec, occurrences_after, parse_cron
from appliance.core.instants import format_scheduled_for

MAX_SPECS = 4096  # ~3 KB each (a CronSpec carries its croniter)
MAX_VALUES = 250_000  # ~40 bytes each
# The planner reads up to 10,000 occurrences of one schedule in a pass (PlannerConfig);
# the next schedule with the same spec and cursor should find them all still here.
MAX_VALUES_PER_SPEC = 12_000
MAX_TEXTS = 8192
CHUNK = 8  # values computed at a time: next_runs' 5, and the planner's look-ahead


class Occurrences(Protocol):
    """What the occurrence streams (``core.timing``, ``core.jitter``) read: this cache, or
    a pass's fan-out over it (``core.occurrence_fanout``)."""

    def spec(
        self,
        expression: str,
        timezone: str,
        dst_gap: str | None = None,
        dst_fold: str | None = None,
    ) -> CronSpec: ...

    def after(self, spec: CronSpec, after_ms: int) -> Iterator[int]: ...


@dataclass(slots=True, kw_only=True)
class _Entry:
    """Every occurrence of ``spec`` in ``(anchor, values[-1]]`` (mutable: owned here)."""

    spec: CronSpec
    anchor: int
    values: list[int]
    source: Iterator[int] | None  # continues after values[-1]; None once exhausted


class OccurrenceCache:
    def __init__(
        self,
        *,
        max_specs: int = MAX_SPECS,
        max_values: int = MAX_VALUES,
        max_values_per_spec: int = MAX_VALUES_PER_SPEC,
        max_texts: int = MAX_TEXTS,
    ) -> None:
        self._max_specs = max_specs
        self._max_values = max_values
        self._max_values_per_spec = max_values_per_spec
        self._max_texts = max_texts
        self._specs: OrderedDict[tuple[str, str, str | None, str | None], CronSpec] = OrderedDict()
        # By expression, zone and the DST policy in force: what decides the occurrences.
        self._entries: OrderedDict[tuple[str, str, str, str], _Entry] = OrderedDict()
        self._held = 0  # values in all entries
        self._texts: OrderedDict[int, str] = OrderedDict()

    def spec(
        self,
        expression: str,
        timezone: str,
        dst_gap: str | None = None,
        dst_fold: str | None = None,
    ) -> CronSpec:
        """``parse_cron(expression, timezone, dst_gap=…, dst_fold=…)``, parsed once;
        raises ValidationError."""
        key = (expression, timezone, dst_gap, dst_fold)
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = parse_cron(
                expression, timezone, dst_gap=dst_gap, dst_fold=dst_fold
            )
            if len(self._specs) > self._max_specs:
                self._specs.popitem(last=False)
        else:
            self._specs.move_to_end(key)
        return spec

    def after(self, spec: CronSpec, after_ms: int) -> Iterator[int]:
        """The same values as ``occurrences_after(spec, after_ms)``."""
        position = after_ms
        while (value := self._next(spec, position)) is not None:
            yield value
            position = value

    def text(self, ms: int) -> str:
        """``format_scheduled_for(ms)``, formatted once."""
        text = self._texts.get(ms)
        if text is None:
            text = self._texts[ms] = format_scheduled_for(ms)
            if len(self._texts) > self._max_texts:
                self._texts.popitem(last=False)
        return text

    def __len__(self) -> int:
        """Specs with occurrences held."""
        return len(self._entries)

    @property
    def values_held(self) -> int:
        return self._held

    def _next(self, spec: CronSpec, position: int) -> int | None:
        """The first occurrence of ``spec`` after ``position``, None if there is none."""
        entry = self._entry(spec, position)
        values = entry.values
        index = bisect.bisect_right(values, position)
        if index == len(values):
            if entry.source is None:
                return None  # the spec stops firing before year 9999
            if values and position > values[-1]:
                # Nothing known about the time between the last value and `position`.
                entry = self._restart(spec, position)
                index = 0
            index = self._extend(entry, index)
            if index == len(entry.values):
                return None
        return entry.values[index]

    def _entry(self, spec: CronSpec, position: int) -> _Entry:
        key = spec.identity
        entry = self._entries.get(key)
        if entry is None or position < entry.anchor:
            return self._restart(spec, position)
        self._entries.move_to_end(key)
        return entry

    def _restart(self, spec: CronSpec, position: int) -> _Entry:
        key = spec.identity
        old = self._entries.pop(key, None)
        if old is not None:
            self._held -= len(old.values)
        entry = _Entry(
            spec=spec, anchor=position, values=[], source=occurrences_after(spec, position)
        )
        self._entries[key] = entry
        return entry

    def _extend(self, entry: _Entry, index: int) -> int:
        """Compute up to CHUNK more values; returns where the caller's ``index`` now is.
        If the entry would outgrow its bound, the values before ``index`` (behind the
        caller) are dropped first."""
        if len(entry.values) + CHUNK > self._max_values_per_spec and index > 0:
            entry.anchor = entry.values[index - 1]
            del entry.values[:index]
            self._held -= index
            index = 0
        added = 0
        assert entry.source is not None
        for value in entry.source:
            entry.values.append(value)
            added += 1
            if added == CHUNK:
                break
        else:
            entry.source = None
        self._held += added
        self._evict(keep=entry)
        return index

    def _evict(self, *, keep: _Entry) -> None:
        while len(self._entries) > self._max_specs or self._held > self._max_values:
            key, oldest = next(iter(self._entries.items()))
            if oldest is keep:
                break  # the one in use stays (its own bound holds it)
            del self._entries[key]
            self._held -= len(oldest.values)
