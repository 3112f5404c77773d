"""A ``wget`` call's arguments as one request (wget(1)'s meaning of each option).

- The method: ``--method``; else ``POST`` with ``--post-data``; else ``GET``. The body:
  ``--post-data`` (form-encoded) or ``--body-data``; ``--post-file``/``--body-file`` are
  refused (a file of the old machine).
- ``--header`` and ``--referer`` headers (``-U`` is noted: Steeple sends its own);
  ``--user``/``--password`` (or ``--http-user``/``--http-password``) basic auth;
  ``-T``/``--timeout`` the timeout (wget's limits each wait, Steeple's the whole attempt:
  noted); ``-t``/``--tries`` the attempts (``0``, for ever, is refused), waiting as wget
  does: 1 s, 2 s … up to ``--waitretry`` (10 s unless given).
- A body (``--post-data``, ``--body-data``) is ``application/x-www-form-urlencoded``
  unless a ``Content-Type`` header says otherwise, as wget labels it.
- Accepted and ignored: :data:`IGNORED`, and ``-O``/``--output-document`` to ``-`` or
  ``/dev/null`` (without ``-O`` wget saves the answer in a file: Steeple keeps it in the
  run instead, noted). Options take their value as ``--name=value`` or the next word.
"""

from __future__ import annotations

from collections.abc import Callable

from appliance.client.crontab.request import (
    FORM,
    MAX_ATTEMPTS,
    Arguments,
    Refused,
    Request,
    Templated,
    header_parts,
    whole_number,
)

IGNORED = frozenset(
    [
        "-q",
        "--quiet",
        "-nv",
        "--no-verbose",
        "-v",
        "--verbose",
        "-S",
        "--server-response",
        "--delete-after",
        "--no-cache",
        "--retry-connrefused",
        "-4",
        "--inet4-only",
        "-6",
        "--inet6-only",
        "--auth-no-challenge",
        "--no-dns-cache",
    ]
)
_SHORT = {
    "-O": "--output-document",
    "-o": "--output-file",
    "-a": "--append-output",
    "-t": "--tries",
    "-T": "--timeout",
    "-U": "--user-agent",
}
_WITH_VALUE = frozenset(
    [
        "--output-document",
        "--output-file",
        "--append-output",
        "--tries",
        "--timeout",
        "--user-agent",
        "--method",
        "--header",
        "--post-data",
        "--body-data",
        "--post-file",
        "--body-file",
        "--user",
        "--password",
        "--http-user",
        "--http-password",
        "--referer",
        "--waitretry",
    ]
)
_OUTPUTS = ("-", "/dev/null")
DEFAULT_WAITRETRY_SECONDS = 10  # wget(1), "--waitretry"
_REASONS = {
    "--spider": "--spider sends HEAD, which Steeple does not send",
    "--no-check-certificate": "Steeple always verifies the receiver's TLS certificate",
    "--post-file": "--post-file sends a file of the old machine; put its content in the body",
    "--body-file": "--body-file sends a file of the old machine; put its content in the body",
}


class _Call:
    def __init__(self) -> None:
        self.request = Request()
        self.output = False
        self.user: str | None = None
        self.password: str | None = None
        self.form = False
        self.waitretry = DEFAULT_WAITRETRY_SECONDS


def _method(call: _Call, value: str, name: str) -> None:
    call.request.set_method(value, option=name)


def _post_data(call: _Call, value: str, name: str) -> None:
    call.request.body = value
    call.form = True


def _body_data(call: _Call, value: str, name: str) -> None:
    call.request.body = value
    call.form = True  # wget labels any body form-encoded unless a header says otherwise


def _header(call: _Call, value: str, name: str) -> None:
    pair = header_parts(value, option=name)
    if pair is not None:
        call.request.add_header(*pair)


def _tries(call: _Call, value: str, name: str) -> None:
    tries = whole_number(value, option=name)
    if tries == 0:
        raise Refused(f"{name} 0 retries for ever; Steeple makes at most 15 attempts")
    call.request.set_attempts(tries, option=f"{name} {value}")


def _waitretry(call: _Call, value: str, name: str) -> None:
    call.waitretry = whole_number(value, option=name)


