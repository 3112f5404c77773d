"""The leader row (store/leadership.py), on both stores: taken when free or lapsed,
renewed by its holder with its term's start kept, resigned at once."""

from __future__ import annotations

from appliance.store.infra.backend import Store
from appliance.store.leadership import lead, resign
from tests.store.conftest import T0

TERM = 6_000


def test_the_first_replica_leads_and_another_waits_for_the_term_to_lapse(db: Store) -> None:
    first = db.write_now(lead, incarnation_id="inc_a", now=T0, term_ms=TERM)
    assert first.held_by("inc_a", now=T0) and first.elected_at == T0
    other = db.write_now(lead, incarnation_id="inc_b", now=T0 + TERM - 1, term_ms=TERM)
    assert other == first  # still inc_a's: inc_b only learns who leads
    assert not other.held_by("inc_b", now=T0 + TERM - 1)
    taken = db.write_now(lead, incarnation_id="inc_b", now=T0 + TERM, term_ms=TERM)
    assert taken.held_by("inc_b", now=T0 + TERM) and taken.elected_at == T0 + TERM
    assert not taken.held_by("inc_a", now=T0 + TERM)


def test_renewals_extend_the_term_and_keep_its_start(db: Store) -> None:
    db.write_now(lead, incarnation_id="inc_a", now=T0, term_ms=TERM)
    renewed = db.write_now(lead, incarnation_id="inc_a", now=T0 + 2_000, term_ms=TERM)
    assert (renewed.elected_at, renewed.expires_at) == (T0, T0 + 2_000 + TERM)
    assert not db.write_now(lead, incarnation_id="inc_b", now=T0 + TERM + 1, term_ms=TERM).held_by(
        "inc_b", now=T0 + TERM + 1
    )


def test_resigning_frees_the_lead_at_once_and_only_its_holder_can(db: Store) -> None:
    db.write_now(lead, incarnation_id="inc_a", now=T0, term_ms=TERM)
    assert not db.write_now(resign, incarnation_id="inc_b")
    assert db.write_now(resign, incarnation_id="inc_a")
    after = db.write_now(lead, incarnation_id="inc_b", now=T0 + 1, term_ms=TERM)
    assert after.held_by("inc_b", now=T0 + 1) and after.elected_at == T0 + 1
