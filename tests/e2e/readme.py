"""The README's shell commands as a reader copies them: its fenced ``sh`` blocks in order,
each split into the commands a shell would run, and the placeholders (``stk_…``) a reader
fills in from what an earlier command printed.

Used by the newcomer's walkthrough (tests/e2e/test_readme_walkthrough.py) and checked on
every run by tests/test_docs.py, so a new placeholder cannot go unfilled.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"
FENCE = re.compile(r"^( *)```sh\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
ELLIPSIS = "…"  # how the README marks a value the reader copies from earlier output


@dataclass(frozen=True, slots=True)
class Placeholder:
    """``text`` in a command stands for the first match of ``pattern`` (group 1) in the
    output of the earlier command that contains ``source``."""

    text: str
    source: str
    pattern: str


# Each value a reader copies by hand, and where it was printed (the README says so beside
# each: "the api_key printed above", "the schedule's id", "a run's id is in the list").
PLACEHOLDERS = (
    Placeholder("stk_…", "steeple tenant create", r'"api_key": ?"(stk_[^"]+)"'),
    Placeholder("sch_…", "8080/v1/schedules \\", r'"id": ?"(sch_[^"]+)"'),
    Placeholder("run_…", "/v1/schedules/sch_…/runs", r'"id": ?"(run_[^"]+)"'),
)


def sh_blocks(text: str) -> list[str]:
    """The ``sh`` blocks of a Markdown text, in order, their list indentation removed."""
    return [textwrap.dedent(indent + body) for indent, body in FENCE.findall(text)]


def commands(block: str) -> list[str]:
    """The commands of one block: a newline ends a command unless it is quoted or escaped
    by a backslash (a receiver in ``python3 -c '…'``, a JSON body over two lines). Lines
    that are only a comment (an example of the output) are not commands."""
    found: list[str] = []
    current, quote, escaped = "", "", False
    for char in block:
        if char == "\n" and not quote and not escaped:
            found.append(current)
            current = ""
            continue
        current += char
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif char in "'\"" and quote in ("", char):
            quote = "" if quote else char
    assert not quote, f"an unterminated {quote} in:\n{block}"
    found.append(current)
    return [c.strip() for c in found if c.strip() and not c.strip().startswith("#")]


def placeholders_in(command: str) -> list[str]:
    """Every ``…`` value of a command (its trailing comment aside)."""
    code = re.sub(r"\s+#[^'\"\n]*$", "", command)
    return re.findall(r"[\w.-]*" + ELLIPSIS, code)
