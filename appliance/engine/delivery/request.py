"""Framing one request: the request line, the header block and the body, in one ``bytes``.

Rules:
- Validated as h11 validates a request it frames (its ABNF, ``h11._abnf``): the target is
  visible ASCII only, each header name a token, each value visible characters (obs-text
  allowed) with single spaces or tabs inside, no blanks around it and never CR, LF or
  NUL — so no header can be injected and no request split. Anything else is
  :class:`RequestError` and nothing is sent.
- The message's framing is h11's too: exactly one ``Host``; for a method that carries a
  body (POST, PUT, PATCH) exactly one ``Content-Length`` and it is the body's length; for
  one that does not (GET, DELETE) no ``Content-Length`` and no body at all (RFC 9110
  §8.6: a user agent sends none for a request without content whose method does not
  anticipate any; h11 reads such a request as having an empty body); never a
  ``Transfer-Encoding`` (a request here always has a known length) — so no header can
  make the receiver read another body than the one sent.
- The caller gives every header, ``Host`` and ``Content-Length`` included (client.py);
  nothing is added, reordered or changed, so the bytes equal h11's (and httpx's) framing
  of the same request (tests/engine/test_delivery_wire.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from appliance.core.schedules import Method

_TARGET = re.compile(rb"[\x21-\x7e]+")
_NAME = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")
# All names checked in one match of their join by ":", which no token holds: the join has
# exactly len - 1 colons if and only if no name holds one, so each part is one whole name.
_NAMES = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+(?::[-!#$%&'*+.^_`|~0-9a-zA-Z]+)*")
# _VALUE, for all values at once, joined and framed by NUL: no NUL inside (the count), none
# of the other blanks but space and tab (\s of a bytes pattern), none first or last.
_NOT_IN_VALUES = b"\n\r\x0b\x0c"


class RequestError(ValueError):
    """The request cannot be framed (the message names what is wrong)."""


def frame_request(
    method: Method, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
) -> bytes:
    """``METHOD target HTTP/1.1``, the headers as given, a blank line, the body."""
    if not _TARGET.fullmatch(target):
        raise RequestError(f"illegal request target {target!r}")
    names, values = zip(*headers, strict=False) if headers else ((), ())
    if not _names_valid(names):
        _refuse(_NAME, names, "name")
    if not _values_valid(values):
        _refuse(_VALUE, values, "value")
    _check_framing(method, b":".join(names).lower().split(b":"), values, body)
    block = b"\r\n".join(map(b": ".join, headers))
    line = method.value.encode("ascii")
    return b"".join((line, b" ", target, b" HTTP/1.1\r\n", block, b"\r\n\r\n", body))


def _names_valid(names: Sequence[bytes]) -> bool:
    """Every name matches ``_NAME`` (at least one name)."""
    joined = b":".join(names)
    return joined.count(b":") == len(names) - 1 and _NAMES.fullmatch(joined) is not None


def _values_valid(values: Sequence[bytes]) -> bool:
    """Every value matches ``_VALUE``: what h11's field-value pattern accepts."""
    joined = b"\x00" + b"\x00".join(values) + b"\x00"
    return (
        joined.count(b"\x00") == len(values) + 1
        and len(joined.translate(None, _NOT_IN_VALUES)) == len(joined)
        and b"\x00 " not in joined
        and b"\x00\t" not in joined
        and b" \x00" not in joined
        and b"\t\x00" not in joined
    )


def _refuse(pattern: re.Pattern[bytes], items: Sequence[bytes], what: str) -> None:
    """Raise for the first item that is not a whole match (none at all: no headers, which
    the framing check refuses)."""
    for item in items:
        if not pattern.fullmatch(item):
            raise RequestError(f"illegal header {what} {item!r}")


def _check_framing(
    method: Method, lowered: list[bytes], values: Sequence[bytes], body: bytes
) -> None:
    """``lowered``: the header names in lower case, in order, beside their ``values``."""
    hosts = lowered.count(b"host")
    if hosts != 1:
        raise RequestError(f"a request needs one Host header, not {hosts}")
    if lowered.count(b"content-length") == 1:  # the common case, without a loop
        lengths = [values[lowered.index(b"content-length")]]
    else:
        lengths = [values[i] for i, name in enumerate(lowered) if name == b"content-length"]
    if not method.carries_body:
        if lengths or body:
            raise RequestError(f"a {method} carries no body and no Content-Length: {lengths}")
    elif lengths != [b"%d" % len(body)]:
        raise RequestError(f"Content-Length must be the body's {len(body)} bytes, once: {lengths}")
    if b"transfer-encoding" in lowered:
        raise RequestError("a request with a known length carries no Transfer-Encoding")
