"""The HTTP request a ``curl`` or ``wget`` line sends, in the terms of a schedule, and the
rules both readers share (methods, URLs, basic auth, limits)."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance.client.crontab.shell import ShellRefusal, Word

METHODS = ("POST", "PUT", "PATCH", "GET", "DELETE")
BODILESS = ("GET", "DELETE")
MAX_TIMEOUT_SECONDS = 300  # the API's timeout_seconds maximum
MAX_ATTEMPTS = 15  # the API's retry.max_attempts maximum
FORM = "application/x-www-form-urlencoded"

Expand = Callable[[Word, bool], str]
"""A word's text, its variables resolved; the flag: the word is a header (raises
ShellRefusal for a variable it cannot resolve)."""


class Templated(str):
    """A header value holding ``${NAME}`` for ``steeple apply`` to fill in (a literal
    ``${`` in it written ``$${``); any other value is sent as it is."""

    __slots__ = ()


class Refused(Exception):
    """The call has no faithful schedule; the message says why."""


@dataclass(slots=True, kw_only=True)
class Request:
    """What one call sends, filled in as its arguments are read."""

    method: str | None = None
    url: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: str | None = None
    content_type: str | None = None
    timeout_seconds: int | None = None
    retry: dict[str, object] = field(default_factory=dict)
    overlap: str | None = None  # what a wrapper (flock -n) implies
    notes: list[str] = field(default_factory=list)

    def set_url(self, url: str, *, program: str) -> None:
        if self.url is not None:
            raise Refused(f"{program} calls more than one URL; Steeple sends one per schedule")
        if "://" not in url:
            self.notes.append(f"{url} has no scheme: {program} uses http://, and so does this")
            url = "http://" + url
        scheme = url.split("://", 1)[0].lower()
        if scheme not in ("http", "https"):
            raise Refused(f"{scheme}:// is not HTTP; Steeple sends HTTP(S) requests only")
        self.url = url

    def set_method(self, method: str, *, option: str) -> None:
        upper = method.upper()
        if upper not in METHODS:
            raise Refused(f"{option} {method}: Steeple sends {', '.join(METHODS)} only")
        self.method = upper

    def add_header(self, name: str, value: str) -> None:
        if name.lower() == "content-type":
            self.content_type = value
            return
        self.headers = [(n, v) for n, v in self.headers if n.lower() != name.lower()]
        self.headers.append((name, value))

    def user_agent(self, value: str, *, option: str) -> None:
        self.notes.append(
            f"{option} {value!r} ignored: Steeple sends its own User-Agent on every delivery"
        )

    def basic_auth(self, user: str, password: str) -> None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        self.add_header("Authorization", f"Basic {token}")
        self.notes.append(
            "the Authorization header holds a password: put it in an environment variable"
            " (${NAME}) before the file goes into git"
        )

    def empty_body(self, *, program: str) -> None:
        """A body method called without data: an empty body, which Steeple labels."""
        self.body = ""
        if self.content_type is None:
            self.notes.append(
                f"{program} sent this {self.method} with no body and no Content-Type; Steeple"
                " sends the empty body as application/json: set content_type if that matters"
            )

    def set_timeout(self, text: str, *, option: str) -> None:
        try:
            seconds = float(text)
        except ValueError:
            raise Refused(f"{option} {text}: not a number of seconds") from None
        if not math.isfinite(seconds) or seconds <= 0:
            raise Refused(f"{option} {text}: Steeple needs a time limit of 1-300 seconds")
        whole = max(1, math.ceil(seconds))
        if whole > MAX_TIMEOUT_SECONDS:
            self.notes.append(f"{option} {text} is above Steeple's limit: 300 seconds")
            whole = MAX_TIMEOUT_SECONDS
        self.timeout_seconds = whole

    def set_attempts(self, attempts: int, *, option: str) -> None:
        if attempts > MAX_ATTEMPTS:
            self.notes.append(f"{option} asks for {attempts} attempts; Steeple makes at most 15")
            attempts = MAX_ATTEMPTS
        self.retry["max_attempts"] = attempts


def whole_number(text: str, *, option: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise Refused(f"{option} {text}: not a whole number")
    return int(text)


def header_parts(text: str, *, option: str) -> tuple[str, str] | None:
    """``Name: value`` as a pair; None for ``Name:`` (a header taken away, not sent)."""
    name, colon, value = text.partition(":")
    if not colon and name.endswith(";"):
        return name[:-1].strip(), ""  # curl's `Name;`: the header with an empty value
    if not colon or not name.strip() or "${" in name:
        raise Refused(f"{option} {text!r} is not a header (Name: value)")
    if not value.strip():
        return None
    kind = Templated if isinstance(text, Templated) else str
    return name.strip(), kind(value.strip())


class Arguments:
    """A call's words after the program's name, read one at a time."""

    def __init__(self, words: list[Word], expand: Expand) -> None:
        self._words = words
        self._expand = expand
        self._index = 0

    def more(self) -> bool:
        return self._index < len(self._words)

    def starts(self, prefix: str) -> bool:
        """Whether the next word starts with the literal ``prefix``."""
        parts = self._words[self._index].parts
        return bool(parts) and isinstance(parts[0], str) and parts[0].startswith(prefix)

    def next(self, *, header: bool = False) -> str:
        word = self._words[self._index]
        self._index += 1
        try:
            return self._expand(word, header)
        except ShellRefusal as refusal:
            raise Refused(str(refusal)) from None

    def value(self, option: str, *, header: bool = False) -> str:
        """The value of ``option``: the next word."""
        if not self.more():
            raise Refused(f"{option} has no value")
        return self.next(header=header)
