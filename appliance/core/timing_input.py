"""The timing fields of tenant JSON — ``cron``, ``at``, ``every``/``every_seconds``,
``timezone``, ``start_at``, ``end_at``, ``dst`` — read for a schedule and for a preview
alike.

Rules this module guards (docs/schedules.md):

- Exactly one of ``cron``, ``at`` and ``every`` (or its twin ``every_seconds``) is given;
  otherwise one 422 names every field involved.
- Instants are RFC 3339 text with an explicit offset, whole seconds (an occurrence is a
  whole second, ADR 0037), from 1970 to before year 9999; ``end_at`` is after
  ``start_at``, and a one-off's ``at`` lies inside the bounds.
- ``dst`` (``core.dst``, ADR 0043) is a cron schedule's: with ``at`` or ``every`` it is
  refused (422), as those count in UTC, where clocks never jump.
- An interval is at least 1 s and at most :data:`~appliance.core.timing.MAX_EVERY_SECONDS`.
- The document form (:func:`timing_document`) always has every key, ``null`` when unset, so
  a merge patch re-reads it unchanged; :func:`switch_kind` makes a patch that names
  another kind drop the stored one, so a PATCH can switch kinds in one request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from appliance.core.cron import END_MS, MAX_EXPRESSION_CHARS, MAX_TIMEZONE_CHARS, parse_cron
from appliance.core.dst import Fold, Gap, check_policy
from appliance.core.instants import format_instant, parse_instant
from appliance.core.json_fields import FieldReader
from appliance.core.timing import MAX_EVERY_SECONDS, Timing, parse_every
from appliance.errors import ValidationError

TIMING_FIELDS: Final = (
    "cron",
    "at",
    "every",
    "every_seconds",
    "timezone",
    "start_at",
    "end_at",
    "dst",
)
KIND_FIELDS: Final = ("cron", "at", "every", "every_seconds")
_RANGE: Final = f"from {format_instant(0)} to before {format_instant(END_MS)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingInput:
    """The validated timing of a schedule or a preview (``cron`` is '' unless its kind)."""

    cron: str
    timezone: str
    at: int | None
    every_seconds: int | None
    start_at: int | None
    end_at: int | None
    dst_gap: Gap | None = None
    dst_fold: Fold | None = None


def read_timing(fields: FieldReader) -> TimingInput:
    """The timing fields of ``fields.obj``; problems are recorded on ``fields``."""
    given = [key for key in KIND_FIELDS if fields.given(key)]
    if not given:
        fields.fail(
            "cron",
            'give when the schedule fires: cron (e.g. "0 3 * * *"), at (one instant, e.g.'
            ' "2026-12-24T18:00:00+01:00") or every (e.g. "15m")',
        )
    elif len(given) > 1:
        fields.fail(
            given[1],
            f"{' and '.join(given)} are all given; a schedule has exactly one of cron, at"
            " and every (or every_seconds)",
        )
    timezone = fields.text(
        "timezone", default="UTC", max_chars=MAX_TIMEZONE_CHARS, example="Europe/Berlin"
    )
    cron = _cron(fields, timezone) if fields.given("cron") else ""
    if not (cron and fields.ok("cron")) and fields.ok("timezone") and fields.given("timezone"):
        _absorb_cron(fields, "* * * * *", timezone, only="timezone")  # the timezone alone
    at = instant(fields, "at")
    every = _every(fields)
    start_at, end_at = instant(fields, "start_at"), instant(fields, "end_at")
    if start_at is not None and end_at is not None and end_at <= start_at:
        fields.fail("end_at", "must be after start_at")
    elif at is not None and not (
        (start_at is None or start_at <= at) and (end_at is None or at <= end_at)
    ):
        fields.fail("at", "lies outside start_at and end_at; nothing would ever fire")
    gap, fold = _dst(fields, cron_kind=not (given and given[0] != "cron"))
    return TimingInput(
        cron=cron,
        timezone=timezone,
        at=at,
        every_seconds=every,
        start_at=start_at,
        end_at=end_at,
        dst_gap=gap,
        dst_fold=fold,
    )


def _dst(fields: FieldReader, *, cron_kind: bool) -> tuple[Gap | None, Fold | None]:
    gap, fold, problems = check_policy(fields.obj.get("dst"))
    fields.errors.extend(problems)
    if fields.given("dst") and not cron_kind:
        fields.fail(
            "dst",
            "applies to cron schedules only: at and every count in UTC, where clocks never"
            " jump; remove it",
        )
    return (None if gap is None else Gap(gap)), (None if fold is None else Fold(fold))


def instant(fields: FieldReader, key: str) -> int | None:
    """An optional RFC 3339 instant with an offset, a whole second, inside the range."""
    if not fields.given(key):
        return None
    text = fields.text(key, default=None, max_chars=64, example="2026-12-24T18:00:00+01:00")
    if not fields.ok(key):
        return None
    try:
        value = parse_instant(text)
    except ValueError as error:
        fields.fail(key, str(error))
        return None
    if not 0 <= value < END_MS:
        fields.fail(key, f"must be {_RANGE}")
    elif value % 1000:
        fields.fail(key, "must be a whole second (occurrences have no fractions of a second)")
    else:
        return value
    return None


def _cron(fields: FieldReader, timezone: str) -> str:
    cron = fields.text("cron", default=None, max_chars=MAX_EXPRESSION_CHARS, example="0 3 * * *")
    if fields.ok("cron"):
        # A timezone that is not even a string is already reported: check the cron in UTC.
        _absorb_cron(fields, cron, timezone if fields.ok("timezone") else "UTC", only=None)
    return cron


def _absorb_cron(fields: FieldReader, cron: str, timezone: str, *, only: str | None) -> None:
    try:
        parse_cron(cron, timezone)
    except ValidationError as error:
        fields.absorb(error, only=only)


def _every(fields: FieldReader) -> int | None:
    if fields.given("every_seconds"):
        seconds = fields.integer(
            "every_seconds", default=0, low=1, high=MAX_EVERY_SECONDS, unit="seconds"
        )
        return seconds if fields.ok("every_seconds") else None
    if not fields.given("every"):
        return None
    text = fields.text("every", default=None, max_chars=16, example="15m")
    if not fields.ok("every"):
        return None
    try:
        seconds = parse_every(text)
    except ValueError as error:
        fields.fail("every", str(error))
        return None
    if seconds > MAX_EVERY_SECONDS:
        fields.fail("every", f"is {seconds} s; the longest interval is {MAX_EVERY_SECONDS} s")
        return None
    return seconds


def timing_document(timing: Timing) -> dict[str, object]:
    """The tenant-facing timing fields: every key present, ``null`` when unset; an
    interval is echoed as ``every_seconds``."""

    def text(ms: int | None) -> str | None:
        return None if ms is None else format_instant(ms)

    return {
        "cron": timing.cron or None,
        "at": text(timing.at),
        "every_seconds": timing.every_seconds,
        "timezone": timing.timezone,
        "start_at": text(timing.start_at),
        "end_at": text(timing.end_at),
        "dst": dst_document(timing),
    }


def dst_document(timing: Timing) -> dict[str, str | None] | None:
    """The stored ``dst`` policy: null when none (ADR 0037's rule), else both keys, a key
    left to ADR 0037's rule null."""
    if timing.dst_gap is None and timing.dst_fold is None:
        return None
    return {"gap": timing.dst_gap, "fold": timing.dst_fold}


def switch_kind(document: dict[str, object], patch: Mapping[str, object]) -> None:
    """A patch naming a kind replaces the stored kind: the others leave the document
    (a patch that names two kinds is still refused, by :func:`read_timing`)."""
    if any(patch.get(key) is not None for key in KIND_FIELDS):
        for key in KIND_FIELDS:
            if key not in patch:
                document.pop(key, None)
        if patch.get("cron") is None and "dst" not in patch:
            document.pop("dst", None)  # a cron's DST policy leaves with the cron
