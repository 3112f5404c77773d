"""The programs people put in front of ``curl`` in a crontab, and what each means for the
schedule:

- ``timeout DURATION`` (``30``, ``30s``, ``5m``, ``1h``) kills the call after that long:
  the schedule's ``timeout_seconds``, unless curl's own limit is shorter.
- ``flock -n FILE`` (``--nonblock``, also ``-xn``) skips a run while the last one still
  holds the lock: ``overlap = "skip"``. A blocking ``flock`` queues every run behind the
  lock, which no overlap policy is, so it is refused.
- ``nice`` and ``ionice`` change only the priority on the old machine: dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from appliance.client.crontab.request import Refused
from appliance.client.crontab.shell import Word

WRAPPERS = ("timeout", "flock", "nice", "ionice")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smh]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


@dataclass(slots=True)
class Wrapping:
    timeout_seconds: float | None = None
    overlap: str | None = None
    notes: list[str] = field(default_factory=list)


def unwrap(words: list[Word]) -> tuple[list[Word], Wrapping]:
    """The words from the wrapped program on, and what the wrappers before it meant."""
    wrapping = Wrapping()
    while words:
        program = (words[0].literal() or "").rsplit("/", 1)[-1]
        if program == "timeout":
            words = _timeout(words[1:], wrapping)
        elif program == "flock":
            words = _flock(words[1:], wrapping)
        elif program in ("nice", "ionice"):
            words = _priority(words[1:])
        else:
            break
    return words, wrapping


def _timeout(words: list[Word], wrapping: Wrapping) -> list[Word]:
    texts = [w.literal() for w in words[:1]]
    match = _DURATION.fullmatch(texts[0] or "") if texts else None
    if match is None:
        raise Refused("timeout: only `timeout DURATION command` (30, 30s, 5m, 1h) is read")
    wrapping.timeout_seconds = float(match[1]) * _UNITS[match[2]]
    return words[1:]


def _flock(words: list[Word], wrapping: Wrapping) -> list[Word]:
    options = []
    while words and (words[0].literal() or "").startswith("-"):
        options.append(words[0].literal() or "")
        words = words[1:]
    short = [o for o in options if not o.startswith("--")]
    known = all(set(o[1:]) <= {"n", "x", "e"} for o in short) and set(options) - set(short) <= {
        "--nonblock",
        "--exclusive",
    }
    if not known or not ("--nonblock" in options or any("n" in o for o in short)):
        raise Refused(
            "flock: only `flock -n FILE command` (skip a run while the last holds the lock)"
            " has a Steeple equivalent"
        )
    if len(words) < 2:
        raise Refused("flock -n needs a lock file and a command")
    wrapping.overlap = "skip"
    wrapping.notes.append("flock -n skipped a run while the last held the lock: overlap skip")
    return words[1:]


def _priority(words: list[Word]) -> list[Word]:
    while words and (words[0].literal() or "").startswith("-"):
        takes_value = words[0].literal() in ("-n", "-c", "-p")
        words = words[2:] if takes_value else words[1:]
    return words
