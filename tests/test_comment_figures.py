"""Comments and docstrings in ``appliance/`` state invariants and cite measurements
(bench/HISTORY.md, docs/performance.md), never quote them: a timing in a comment goes
stale with the next change and nobody re-measures it (CONTRIBUTING.md).

What counts as a quoted measurement is deliberately narrow, so the check does not cry
wolf at configuration: an approximate timing (``≈ 3 ms``, ``~40 µs``), any micro- or
nanosecond figure, a rate (``2,300 deliveries/s``), a timing or share after a verb of
measuring (``takes 3 ms``, ``measured 12 %``), a relative speed (``30 % faster``,
``6× the CPU``). A constant (``300 s``, ``CPython's default 5 ms``, ``lease 30 s``) has
none of these shapes. A quoted figure that must stay goes in ``ALLOWED`` with its reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parent.parent
UNIT = r"(?:ms|µs|us|ns|s|seconds|minutes|%|×)"
NUMBER = r"\d[\d,.]*"
AMOUNT = rf"{NUMBER}\s*(?:[-–]\s*{NUMBER}\s*)?"  # 3 ms, 0.2-6 ms, 20–30 %
FIGURE = re.compile(
    "|".join(
        (
            rf"(?:≈|~)\s*{AMOUNT}{UNIT}(?!\w)",
            rf"{NUMBER}\s*(?:µs|us|ns)\b",
            rf"{NUMBER}\s*(?:deliveries|occurrences|requests|schedules|creates|claims|runs)?/s\b",
            rf"\b(?:costs?|cost|takes?|took|measured|spends?|spent)\s+(?:up to |at most |about |"
            rf"around |only |just )?{AMOUNT}{UNIT}(?!\w)",
            rf"{NUMBER}\s*(?:%|×|x)\s*(?:sooner|faster|slower|less|more|cheaper|dearer|the)\b",
        )
    ),
    re.IGNORECASE,
)
# (path under appliance/, the phrase): a figure that is a fact rather than a measurement.
ALLOWED: set[tuple[str, str]] = set()


def prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every string that stands as a statement (module,
    class and function docstrings, attribute notes)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value


def quoted_figures(source: str) -> list[tuple[int, str]]:
    return [
        (line, match.group(0))
        for line, text in prose(source)
        for match in FIGURE.finditer(" ".join(text.split()))
    ]


def test_no_comment_in_the_appliance_quotes_a_measurement() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {figure!r}"
        for path in sorted((ROOT / "appliance").rglob("*.py"))
        for line, figure in quoted_figures(path.read_text(encoding="utf-8"))
        if (str(path.relative_to(ROOT / "appliance")), figure) not in ALLOWED
    ]
    assert found == []


def test_the_shapes_of_a_quoted_measurement_are_found() -> None:
    source = '''"""Takes 3 ms to parse."""
# ~40 µs per call, 2,300 deliveries/s
X = 1  # measured 12 %; a 5,000 burst 20–30 % sooner; ≈ 6× the CPU; ≈ 0.5-2 ms
def f() -> None:
    """Costs up to 6 ms; 9 us a field; a parse costs 0.2-6 ms."""
'''
    assert [figure for _, figure in quoted_figures(source)] == [
        "~40 µs",
        "2,300 deliveries/s",
        "measured 12 %",
        "30 % sooner",
        "≈ 6×",
        "≈ 0.5-2 ms",
        "Takes 3 ms",
        "Costs up to 6 ms",
        "9 us",
        "costs 0.2-6 ms",
    ]


def test_constants_and_code_are_not_figures() -> None:
    source = '''"""A lease of 30 s, renewed every 10 s; the longest deadline is 300 s."""
TIMEOUT_MS = 5_000  # CPython's default switch interval is 5 ms; 100 ms between polls
LABEL = "~40 µs"  # a string in code is not prose
def f() -> str:
    """At most 100 occurrences, 32 slots, ``initial × factor^(n-1)``, 2 h, 50 %."""
    return "2,300/s"
'''
    assert quoted_figures(source) == []
