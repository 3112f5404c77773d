"""A ``curl`` call's arguments as one request (curl(1)'s meaning of each option).

- The method: ``-X``; else ``GET`` with ``-G``; else ``POST`` when data is given; else
  ``GET``. A body with ``GET`` or ``DELETE`` is refused (Steeple's carry none), as is
  ``-I`` (``HEAD``).
- Data (``-d``/``--data``/``--data-ascii``, ``--data-raw``, ``--data-binary``,
  ``--data-urlencode``, ``--json``) joins with ``&`` (``--json`` parts are concatenated),
  form-encoded unless ``--json`` or a ``Content-Type`` header says otherwise; ``@file``
  and ``@-`` are refused (the file is on the old machine, not in the schedule).
- ``-u user:password`` and ``--oauth2-bearer`` become an ``Authorization`` header;
  ``-e`` and ``-b name=value`` their headers (``-A`` is noted: Steeple
  sends its own User-Agent); ``-m`` the timeout; ``--retry N``,
  ``--retry-delay``, ``--retry-max-time`` and ``--retry-all-errors`` the retry policy:
  curl makes N + 1 attempts, retrying timeouts and 408, 429, 500, 502, 503 and 504
  (``--retry-all-errors``: every failure) after 1 s, doubling to 10 minutes.
- Accepted and ignored, since they change only what curl prints or how it connects:
  :data:`IGNORED`; ``-o``/``-D``/``--stderr`` only to ``/dev/null``. ``-L`` is accepted
  with a note (Steeple never follows a redirect). Every other option is refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from appliance.client.crontab.request import (
    BODILESS,
    FORM,
    Arguments,
    Refused,
    Request,
    header_parts,
    whole_number,
)

IGNORED = frozenset(
    [
        "-s",
        "--silent",
        "-S",
        "--show-error",
        "-f",
        "--fail",
        "--fail-with-body",
        "-v",
        "--verbose",
        "-i",
        "--include",
        "-q",
        "--disable",
        "-4",
        "--ipv4",
        "-6",
        "--ipv6",
        "--no-progress-meter",
        "-#",
        "--progress-bar",
        "--compressed",
        "-N",
        "--no-buffer",
        "--http1.1",
        "--basic",
        "--retry-connrefused",
        "--no-keepalive",
        "--tcp-nodelay",
        "--no-sessionid",
        "--path-as-is",
    ]
)
_TO_DEV_NULL = frozenset(["-o", "--output", "-D", "--dump-header", "--stderr"])
_IGNORED_VALUE = frozenset(["-w", "--write-out", "--connect-timeout"])
_ALIASES = {
    "-X": "--request",
    "-d": "--data",
    "--data-ascii": "--data",
    "-H": "--header",
    "-u": "--user",
    "-m": "--max-time",
    "-A": "--user-agent",
    "-e": "--referer",
    "-b": "--cookie",
    "-G": "--get",
    "-I": "--head",
    "-L": "--location",
    "-g": "--globoff",
    "-F": "--form",
    "-k": "--insecure",
    "-o": "--output",
    "-D": "--dump-header",
    "-w": "--write-out",
}
_WITH_VALUE = frozenset(
    [
        "--request",
        "--data",
        "--data-raw",
        "--data-binary",
        "--data-urlencode",
        "--json",
        "--header",
        "--user",
        "--max-time",
        "--user-agent",
        "--referer",
        "--cookie",
        "--url",
        "--retry",
        "--retry-delay",
        "--retry-max-time",
        "--oauth2-bearer",
        "--form",
        "--output",
        "--dump-header",
        "--stderr",
        "--write-out",
        "--connect-timeout",
    ]
)
_REASONS = {
    "--head": "-I/--head sends HEAD, which Steeple does not send",
    "--form": "-F/--form sends a multipart form; give the body with -d or --data-binary",
    "--insecure": "-k/--insecure: Steeple always verifies the receiver's TLS certificate",
}
# The statuses curl's --retry retries (curl(1), "--retry"); timeouts Steeple retries anyway.
TRANSIENT_STATUSES = [408, 429, 500, 502, 503, 504]


class _Call:
    def __init__(self, args: Arguments) -> None:
        self.args = args
        self.request = Request()
        self.data: list[str] = []
        self.json = False
        self.get = False
        self.glob = True

    def option(self, name: str, value: str | None) -> None:
        canonical = _ALIASES.get(name, name)
        if canonical in _REASONS:
            raise Refused(_REASONS[canonical])
        if canonical in _TO_DEV_NULL:
            if value != "/dev/null":
                raise Refused(f"{name} {value} writes a file; only /dev/null is accepted")
        elif canonical in IGNORED or canonical in _IGNORED_VALUE:
            if canonical == "--connect-timeout":
                self.request.notes.append(
                    "--connect-timeout ignored: Steeple's one time limit is timeout_seconds"
                )
        elif canonical in _HANDLERS:
            _HANDLERS[canonical](self, value or "", name)
        else:
            raise Refused(f"curl option {name} is not supported by the import")

    def data_part(self, text: str, option: str, *, files: bool = True) -> None:
        if files and text.startswith("@"):
            raise Refused(
                f"{option} {text} sends a file of the old machine; put its content in the"
                " schedule's body"
            )
        self.data.append(text)


def _request(call: _Call, value: str, name: str) -> None:
    call.request.set_method(value, option=name)


def _data(call: _Call, value: str, name: str) -> None:
    call.data_part(value, name)


def _raw(call: _Call, value: str, name: str) -> None:
    call.data_part(value, name, files=False)


def _json(call: _Call, value: str, name: str) -> None:
    call.json = True
    call.data_part(value, name)


def _urlencode(call: _Call, value: str, name: str) -> None:
    key, equals, content = value.partition("=")
    if "@" in (key if equals else value):
        raise Refused(f"{name} {value} sends a file of the old machine")
    if not equals:
        call.data.append(quote(value, safe=""))
    else:
        call.data.append((key + "=" if key else "") + quote(content, safe=""))


def _header(call: _Call, value: str, name: str) -> None:
    if value.startswith("@"):
        raise Refused(f"{name} {value} reads headers from a file of the old machine")
    pair = header_parts(value, option=name)
    if pair is None:
        call.request.notes.append(f"{name} {value!r} ignored: it only removes a curl default")
    else:
        call.request.add_header(*pair)


def _user(call: _Call, value: str, name: str) -> None:
    user, colon, password = value.partition(":")
    if not colon:
        raise Refused(f"{name} {value} has no password: curl would ask for one")
    call.request.basic_auth(user, password)


def _bearer(call: _Call, value: str, name: str) -> None:
    call.request.add_header("Authorization", f"Bearer {value}")


def _cookie(call: _Call, value: str, name: str) -> None:
    if "=" not in value:
        raise Refused(f"{name} {value} reads cookies from a file of the old machine")
    call.request.add_header("Cookie", value)


def _retry(call: _Call, value: str, name: str) -> None:
    call.request.set_attempts(whole_number(value, option=name) + 1, option=f"{name} {value}")
    call.request.retry.setdefault("backoff", {"initial": 1, "factor": 2, "max": 600})
    call.request.retry.setdefault("retry_on_status", TRANSIENT_STATUSES)


def _retry_delay(call: _Call, value: str, name: str) -> None:
    seconds = whole_number(value, option=name)
    if seconds >= 1:
        call.request.retry["backoff"] = [seconds]


def _retry_max_time(call: _Call, value: str, name: str) -> None:
    seconds = whole_number(value, option=name)
    if seconds >= 1:
        call.request.retry["max_age_seconds"] = seconds


def _all_errors(call: _Call, value: str, name: str) -> None:
    call.request.retry["all_errors"] = True


def _location(call: _Call, value: str, name: str) -> None:
    call.request.notes.append(
        "-L ignored: Steeple does not follow redirects (a 3xx is a failed attempt);"
        " check that the URL is the final one"
    )


def _header_option(header: str) -> Callable[[_Call, str, str], None]:
    def handle(call: _Call, value: str, name: str) -> None:
        call.request.add_header(header, value)

    return handle


def _get(call: _Call, value: str, name: str) -> None:
    call.get = True


def _globoff(call: _Call, value: str, name: str) -> None:
    call.glob = False


_HANDLERS: dict[str, Callable[[_Call, str, str], None]] = {
    "--request": _request,
    "--data": _data,
    "--data-binary": _data,
    "--data-raw": _raw,
    "--json": _json,
    "--data-urlencode": _urlencode,
    "--header": _header,
    "--user": _user,
    "--oauth2-bearer": _bearer,
    "--cookie": _cookie,
    "--user-agent": lambda call, value, name: call.request.user_agent(value, option=name),
    "--referer": _header_option("Referer"),
    "--max-time": lambda call, value, name: call.request.set_timeout(value, option=name),
    "--url": lambda call, value, name: call.request.set_url(value, program="curl"),
    "--retry": _retry,
    "--retry-delay": _retry_delay,
    "--retry-max-time": _retry_max_time,
    "--retry-all-errors": _all_errors,
    "--location": _location,
    "--get": _get,
    "--globoff": _globoff,
}


def read_curl(args: Arguments) -> Request:
    """The request of curl's arguments (after ``curl``); :class:`Refused` if it has none."""
    call = _Call(args)
    options_end = False
    while args.more():
        text = args.next()
        if options_end or not text.startswith("-") or text == "-":
            call.request.set_url(text, program="curl")
        elif text == "--":
            options_end = True
        elif text.startswith("--"):
            _long(call, text)
        else:
            _short(call, text)
    return _finish(call)


