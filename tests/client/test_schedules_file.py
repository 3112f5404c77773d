"""The schedules file: what ``load`` reads, the lines it names, and ``dump``'s round trip."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.client.schedules_file import FileRefused, Placeholder, dump, load
from appliance.core.addresses import AddressPolicy
from appliance.core.schedule_input import parse_schedule
from tests.conftest import ROOT

EXAMPLE = textwrap.dedent(
    """\
    # the team's schedules
    [[schedule]]
    key = "nightly-rollup"
    name = "Nightly rollup"
    cron = "0 3 * * *"
    timezone = "Europe/Berlin"
    target_url = "https://example.com/rollup"
    method = "GET"
    headers = { Authorization = "Bearer ${ROLLUP_TOKEN}" }

    [[schedule]]
    key = "hourly"
    name = "Hourly"
    cron = "0 * * * *"
    target_url = "https://example.com/hourly?token=${HOURLY}"
    payload = { report = "hourly", sizes = [1, 2.5] }
    catchup.policy = "skip"

    [schedule.retry]
    max_attempts = 3
    """
)


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(FileRefused) as caught:
        load(text, env=env or {})
    return [p.render("schedules.toml") for p in caught.value.problems]


def test_the_example_loads_with_its_variables_substituted() -> None:
    first, second = load(EXAMPLE, env={"ROLLUP_TOKEN": "s3cret", "HOURLY": "t"})
    assert first.key == "nightly-rollup"
    assert first.document == {
        "key": "nightly-rollup",
        "name": "Nightly rollup",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "target_url": "https://example.com/rollup",
        "method": "GET",
        "headers": {"Authorization": "Bearer s3cret"},
    }
    assert second.document["target_url"] == "https://example.com/hourly?token=t"
    assert second.document["catchup"] == {"policy": "skip"}
    assert second.document["retry"] == {"max_attempts": 3}
    assert second.document["payload"] == {"report": "hourly", "sizes": [1, 2.5]}


def test_lines_name_the_header_each_field_and_nested_fields() -> None:
    first, second = load(EXAMPLE, env={"ROLLUP_TOKEN": "s", "HOURLY": "t"})
    assert first.line == 2
    assert first.line_of("cron") == 5
    assert first.line_of("headers.Authorization") == 9  # an inline table's line
    assert first.line_of("jitter_seconds") == 2  # not in the file: the header's
    assert second.line_of("catchup.policy") == 17
    assert second.line_of("retry.max_attempts") == 20
    assert second.line_of("retry.backoff") == 19  # the sub-table's header


def test_every_unset_variable_is_named_with_its_line() -> None:
    assert problems(EXAMPLE) == [
        "schedules.toml:9: headers.Authorization: ${ROLLUP_TOKEN} is not set in the environment",
        "schedules.toml:15: target_url: ${HOURLY} is not set in the environment",
    ]


def test_a_doubled_dollar_is_a_literal_and_a_malformed_variable_is_refused() -> None:
    text = '[[schedule]]\nkey = "a"\nheaders = { X = "$${HOME} ${1x}" }\n'
    assert problems(text) == [
        "schedules.toml:3: headers.X: '${1x}' is not a variable: write ${NAME},"
        " or $${ for a literal ${"
    ]
    (item,) = load('[[schedule]]\nkey = "a"\nheaders = { X = "$${HOME}" }\n', env={})
    assert item.document["headers"] == {"X": "${HOME}"}


def test_keys_are_required_and_unique() -> None:
    text = '[[schedule]]\nname = "x"\n\n[[schedule]]\nkey = "a"\n\n[[schedule]]\nkey = "a"\n'
    assert problems(text) == [
        'schedules.toml:1: key: every schedule needs a key: a stable name such as "nightly-rollup"',
        "schedules.toml:8: key: 'a' is already the key of line 5",
    ]


def test_problems_are_listed_in_file_order_whatever_found_them() -> None:
    text = '[[schedule]]\nkey = "a"\n\n[[schedule]]\nkey = "a"\n\n[[schedule]]\nname = "x"\n'
    assert problems(text) == [  # a repeated key (found last) before a later missing one
        "schedules.toml:5: key: 'a' is already the key of line 2",
        'schedules.toml:7: key: every schedule needs a key: a stable name such as "nightly-rollup"',
    ]


def test_a_syntax_error_names_its_line() -> None:
    assert problems('[[schedule]]\nkey = "a"\ncron = \n') == ["schedules.toml:3: Invalid value"]


def test_other_top_level_tables_are_refused() -> None:
    assert problems('[schedules]\nkey = "a"\n') == [
        "schedules.toml: 'schedules' is not a table of a schedules file;"
        " write each schedule as a [[schedule]] table"
    ]


def test_an_offset_datetime_is_an_instant_and_a_local_one_is_refused() -> None:
    (item,) = load('[[schedule]]\nkey = "a"\nat = 2026-01-01T03:00:00Z\n', env={})
    assert item.document["at"] == "2026-01-01T03:00:00Z"
    assert problems('[[schedule]]\nkey = "a"\nat = 2026-01-01T03:00:00\n') == [
        "schedules.toml:3: at: is a date or time without an offset;"
        ' write an instant such as "2026-01-01T03:00:00Z"'
    ]


def test_a_multiline_string_hides_no_field_lines() -> None:
    text = '[[schedule]]\nkey = "a"\nbody = """\ncron = 1\n"""\ncron = "* * * * *"\n'
    (item,) = load(text, env={})
    assert item.line_of("cron") == 6


def test_dump_writes_the_example_shape() -> None:
    text = dump(
        [
            {
                "name": "Nightly rollup",
                "key": "nightly-rollup",
                "cron": "0 3 * * *",
                "at": None,
                "timezone": "Europe/Berlin",
                "target_url": "https://example.com/rollup",
                "headers": {"Authorization": Placeholder("Bearer ${ROLLUP_TOKEN}")},
                "catchup": {"policy": "all", "window_seconds": 3600},
            }
        ]
    )
    assert text == textwrap.dedent(
        """\
        [[schedule]]
        key = "nightly-rollup"
        name = "Nightly rollup"
        cron = "0 3 * * *"
        timezone = "Europe/Berlin"
        target_url = "https://example.com/rollup"
        headers = { Authorization = "Bearer ${ROLLUP_TOKEN}" }
        catchup = { policy = "all", window_seconds = 3600 }
        """
    )


def test_a_payload_with_a_null_is_written_as_json_text() -> None:
    text = dump([{"key": "a", "payload": {"x": None, "y": [1, None]}}])
    assert 'payload_json = "{\\"x\\":null,\\"y\\":[1,null]}"' in text
    (item,) = load(text, env={})
    assert item.document["payload"] == {"x": None, "y": [1, None]}


# Round trip --------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_scalars = st.one_of(
    _text,
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
)
_json = st.recursive(
    st.one_of(st.none(), _scalars),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_items = st.fixed_dictionaries(
    {
        "key": st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True),
        "name": _text,
        "target_url": _text,
        "headers": st.dictionaries(_text, _text, max_size=3),
        "payload": _json,
        "retry": st.dictionaries(
            _text, st.none() | _scalars | st.dictionaries(_text, st.none() | _scalars)
        ),
        "catchup": st.none() | st.dictionaries(_text, _scalars, max_size=2),
    },
    optional={"paused": st.booleans(), "jitter_seconds": st.integers(0, 3600)},
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_items, max_size=4, unique_by=lambda item: item["key"]))
def test_load_reads_back_what_dump_wrote(items: list[dict[str, object]]) -> None:
    loaded = load(dump(items), env={})
    expected = [
        {k: v if k == "payload" else _without_nulls(v) for k, v in item.items() if v is not None}
        for item in items
    ]
    assert [item.document for item in loaded] == expected
    assert [item.key for item in loaded] == [item["key"] for item in items]


def _without_nulls(value: object) -> object:
    """Only a payload keeps the nulls inside it (as JSON text): elsewhere null is absent."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@settings(deadline=None)
