"""The delivery contract's byte-exact vectors (tests/vectors/delivery-contract.json)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.ids import (
    CROCKFORD,
    _base32,
    idempotency_key,
    looks_like,
    new_id,
    new_ids,
    run_id,
)
from appliance.core.instants import format_scheduled_for
from appliance.core.signing import SignatureError, sign, verify


def test_idempotency_key_vectors(vectors: dict[str, Any]) -> None:
    for case in vectors["idempotency_keys"]:
        assert (
            idempotency_key(case["schedule_id"], case["scheduled_for"]) == case["idempotency_key"]
        )


def test_signature_vectors(vectors: dict[str, Any]) -> None:
    for case in vectors["signatures"]:
        body = case["body"].encode()
        assert sign(case["secrets"], case["id"], int(case["timestamp"]), body) == case["signature"]


def test_vectors_verify_with_any_listed_secret(vectors: dict[str, Any]) -> None:
    for case in vectors["signatures"]:
        ts = int(case["timestamp"])
        for secret in case["secrets"]:
            verify([secret], case["id"], ts, case["body"].encode(), case["signature"], now_s=ts)


def test_verify_rejects_tampering_and_old_timestamps(vectors: dict[str, Any]) -> None:
    case = vectors["signatures"][1]
    ts = int(case["timestamp"])
    with pytest.raises(SignatureError):
        verify(case["secrets"], case["id"], ts, b"{}", case["signature"], now_s=ts)
    with pytest.raises(SignatureError):
        verify(
            case["secrets"],
            case["id"],
            ts,
            case["body"].encode(),
            case["signature"],
            now_s=ts + 301,
        )


def test_run_id_is_derived_and_shaped() -> None:
    first = run_id("sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB", "2026-08-06T03:00:00Z")
    assert first == run_id("sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB", "2026-08-06T03:00:00Z")
    assert first != run_id("sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB", "2026-08-06T03:01:00Z")
    assert looks_like("run", first)
    # Golden: the id must never change for an occurrence (a restored run keeps its id).
    # Its first 10 characters are the instant, as a ULID's (ADR 0037).
    assert first == "run_01KZAG6VW0CJ5K94P3SQBPP1AJ"
    assert first[4:14] == new_id("sch", 1_785_985_200_000)[4:14]
    assert looks_like("sch", new_id("sch", 1_785_985_200_000))


_RFC4648_TO_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", CROCKFORD.encode())


@given(st.integers(min_value=0, max_value=32**26 - 1))
def test_base32_equals_the_rfc4648_encoding_in_crockford_letters(value: int) -> None:
    """The table encoder against the stdlib's: left-align the 130 bits into 17 bytes,
    base32 them, keep 26 characters, map RFC 4648's alphabet onto Crockford's."""
    aligned = (value << (8 * 17 - 130)).to_bytes(17, "big")
    expected = base64.b32encode(aligned)[:26].translate(_RFC4648_TO_CROCKFORD).decode()
    assert _base32(value, 26) == expected


def test_ulid_time_prefix_sorts_with_the_instant() -> None:
    """A ULID's first 10 characters are its 48-bit millisecond timestamp."""
    early = new_id("evt", 1_785_985_200_000, randbytes=lambda n: bytes(n))
    late = new_id("evt", 1_785_985_200_001, randbytes=lambda n: bytes(n))
    assert early < late and early[4:14] != late[4:14] and early[14:] == "0" * 16


@given(
    st.integers(min_value=0, max_value=253_402_300_799).map(lambda s: s * 1000),
    st.integers(min_value=0, max_value=253_402_300_799).map(lambda s: s * 1000),
)
def test_run_ids_sort_by_occurrence(one: int, other: int) -> None:
    """The runs of one instant are neighbours in every index keyed by run id: the planner
    appends to those indexes (bench/HISTORY.md, "Planner indexes")."""
    if one == other:
        return
    earlier, later = sorted((one, other))
    first = run_id("sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB", format_scheduled_for(earlier))
    assert first < run_id("sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WC", format_scheduled_for(later))


def test_ids_of_one_instant_are_made_as_one_by_one_with_one_draw() -> None:
    drawn: list[int] = []
    pool = bytes(range(256)) * 4

    def randbytes(n: int) -> bytes:
        drawn.append(n)
        return pool[:n]

    ids = new_ids("sch", 1_785_985_200_000, 25, randbytes=randbytes)
    assert drawn == [250]  # one draw for all
    one_by_one = [
        new_id("sch", 1_785_985_200_000, randbytes=lambda n, i=i: pool[10 * i : 10 * i + n])
        for i in range(25)
    ]
    assert ids == one_by_one
    assert all(looks_like("sch", i) for i in ids) and len(set(ids)) == 25
    assert new_ids("evt", 5, 0) == []
    with pytest.raises(ValueError, match="out of range"):
        new_ids("evt", 1 << 48, 1)
