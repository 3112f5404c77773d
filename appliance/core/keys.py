"""Tenant API keys: ``stk_`` + 32 random base32 characters, shown once, stored as SHA-256.

A key carries 160 random bits, so a fast hash is enough at rest (no password stretching is
needed for a secret that cannot be guessed); lookups are by hash, compared by the index.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable

API_KEY_PREFIX = "stk_"


def new_api_key(randbytes: Callable[[int], bytes] = os.urandom) -> str:
    return API_KEY_PREFIX + base64.b32encode(randbytes(20)).decode("ascii").lower()


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def display_prefix(key: str) -> str:
    """What lists show of a key: ``stk_`` and its first 4 characters (20 of 160 random bits)."""
    return key[: len(API_KEY_PREFIX) + 4]
