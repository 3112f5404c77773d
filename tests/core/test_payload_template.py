"""Payload templates (core.payload_template) and the previous occurrence they name
(core.timing.previous_occurrence)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.instants import parse_instant
from appliance.core.payload_template import (
    NAMES,
    TemplateValues,
    render,
    run_values,
    template_problems,
)
from appliance.core.request_input import compact
from appliance.core.timing import occurrences, previous_occurrence

T = parse_instant("2026-08-06T03:00:00Z")
DAY = 86_400_000
VALUES = TemplateValues(
    scheduled_for=T, previous_scheduled_for=T - DAY, schedule_id="sch_1", run_id="run_1"
)
FIRST = TemplateValues(
    scheduled_for=T, previous_scheduled_for=None, schedule_id="sch_1", run_id="run_1"
)


def rendered(template: object, values: TemplateValues = VALUES) -> object:
    return json.loads(render(compact(template).encode(), values))


def test_every_name_is_substituted() -> None:
    template = {name: f"{{{{{name}}}}}" for name in NAMES}
    assert rendered(template) == {
        "scheduled_for": "2026-08-06T03:00:00Z",
        "previous_scheduled_for": "2026-08-05T03:00:00Z",
        "window_start": "2026-08-05T03:00:00Z",
        "window_end": "2026-08-06T03:00:00Z",
        "schedule_id": "sch_1",
        "run_id": "run_1",
    }


def test_a_first_occurrence_has_null_alone_and_nothing_inside_text() -> None:
    template = {"since": "{{window_start}}", "text": "from {{window_start}} to {{window_end}}"}
    assert rendered(template, FIRST) == {
        "since": None,
        "text": "from  to 2026-08-06T03:00:00Z",
    }


def test_strings_at_any_depth_but_never_keys_or_other_values() -> None:
    template = {
        "a": [1, True, None, {"b": ["x {{run_id}} y", 2.5]}],
        "{not a placeholder": "{{schedule_id}}{{run_id}}",
    }
    assert rendered(template) == {
        "a": [1, True, None, {"b": ["x run_1 y", 2.5]}],
        "{not a placeholder": "sch_1run_1",
    }


@pytest.mark.parametrize(
    ("template", "field", "words"),
    [
        ({"a": "{{scheduled}}"}, "payload_template.a", "{{scheduled}}"),
        ({"a": ["ok", "{{ run_id }}"]}, "payload_template.a[1]", "{{ run_id }}"),
        ("{{now}}", "payload_template", "{{now}}"),
        ({"{{run_id}}": 1}, "payload_template.{{run_id}}", "object key"),
    ],
)
def test_unknown_names_and_placeholder_keys_are_refused(
    template: object, field: str, words: str
) -> None:
    problems = dict(template_problems(template))
    assert field in problems
    assert words in problems[field]
    assert "{{scheduled_for}}" in problems[field] or "key" in problems[field]


def test_a_template_without_placeholders_is_valid_and_unchanged() -> None:
    assert template_problems({"a": "{b}", "c": "{{", "d": "}}"}) == []
    assert rendered({"a": "{b}", "c": "{{", "d": "}}"}) == {"a": "{b}", "c": "{{", "d": "}}"}


def test_run_values_derive_the_run_id_from_the_occurrence() -> None:
    values = run_values(schedule_id="sch_X", scheduled_for=T, previous=None)
    assert values.run_id.startswith("run_")
    assert values == run_values(schedule_id="sch_X", scheduled_for=T, previous=None)
    assert values.run_id != run_values(schedule_id="sch_X", scheduled_for=T + 1000, previous=None)


# --- properties --------------------------------------------------------------------------

_placeholders = st.sampled_from([f"{{{{{name}}}}}" for name in NAMES])
# Valid Unicode only: the API refuses unpaired surrogates before a template is stored.
_chars = st.characters(exclude_characters="{}", exclude_categories=("Cs",))
_texts = st.lists(
    st.one_of(_placeholders, st.text(alphabet=_chars)),
    max_size=5,
).map("".join)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _texts),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(alphabet=_chars), inner, max_size=4),
    ),
    max_leaves=12,
)
_ids = st.text(  # quotes, backslashes, control characters…
    alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40
)
_values = st.builds(
    TemplateValues,
    scheduled_for=st.integers(1, 10**10).map(lambda s: s * 1000),
    previous_scheduled_for=st.one_of(st.none(), st.integers(0, 10**10).map(lambda s: s * 1000)),
    schedule_id=_ids,
    run_id=_ids,
)


@given(template=_json, values=_values)
def test_rendering_is_valid_json_and_the_same_bytes_every_time(
    template: object, values: TemplateValues
) -> None:
    assert template_problems(template) == []
    data = compact(template).encode()
    first = render(data, values)
    assert render(data, values) == first  # every attempt of a run: the same bytes
    parsed = json.loads(first)  # never invalid JSON, whatever the values hold
    assert compact(parsed).encode() == first


@given(name=st.sampled_from(NAMES), values=_values, prefix=_texts, suffix=_texts)
def test_a_placeholder_becomes_exactly_its_value(
    name: str, values: TemplateValues, prefix: str, suffix: str
) -> None:
    value = values.text(name)
    alone = json.loads(render(compact([f"{{{{{name}}}}}"]).encode(), values))
    assert alone == [value]
    if not (prefix or suffix):
        return
    inside = json.loads(render(compact([f"{prefix}{{{{{name}}}}}{suffix}"]).encode(), values))
    expected = json.loads(render(compact([prefix]).encode(), values))[0] or ""
    expected_suffix = json.loads(render(compact([suffix]).encode(), values))[0] or ""
    assert inside == [f"{expected}{value or ''}{expected_suffix}"]


def timing(**fields: object) -> SimpleNamespace:
    base: dict[str, object] = {
        "cron": "",
        "timezone": "UTC",
        "at": None,
        "every_seconds": None,
        "start_at": None,
        "end_at": None,
        "dst_gap": None,
        "dst_fold": None,
    }
    return SimpleNamespace(**{**base, **fields})


_timings = st.one_of(
    st.sampled_from(["0 3 * * *", "*/7 * * * *", "30 2 * * 0", "* 3 * * *", "0 12 1,15 * *"]).map(
        lambda cron: timing(cron=cron, timezone="Europe/Berlin")
    ),
    st.builds(
        lambda every, anchor: timing(every_seconds=every, start_at=T + anchor * 1000),
        st.integers(600, 10 * 86_400),
        st.integers(-30 * 86_400, 30 * 86_400),
    ),
    st.integers(-86_400, 86_400).map(lambda s: timing(at=T + s * 1000)),
)


@settings(deadline=None, max_examples=50)
@given(t=_timings, offset_s=st.integers(-40 * 86_400, 40 * 86_400))
def test_the_previous_occurrence_is_the_last_one_before(t: SimpleNamespace, offset_s: int) -> None:
    before = T + offset_s * 1000
    brute = None
    for ms in occurrences(t, after_ms=before - 45 * DAY):  # every gap here is shorter
        if ms >= before:
            break
        brute = ms
    assert previous_occurrence(t, before) == brute


def test_a_rare_cron_is_found_years_back() -> None:
    leap = timing(cron="0 0 29 2 *")
    assert previous_occurrence(leap, T) == parse_instant("2024-02-29T00:00:00Z")


def test_the_first_occurrence_after_start_at_has_no_previous() -> None:
    bounded = timing(cron="0 3 * * *", start_at=T - 3600_000)
    assert previous_occurrence(bounded, T) is None
    assert previous_occurrence(bounded, T + DAY) == T
    assert previous_occurrence(timing(cron="0 3 * * *"), T) == T - DAY