def _output(call: _Call, value: str, name: str) -> None:
    if value not in _OUTPUTS:
        raise Refused(f"{name} {value} writes a file; only - and /dev/null are accepted")
    call.output = True


def _log(call: _Call, value: str, name: str) -> None:
    call.request.notes.append(f"{name} {value} ignored: the run's history is Steeple's log")


def _timeout(call: _Call, value: str, name: str) -> None:
    call.request.set_timeout(value, option=name)
    call.request.notes.append(
        f"{name} limits each wait in wget; Steeple's timeout_seconds limits the whole attempt"
    )


def _setter(attribute: str) -> Callable[[_Call, str, str], None]:
    def handle(call: _Call, value: str, name: str) -> None:
        setattr(call, attribute, value)

    return handle


def _header_option(header: str) -> Callable[[_Call, str, str], None]:
    def handle(call: _Call, value: str, name: str) -> None:
        call.request.add_header(header, value)

    return handle


_HANDLERS: dict[str, Callable[[_Call, str, str], None]] = {
    "--method": _method,
    "--post-data": _post_data,
    "--body-data": _body_data,
    "--header": _header,
    "--tries": _tries,
    "--waitretry": _waitretry,
    "--output-document": _output,
    "--output-file": _log,
    "--append-output": _log,
    "--timeout": _timeout,
    "--user": _setter("user"),
    "--http-user": _setter("user"),
    "--password": _setter("password"),
    "--http-password": _setter("password"),
    "--user-agent": lambda call, value, name: call.request.user_agent(value, option=name),
    "--referer": _header_option("Referer"),
}


def read_wget(args: Arguments) -> Request:
    """The request of wget's arguments (after ``wget``); :class:`Refused` if it has none."""
    call = _Call()
    while args.more():
        text = args.next(header=args.starts("--header="))
        if not text.startswith("-") or text == "-":
            call.request.set_url(text, program="wget")
        elif text.startswith("--") or text == "-nv":
            name, equals, value = text.partition("=")
            if isinstance(text, Templated):  # partition's parts are plain strings
                value = Templated(value)
            _option(call, args, name, value if equals else None)
        else:
            _short(call, args, text)
    return _finish(call)


def _short(call: _Call, args: Arguments, text: str) -> None:
    """``-q``, ``-qO-``, ``-O /dev/null``, ``-t3``: letters, the last may take a value."""
    for index, letter in enumerate(text[1:], start=1):
        name = _SHORT.get("-" + letter, "-" + letter)
        if name in _WITH_VALUE:
            rest = text[index + 1 :]
            _option(call, args, "-" + letter, rest if rest else None)
            return
        _option(call, args, "-" + letter, None)


def _option(call: _Call, args: Arguments, written: str, value: str | None) -> None:
    name = _SHORT.get(written, written)
    if name in _REASONS:
        raise Refused(_REASONS[name])
    if name in IGNORED:
        return
    if name not in _HANDLERS:
        raise Refused(f"wget option {written} is not supported by the import")
    if value is None and name in _WITH_VALUE:
        value = args.value(written, header=name == "--header")
    _HANDLERS[name](call, value or "", written)


def _finish(call: _Call) -> Request:
    request = call.request
    if request.url is None:
        raise Refused("wget is called without a URL")
    if call.user is not None or call.password is not None:
        request.basic_auth(call.user or "", call.password or "")
    if "max_attempts" in request.retry:
        # wget waits 1 s after the first failure, 2 s after the second … up to --waitretry.
        longest = min(max(call.waitretry, 1), MAX_ATTEMPTS - 1)
        request.retry["backoff"] = list(range(1, longest + 1))
    if request.method is None:
        request.method = "POST" if request.body is not None else "GET"
    if request.body is not None and request.method in ("GET", "DELETE"):
        raise Refused(f"wget sends a body with {request.method} here; Steeple's carries none")
    if request.body is None and request.method not in ("GET", "DELETE"):
        request.empty_body(program="wget")
    if request.body is not None and request.content_type is None and call.form:
        request.content_type = FORM
    if not call.output:
        request.notes.append("wget saved each answer in a file; Steeple keeps it in the run")
    return request
