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

from appliance.core.schedules import Method

_TARGET = re.compile(rb"[\x21-\x7e]+")
_NAME = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")


class RequestError(ValueError):
    """The request cannot be framed (the message names what is wrong)."""


def frame_request(
    method: Method, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
) -> bytes:
    """``METHOD target HTTP/1.1``, the headers as given, a blank line, the body."""
    if not _TARGET.fullmatch(target):
        raise RequestError(f"illegal request target {target!r}")
    parts = [method.value.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if not _NAME.fullmatch(name):
            raise RequestError(f"illegal header name {name!r}")
        if not _VALUE.fullmatch(value):
            raise RequestError(f"illegal header value {value!r}")
        parts += (name, b": ", value, b"\r\n")
    _check_framing(method, headers, body)
    parts += (b"\r\n", body)
    return b"".join(parts)


def _check_framing(method: Method, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    hosts = [value for name, value in headers if name.lower() == b"host"]
    lengths = [value for name, value in headers if name.lower() == b"content-length"]
    if len(hosts) != 1:
        raise RequestError(f"a request needs one Host header, not {len(hosts)}")
    if not method.carries_body:
        if lengths or body:
            raise RequestError(f"a {method} carries no body and no Content-Length: {lengths}")
    elif lengths != [str(len(body)).encode()]:
        raise RequestError(f"Content-Length must be the body's {len(body)} bytes, once: {lengths}")
    if any(name.lower() == b"transfer-encoding" for name, _ in headers):
        raise RequestError("a request with a known length carries no Transfer-Encoding")
