"""A schedule's headers as tenant JSON: every problem is named at once, the mask's too."""

from __future__ import annotations

import pytest

from appliance.core.addresses import AddressPolicy
from appliance.core.schedule_input import parse_schedule
from appliance.errors import ValidationError


def test_a_refused_header_does_not_hide_a_masked_one_on_a_create() -> None:
    document = {
        "name": "n",
        "cron": "0 * * * *",
        "target_url": "https://hooks.example.com/",
        "payload": {},
        "headers": {"Authorization": "<masked>", "Host": "evil", "X-Team": "ops"},
    }
    with pytest.raises(ValidationError) as refused:
        parse_schedule(document, policy=AddressPolicy())
    assert [e.field for e in refused.value.errors] == ["headers.Host", "headers.Authorization"]
    kept = {**document, "headers": {"Authorization": "<masked>", "Host": "evil"}}
    with pytest.raises(ValidationError) as edited:  # stored: the mask is no problem
        parse_schedule(kept, policy=AddressPolicy(), stored_headers=(("Authorization", "x"),))
    assert [e.field for e in edited.value.errors] == ["headers.Host"]
