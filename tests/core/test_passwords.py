"""The password hasher's parameters are the ones its comment states (m=65536 KiB, t=3,
p=4, argon2id), read back from a fresh hash."""

from __future__ import annotations

import re

from appliance.core.passwords import hash_password, needs_rehash, verify_password

PASSWORD = "correct horse battery staple"


def test_a_fresh_hash_is_argon2id_with_64_mib_three_passes_and_four_lanes() -> None:
    hashed = hash_password(PASSWORD)
    found = re.fullmatch(r"\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([^$]+)\$([^$]+)", hashed)
    assert found is not None, hashed
    assert (int(found[1]), int(found[2]), int(found[3])) == (65536, 3, 4)
    assert len(found[4]) == 22 and len(found[5]) == 43  # 16-byte salt, 32-byte tag (base64)
    assert verify_password(hashed, PASSWORD) and not needs_rehash(hashed)


def test_a_hash_with_weaker_parameters_still_verifies_and_asks_for_a_rehash() -> None:
    from argon2 import PasswordHasher

    weak = PasswordHasher(time_cost=1, memory_cost=47104, parallelism=1).hash(PASSWORD)
    assert verify_password(weak, PASSWORD) and needs_rehash(weak)
