"""One cron command as ``/bin/sh`` splits it into words, or the reason it is more than one
program called with fixed arguments.

Rules (POSIX shell quoting; cron runs every command with ``sh -c``):

- Blanks separate words; ``'…'`` is literal; inside ``"…"`` a backslash escapes only
  ``$ ` " \\``; outside quotes a backslash makes the next character literal. A ``#`` that
  starts a word starts a comment.
- ``$NAME`` and ``${NAME}`` (outside single quotes) are kept as :class:`Variable` parts for
  the caller to resolve; ``$(…)``, backquotes, ``$?``-style and ``${NAME:-…}`` forms are
  refused.
- ``|``, ``&``, ``;``, ``(``, ``)`` and ``<`` outside quotes are refused: a pipeline, a
  list, a background job or a subshell is not one HTTP request (an unquoted ``&`` in a URL
  is the classic case: sh cuts the URL there). Output redirections are accepted only to
  ``/dev/null`` or onto the other output (``>/dev/null 2>&1``): they lose nothing that
  Steeple does not keep itself. A closing ``|| true`` (or ``|| :``) only hides the exit
  status, which cron ignores: accepted.
- Unquoted ``* ? [`` would be file name patterns; sh keeps them as written when no file
  matches, which is what a URL's ``?`` does in practice, so they are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BLANKS = " \t"
_OPERATORS = "|&;()<>"
_HARMLESS_TARGETS = ("/dev/null", "&1", "&2")
# `|| true` (or `|| :`) closing the command only hides the exit status, which cron ignores.
_IGNORED_STATUS = re.compile(r"\|\|[ \t]*(?:true|:)[ \t]*(?:#.*)?")


class ShellRefusal(Exception):
    """The command is not one program with fixed arguments; the message says why."""


@dataclass(frozen=True, slots=True)
class Variable:
    name: str


Part = str | Variable


@dataclass(frozen=True, slots=True)
class Word:
    """One argument: literal text and variables, in order."""

    parts: tuple[Part, ...]

    def literal(self) -> str | None:
        """The word's text, or None when it holds a variable."""
        if any(isinstance(part, Variable) for part in self.parts):
            return None
        return "".join(str(part) for part in self.parts)

    def variables(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.parts if isinstance(part, Variable))


@dataclass(slots=True)
class _Builder:
    parts: list[Part] = field(default_factory=list)
    started: bool = False  # a quoted empty string ('') is still a word
    quoted: bool = False

    def add(self, text: str | Variable, *, quoted: bool = False) -> None:
        self.started = True
        self.quoted = self.quoted or quoted
        if isinstance(text, str) and self.parts and isinstance(self.parts[-1], str):
            self.parts[-1] += text
        elif text != "":
            self.parts.append(text)

    def word(self) -> Word:
        return Word(tuple(self.parts))


def split_command(command: str) -> list[Word]:
    """The words of ``command``; :class:`ShellRefusal` for anything but one simple command."""
    words: list[Word] = []
    current = _Builder()
    index = 0
    while index < len(command):
        char = command[index]
        if char in _BLANKS:
            index += 1
            if current.started:
                words.append(current.word())
                current = _Builder()
        elif char == "#" and not current.started:
            break
        elif char in _OPERATORS:
            index = _operator(command, index, current, words)
            current = _Builder()
        elif char == "'":
            end = command.find("'", index + 1)
            if end < 0:
                raise ShellRefusal("an unterminated ' quote")
            current.add(command[index + 1 : end], quoted=True)
            index = end + 1
        elif char == '"':
            index = _double_quoted(command, index + 1, current)
        elif char == "\\":
            current.add(command[index + 1 : index + 2], quoted=True)
            index += 2
        elif char == "$":
            index = _variable(command, index, current)
        elif char == "`":
            raise ShellRefusal("a command substitution (`…`) runs another program")
        else:
            current.add(char)
            index += 1
    if current.started:
        words.append(current.word())
    return words


def _double_quoted(command: str, index: int, current: _Builder) -> int:
    current.add("", quoted=True)
    while index < len(command):
        char = command[index]
        if char == '"':
            return index + 1
        if char == "\\" and command[index + 1 : index + 2] in ("$", "`", '"', "\\"):
            current.add(command[index + 1], quoted=True)
            index += 2
        elif char == "$":
            index = _variable(command, index, current)
        elif char == "`":
            raise ShellRefusal("a command substitution (`…`) runs another program")
        else:
            current.add(char, quoted=True)
            index += 1
    raise ShellRefusal('an unterminated " quote')


def _variable(command: str, index: int, current: _Builder) -> int:
    """Read ``$NAME`` or ``${NAME}`` at ``index`` (the ``$``); the index after it."""
    rest = command[index + 1 :]
    if rest.startswith("("):
        raise ShellRefusal("a command substitution ($(…)) runs another program")
    braced = re.match(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", rest)
    if braced is not None:
        current.add(Variable(braced[1]))
        return index + 1 + braced.end()
    plain = _NAME.match(rest)
    if plain is not None:
        current.add(Variable(plain[0]))
        return index + 1 + plain.end()
    if rest[:1] in ("", " ", "\t", '"'):
        current.add("$")  # a lone $ is literal
        return index + 1
    raise ShellRefusal(f"the shell expansion ${rest[:2]}… has no fixed value")


def _operator(command: str, index: int, current: _Builder, words: list[Word]) -> int:
    """A redirection that loses nothing (the index after it), else :class:`ShellRefusal`."""
    char = command[index]
    descriptor = current.word().literal() if current.started and not current.quoted else None
    if descriptor is not None and descriptor.isdigit():
        pass  # `2>`: the digits were the redirection's descriptor, not a word
    elif current.started:
        words.append(current.word())
    if _IGNORED_STATUS.fullmatch(command[index:]):
        return len(command)  # cron ignores the exit status anyway
    if char == "&" and command[index + 1 : index + 2] == ">":
        index += 1  # `&>/dev/null`: both outputs
    elif char != ">":
        raise ShellRefusal(_operator_reason(command, index))
    index += 1
    if command[index : index + 1] == ">":
        index += 1
    target = re.match(r"[ \t]*(&[12]|[^ \t|&;()<>]+)", command[index:])
    if target is None or target[1] not in _HARMLESS_TARGETS:
        shown = target[1] if target else ""
        raise ShellRefusal(
            f"the redirection >{shown} writes the output somewhere Steeple does not"
            " (only >/dev/null and 2>&1 are accepted: Steeple keeps each answer in the run)"
        )
    return index + target.end()


def _operator_reason(command: str, index: int) -> str:
    pair = command[index : index + 2]
    if pair in ("&&", "||"):
        return f"a list of commands ({pair}): Steeple sends one HTTP request"
    char = command[index]
    if char == "|":
        return "a pipeline (|): the output goes to another program"
    if char == ";":
        return "a list of commands (;): Steeple sends one HTTP request"
    if char == "&":
        return (
            "an unquoted & ends the command there (sh runs it in the background): quote"
            " a URL that holds &"
        )
    if char == "<":
        return "an input redirection (<): the command reads a file"
    return "a subshell or group ( … ) runs more than one command"