def _long(call: _Call, text: str) -> None:
    if "=" in text:
        raise Refused(f"curl option {text} is unknown to curl (write {text.replace('=', ' ', 1)})")
    canonical = _ALIASES.get(text, text)
    takes = canonical in _WITH_VALUE
    call.option(text, call.args.value(text, header=canonical == "--header") if takes else None)


def _short(call: _Call, text: str) -> None:
    for index, letter in enumerate(text[1:], start=1):
        name = "-" + letter
        canonical = _ALIASES.get(name, name)
        if canonical in _WITH_VALUE:
            rest = text[index + 1 :]
            is_header = canonical == "--header"
            call.option(name, rest if rest else call.args.value(name, header=is_header))
            return
        call.option(name, None)


def _finish(call: _Call) -> Request:
    request = call.request
    if request.url is None:
        raise Refused("curl is called without a URL")
    if call.glob and any(char in request.url for char in "[]{}"):
        raise Refused("curl reads [ ] and { } in a URL as a pattern of several URLs; use -g")
    all_errors = request.retry.pop("all_errors", False)
    if all_errors and "max_attempts" in request.retry:
        request.retry.pop("retry_on_status", None)
    elif all_errors:
        request.notes.append("--retry-all-errors ignored: there is no --retry")
    if call.get and call.data:
        separator = "&" if "?" in request.url else "?"
        request.url += separator + "&".join(call.data)
        call.data = []
    if request.method is None:
        request.method = "GET" if call.get or not call.data else "POST"
    if call.data:
        if request.method in BODILESS:
            raise Refused(f"curl sends a body with {request.method} here; Steeple's carries none")
        request.body = ("" if call.json else "&").join(call.data)
        request.content_type = request.content_type or ("application/json" if call.json else FORM)
        if call.json and not any(n.lower() == "accept" for n, _ in request.headers):
            request.headers.append(("Accept", "application/json"))
    elif request.method not in BODILESS:
        request.empty_body(program="curl")
    return request
