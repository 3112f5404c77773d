"""Which of a tenant's request headers carry a credential, and how they are shown masked
(docs/receiver.md, "What each request carries").

Rules this module guards:

- One rule names a secret-bearing header (:func:`looks_secret`): ``Authorization``,
  ``Proxy-Authorization``, ``Cookie``, or a name containing ``token``, ``key``,
  ``secret``, ``password``, ``session`` or ``credential``, in any letter case.
- A masked value is :data:`MASK`, whatever the value was (its length is not shown). The
  ``curl`` command, a read key's schedule documents and every page of the web UI show
  these headers masked; only a ``write`` key reads them back.
- Sending a document back with :data:`MASK` as the value of a secret-bearing header the
  schedule already has keeps the stored value (:func:`keep_masked`): an edit made from a
  masked view never replaces a credential with the mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

MASK: Final = "<masked>"
_SECRET_NAMES: Final = frozenset({"authorization", "proxy-authorization", "cookie"})
_SECRET_PARTS: Final = ("token", "key", "secret", "password", "session", "credential")

Headers = tuple[tuple[str, str], ...]


def looks_secret(name: str) -> bool:
    """Whether a header named ``name`` probably carries a credential."""
    lowered = name.lower()
    return lowered in _SECRET_NAMES or any(part in lowered for part in _SECRET_PARTS)


def masked_headers(headers: Sequence[tuple[str, str]]) -> Headers:
    """``headers`` with the value of each secret-bearing one replaced by :data:`MASK`."""
    return tuple((name, MASK if looks_secret(name) else value) for name, value in headers)


def keep_masked(sent: Sequence[tuple[str, str]], stored: Sequence[tuple[str, str]]) -> Headers:
    """``sent``, where a secret-bearing header whose value is :data:`MASK` and which
    ``stored`` has (by name, any case) takes its stored value back."""
    before = {name.lower(): value for name, value in stored}
    return tuple(
        (name, before[name.lower()])
        if value == MASK and looks_secret(name) and name.lower() in before
        else (name, value)
        for name, value in sent
    )