@given(st.lists(_items, min_size=1, max_size=3, unique_by=lambda item: item["key"]))
def test_every_item_and_field_line_points_into_its_own_table(
    items: list[dict[str, object]],
) -> None:
    text = dump(items)
    lines = text.splitlines()
    for item in load(text, env={}):
        assert item.line is not None and lines[item.line - 1] == "[[schedule]]"
        assert lines[item.line_of("key") - 1].startswith("key = ")  # type: ignore[operator]


def test_pairs_of_headers_are_substituted_and_infinity_is_refused() -> None:
    text = '[[schedule]]\nkey = "a"\nheaders = [["X-Token", "${T}"]]\n'
    (item,) = load(text, env={"T": "t0k"})
    assert item.document["headers"] == [["X-Token", "t0k"]]
    assert problems('[[schedule]]\nkey = "a"\npayload = { x = inf }\n') == [
        "schedules.toml:3: payload.x: is inf, which JSON has no number for"
    ]


def test_the_guides_example_file_reads_as_valid_schedules() -> None:
    guide = (ROOT / "docs" / "schedules-in-git.md").read_text(encoding="utf-8")
    example = guide.split("```toml\n", 1)[1].split("```", 1)[0]
    items = load(example, env={"ROLLUP_TOKEN": "t"})
    specs = [parse_schedule(item.document, policy=AddressPolicy()) for item in items]
    assert [spec.key for spec in specs] == ["nightly-rollup", "hourly-report"]
    assert specs[0].method.value == "GET" and specs[0].body == b""
