"""Every corpus line imports to its exact schedule, or is refused with its reason; each
schedule is one Steeple's own schedule parser accepts."""

from __future__ import annotations

import re

import pytest

from appliance.client.crontab.convert import convert_crontab
from appliance.core.addresses import AddressPolicy
from appliance.core.schedule_input import parse_schedule
from tests.client.crontab_corpus import CASES, ZONE, Case, Refusal

KEY = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def test_the_corpus_is_large_and_varied() -> None:
    assert len(CASES) >= 60
    assert len({case.id for case in CASES}) == len(CASES)
    refused = sum(isinstance(case.expected, Refusal) for case in CASES)
    assert 20 <= refused <= len(CASES) - 40


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_corpus_line_imports_as_cron_would_run_it(case: Case) -> None:
    result = convert_crontab(case.crontab, zone=ZONE, system=case.system)
    if isinstance(case.expected, Refusal):
        assert result.moved == ()
        reasons = [refused.reason for refused in result.not_moved]
        assert any(case.expected.reason in reason for reason in reasons), reasons
        return
    assert result.not_moved == ()
    [moved] = result.moved
    schedule = dict(moved.schedule)
    key = schedule.pop("key")
    assert isinstance(key, str) and KEY.fullmatch(key)
    assert schedule == case.expected
    for note in case.notes:
        assert any(note in written for written in moved.notes), moved.notes
    _accepted_by_steeple({"key": key, **schedule})


def _accepted_by_steeple(schedule: dict[str, object]) -> None:
    """Steeple's own parser takes the schedule as it is."""
    parse_schedule(schedule, policy=AddressPolicy())


def test_keys_are_unique_and_follow_the_line_not_its_place() -> None:
    line = "0 * * * * curl -s https://example.com/jobs/tick\n"
    twice = convert_crontab(line + line, zone=ZONE, system=False)
    first, second = (moved.schedule["key"] for moved in twice.moved)
    assert second == f"{first}-2"
    moved_down = convert_crontab("# a note\n\n" + line, zone=ZONE, system=False)
    assert moved_down.moved[0].schedule["key"] == first
    other_zone = convert_crontab(line, zone="UTC", system=False)
    assert other_zone.moved[0].schedule["key"] != first
    assert isinstance(first, str) and first.startswith("example-jobs-tick-")


def test_each_credential_written_out_is_noted_once_and_a_placeholder_not_at_all() -> None:
    crontab = (
        "TOKEN=t\n"
        "0 * * * * curl -H 'X-Token: abc' -b sid=1 --oauth2-bearer tok"
        ' -H "X-Api-Key: $TOKEN" -H "Accept: text/plain" https://example.com/a\n'
        "0 * * * * curl -u admin:s3cret https://example.com/b\n"
    )
    first, second = convert_crontab(crontab, zone=ZONE, system=False).moved
    in_clear = [note for note in first.notes if "credential in clear" in note]
    assert in_clear == [
        f"the {name} header holds a credential in clear: put it in an environment variable"
        " (${NAME}) before the file goes into git"
        for name in ("X-Token", "Cookie", "Authorization")
    ]
    assert [note for note in second.notes if "Authorization header holds" in note] == [
        "the Authorization header holds a password: put it in an environment variable"
        " (${NAME}) before the file goes into git"
    ]
