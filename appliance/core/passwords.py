"""Passwords of web UI users: argon2id hashes with RFC 9106's second recommended option
(argon2-cffi's ``RFC_9106_LOW_MEMORY``: m=65536 KiB, t=3, p=4, 16-byte salt, 32-byte tag).

Rules this module guards (docs/ui.md, "Security"):

- Only hashes are stored; a hash carries its own salt and parameters, so stronger
  parameters later still verify old hashes (:func:`needs_rehash` says when to upgrade).
- Verifying an unknown account costs the same as a wrong password (:func:`verify_password`
  with ``None`` checks a dummy hash), so timing does not tell which emails exist.
- A password is 12 to 1024 characters; no other composition rules (NIST SP 800-63B).
"""

from __future__ import annotations

from typing import Final

from argon2 import PasswordHasher, profiles
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from appliance.errors import ValidationError

MIN_PASSWORD_CHARS: Final = 12
MAX_PASSWORD_CHARS: Final = 1024

# argon2id, m=65536 KiB (64 MiB), t=3, p=4: named, not argon2-cffi's defaults, so an
# upgrade that moved the defaults cannot change what new hashes cost unnoticed.
_HASHER: Final = PasswordHasher.from_parameters(profiles.RFC_9106_LOW_MEMORY)
_DUMMY_HASH: Final = _HASHER.hash("not a password of anyone, only spends the same time")


def check_password_rules(password: str) -> None:
    """Raise ValidationError (field ``password``) when the password is too short or long."""
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise ValidationError.single(
            "password",
            f"must be {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"
            " (a passphrase of a few words is fine)",
        )


def hash_password(password: str) -> str:
    """The argon2id hash of a password that passed :func:`check_password_rules`."""
    check_password_rules(password)
    return _HASHER.hash(password)


def verify_password(stored_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches ``stored_hash``; ``None`` (no such user, or no password
    set yet) spends the same time and answers False."""
    try:
        return _HASHER.verify(stored_hash or _DUMMY_HASH, password) and stored_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    return _HASHER.check_needs_rehash(stored_hash)
