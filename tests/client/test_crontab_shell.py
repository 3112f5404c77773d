"""The command splitter agrees with the real ``/bin/sh`` and with ``shlex``; crontab lines
are read as cron reads them."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.client.crontab.lines import Entry, Setting, read_crontab, split_percent
from appliance.client.crontab.shell import ShellRefusal, Variable, Word, split_command
from tests.client.crontab_corpus import CASES, Case, Refusal

# The moved corpus lines, but `&>` (dash, Debian's sh, reads it as `&` then `>`: curl runs
# once in the background with the same arguments, which this harness cannot capture).
MOVED = [c for c in CASES if not isinstance(c.expected, Refusal) and "&>" not in c.crontab]


def _entry_and_env(crontab: str, *, system: bool) -> tuple[Entry, dict[str, str]]:
    lines = read_crontab(crontab, system=system)
    env = {item.name: item.value for item in lines if isinstance(item, Setting)}
    [entry] = [item for item in lines if isinstance(item, Entry)]
    return entry, env


def _sh_argv(command: str, env: dict[str, str], tmp_path: Path) -> list[str]:
    """The arguments /bin/sh passes to the command's program, the program left out."""
    out = tmp_path / "argv"
    arguments = command.split(None, 1)[1] if " " in command.strip() else ""
    script = f'set -- {arguments}\nprintf "%s\\0" "$@" > "$ARGV_OUT"'
    subprocess.run(
        ["/bin/sh", "-c", script],
        env={"PATH": os.environ["PATH"], "ARGV_OUT": str(out), **env},
        check=True,
        timeout=10,
    )
    return out.read_text(encoding="utf-8").split("\0")[:-1]


@pytest.mark.parametrize("case", MOVED, ids=[case.id for case in MOVED])
def test_the_words_are_the_ones_sh_passes(case: Case, tmp_path: Path) -> None:
    entry, env = _entry_and_env(case.crontab, system=case.system)
    words = split_command(entry.command)
    ours = ["".join(p if isinstance(p, str) else env[p.name] for p in w.parts) for w in words]
    assert ours[1:] == _sh_argv(entry.command, env, tmp_path)


@given(st.lists(st.text(st.characters(codec="ascii", exclude_categories=["Cc"])), max_size=6))
def test_a_command_quoted_by_shlex_splits_back_to_its_words(words: list[str]) -> None:
    assert [w.literal() for w in split_command(shlex.join(["curl", *words]))] == [
        "curl",
        *words,
    ]


def test_variables_quotes_and_harmless_redirections() -> None:
    assert split_command("""curl 'a b'"c"d "$X-${Y}" '$Z' \\$W $ >/dev/null 2>&1 # done""") == [
        Word(("curl",)),
        Word(("a bcd",)),
        Word((Variable("X"), "-", Variable("Y"))),
        Word(("$Z",)),
        Word(("$W",)),
        Word(("$",)),
    ]
    assert split_command("curl '' x") == [Word(("curl",)), Word(()), Word(("x",))]


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("curl x 2>/tmp/err", ">/tmp/err"),
        ("curl x < in", "input redirection"),
        ("curl x || echo failed", "(||)"),
        ("curl 'x", "unterminated '"),
        ('curl "x', 'unterminated "'),
        ("curl ${X:-y}", "no fixed value"),
        ("curl $?", "no fixed value"),
    ],
)
def test_what_is_not_one_simple_command_is_refused(command: str, reason: str) -> None:
    with pytest.raises(ShellRefusal, match=".*" + reason.replace("(", r"\(").replace(")", r"\)")):
        split_command(command)


def test_percent_is_standard_input_and_backslash_percent_is_a_percent() -> None:
    assert split_percent(r"date +\%F") == ("date +%F", None)
    assert split_percent("mail -s hi me%line one%line two") == (
        "mail -s hi me",
        "line one\nline two",
    )


def test_crontab_lines_as_cron_reads_them() -> None:
    lines = read_crontab(
        '# top\n\nA = "quoted value"\nCRON_TZ=Europe/Rome\n# job\n0 1 * * * curl x # trailing\n',
        system=False,
    )
    assert lines[0] == Setting(line=3, name="A", value="quoted value")
    entry = lines[2]
    assert isinstance(entry, Entry)
    assert (entry.line, entry.fields, entry.command, entry.zone, entry.comment) == (
        6,
        "0 1 * * *",
        "curl x # trailing",
        "Europe/Rome",
        "job",
    )
