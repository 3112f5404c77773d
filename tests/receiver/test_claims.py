"""The one rule every deduper applies (appliance.receiver.claims.decide): the table in the
module's docstring, row by row."""

from __future__ import annotations

import pytest

from appliance.receiver.claims import DONE_RECORD, Claim, Record, Seen, State, decide


def _held_until(expires_at_s: int) -> Record:
    return Record(state=State.IN_PROGRESS, token="theirs", expires_at_s=expires_at_s)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (None, Claim(key="k", seen=Seen.NEW, token="mine", expires_at_s=130)),
        (_held_until(100), Claim(key="k", seen=Seen.NEW, token="mine", expires_at_s=130)),
        (_held_until(99), Claim(key="k", seen=Seen.NEW, token="mine", expires_at_s=130)),
        (_held_until(101), Claim(key="k", seen=Seen.IN_PROGRESS, expires_at_s=101)),
        (DONE_RECORD, Claim(key="k", seen=Seen.DONE)),
    ],
    ids=["none", "hold ends now", "hold ended", "hold stands", "done"],
)
def test_what_a_delivery_meets(record: Record | None, expected: Claim) -> None:
    assert decide("k", record, now_s=100, hold_s=30, token="mine") == expected
