"""A delivery request as a ready ``curl`` command line (docs/receiver.md, "Resend, curl and
the dedupe test").

Rules this module guards:

- The command sends what Steeple sends: method (``--request``, curl's ``-X``), URL, every
  header in Steeple's order and the exact body bytes (``--data-raw``: no ``@file``
  reading, no newline stripping). curl's own ``Expect: 100-continue`` is switched off; an
  empty header value is written ``Name;`` (curl drops ``Name:``). A GET or DELETE has no
  ``--data-raw`` and no ``Expect:`` (curl then sends no body, no ``Content-Type`` and no
  ``Content-Length``, as Steeple does). ``--max-time`` is the schedule's timeout.
- Every argument is shell-quoted (:func:`shlex.join`), so the line pastes into a POSIX
  shell as is and :func:`shlex.split` gives back exactly :attr:`CurlCommand.argv`.
- **Secrets are masked**, except the signature: the value of a header the tenant set whose
  name looks like a credential (:func:`looks_secret`, the one rule of
  :mod:`appliance.core.secret_headers`) becomes :data:`MASK`. Steeple's own headers are
  never masked: the signature is what the command is for, and the key is no secret.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from dataclasses import dataclass

from appliance.core.delivery import DeliveryRequest
from appliance.core.secret_headers import MASK, looks_secret

__all__ = ["MASK", "BodyNotShellSafe", "CurlCommand", "curl_command", "looks_secret"]


class BodyNotShellSafe(ValueError):
    """The body holds a NUL byte or is not UTF-8: no command line can carry it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CurlCommand:
    argv: tuple[str, ...]
    masked: tuple[str, ...]  # names of the headers whose values were masked

    @property
    def line(self) -> str:
        """The command as one shell-quoted line."""
        return shlex.join(self.argv)


def curl_command(
    request: DeliveryRequest, *, tenant_headers: Collection[str], timeout_seconds: int
) -> CurlCommand:
    """``request`` as a curl command; values of ``tenant_headers`` (names, any case) that
    :func:`looks_secret` are masked. Raises :class:`BodyNotShellSafe`."""
    try:
        body = request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyNotShellSafe("the body is not UTF-8 text") from None
    if "\x00" in body:
        raise BodyNotShellSafe("the body holds a NUL byte")
    tenant = {name.lower() for name in tenant_headers}
    method = request.method.value
    argv = ["curl", "--request", method, "--url", request.url, "--max-time", str(timeout_seconds)]
    masked = []
    for name, value in request.headers:
        if name.lower() in tenant and looks_secret(name):
            value = MASK
            masked.append(name)
        argv += ["--header", f"{name}: {value}" if value else f"{name};"]
    if request.method.carries_body:
        argv += ["--header", "Expect:", "--data-raw", body]
    return CurlCommand(argv=tuple(argv), masked=tuple(masked))
