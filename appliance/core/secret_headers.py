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
  masked view never replaces a credential with the mask. The mask as the value of one it
  does not have (a create, a new header) is refused: it is never stored as a credential.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from appliance.errors import FieldError, ValidationError

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
    """``sent``, where a secret-bearing header whose value is :data:`MASK` takes the value
    ``stored`` has under its name (any case). Raises ValidationError (``headers.<Name>``)
    for such a header that ``stored`` lacks: the mask is never stored as a credential."""
    before = {name.lower(): value for name, value in stored}
    kept: list[tuple[str, str]] = []
    errors: list[FieldError] = []
    for name, value in sent:
        if value == MASK and looks_secret(name):
            if name.lower() not in before:
                errors.append(FieldError(field=f"headers.{name}", message=_NO_MASK))
                continue
            value = before[name.lower()]
        kept.append((name, value))
    if errors:
        raise ValidationError(errors)
    return tuple(kept)


_NO_MASK: Final = (
    f"{MASK} is how a read key is shown this header, not a value: send the credential itself"
)
