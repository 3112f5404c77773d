"""The one reader of typed JSON and whole numbers (``core.json_text``): what it refuses,
what it keeps exactly, and that nothing but JsonTextError ever comes out of it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.json_text import (
    MAX_DEPTH,
    MAX_INTEGER_DIGITS,
    JsonTextError,
    decode_json_bytes,
    parse_json_text,
    whole_number,
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{", "Expecting property name"),
        ("", "Expecting value (line 1, column 1)"),
        ("NaN", "NaN is not JSON"),
        ("[-Infinity]", "-Infinity is not JSON"),
        ("1e400", "is too large"),
        ("9" * (MAX_INTEGER_DIGITS + 1), f"more than {MAX_INTEGER_DIGITS} digits"),
        ("-" + "9" * (MAX_INTEGER_DIGITS + 1), f"more than {MAX_INTEGER_DIGITS} digits"),
        ("[" * 100_000, "nests too deeply"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH} levels"),
        ('{"s": "\\ud800"}', "unpaired UTF-16 surrogate"),
        ('["\\udfff x"]', "unpaired UTF-16 surrogate"),
    ],
    ids=lambda v: v[:20],
)
def test_refused_text_says_why(text: str, said: str) -> None:
    with pytest.raises(JsonTextError) as caught:
        parse_json_text(text)
    assert said in caught.value.message


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(JsonTextError, match="not UTF-8"):
        decode_json_bytes(b"\xff\xfe{}")


@pytest.mark.parametrize(
    "text",
    [
        "9" * MAX_INTEGER_DIGITS,
        "9999999999999999999",  # beyond int64: a payload's integers are kept exactly
        "-9223372036854775809",
        "[" * MAX_DEPTH + "]" * MAX_DEPTH,
        '"\\ud83d\\ude00"',  # a surrogate pair is one character
        '"\\\\ud800"',  # an escaped backslash, then text
        "1.5e300",
    ],
    ids=lambda v: v[:20],
)
def test_valid_json_is_read_exactly(text: str) -> None:
    assert parse_json_text(text) == json.loads(text)


@given(st.text(max_size=60))
def test_any_text_is_a_value_or_a_json_text_error(text: str) -> None:
    try:
        parse_json_text(text)
    except JsonTextError as error:
        assert error.message


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        (" 42 ", 42),
        ("+7", 7),
        ("-1", -1),
        ("9999999999999999999", 9999999999999999999),
        ("9" * MAX_INTEGER_DIGITS, int("9" * MAX_INTEGER_DIGITS)),
    ],
    ids=lambda v: str(v)[:20],
)
def test_whole_numbers_are_read(text: str, value: int) -> None:
    assert whole_number(text) == value


@pytest.mark.parametrize(
    "text",
    ["", " ", "1.5", "1e3", "²", "١٢", "1_000", "0x10", "--1", "+", "9" * (MAX_INTEGER_DIGITS + 1)],
)
def test_anything_else_is_no_whole_number(text: str) -> None:
    assert whole_number(text) is None
