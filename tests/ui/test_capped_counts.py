"""A count the pages cap (finished runs, at ``COUNT_CAP``) shows past the cap as "N+",
never as a number it did not count."""

from __future__ import annotations

from appliance.store.figures.tenants import COUNT_CAP
from appliance.ui.render import capped


def test_counts_past_the_cap_show_as_more() -> None:
    assert capped(COUNT_CAP) == str(COUNT_CAP)
    assert capped(COUNT_CAP + 1) == f"{COUNT_CAP}+"
