"""A schedule's ``retry`` object: reading it, its 422s, its document and stored forms."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.json_fields import FieldReader
from appliance.core.retry import DEFAULT_DELAYS_S, ExponentialBackoff, RetryPolicy
from appliance.core.retry_input import (
    merge_retry,
    read_retry,
    retry_document,
    stored_policy,
    stored_retry,
)


def read(obj: dict[str, Any]) -> tuple[RetryPolicy, dict[str, str]]:
    fields = FieldReader({"retry": obj}).nested("retry")
    policy = read_retry(fields)
    return policy, {e.field: e.message for e in fields.errors}


def test_nothing_given_is_adr_0032s_default() -> None:
    policy, errors = read({})
    assert errors == {}
    assert policy == RetryPolicy()
    assert retry_document(policy) == {
        "max_attempts": 8,
        "backoff": "default",
        "max_age_seconds": 604_800,
    }
    assert stored_retry(policy) is None


@pytest.mark.parametrize(
    ("given", "backoff"),
    [
        ("default", DEFAULT_DELAYS_S),
        ([1, 1], (1, 1)),
        ([10.0, 60], (10, 60)),
        (
            {"initial": 5, "factor": 2, "max": 600},
            ExponentialBackoff(initial_s=5, factor=2.0, max_s=600),
        ),
    ],
)
def test_every_backoff_form_is_read_and_echoed(given: object, backoff: object) -> None:
    policy, errors = read({"backoff": given, "max_attempts": 3, "max_age_seconds": 3600})
    assert errors == {}
    assert (policy.backoff, policy.max_attempts, policy.window_ms) == (backoff, 3, 3_600_000)
    echoed = retry_document(policy)["backoff"]
    assert read({"backoff": echoed})[0].backoff == backoff


@pytest.mark.parametrize(
    ("obj", "field", "words"),
    [
        ({"backoff": [5, 60, 0]}, "retry.backoff[2]", "from 1 to 86400"),
        ({"backoff": [5, "x"]}, "retry.backoff[1]", "whole number"),
        ({"backoff": [5, True]}, "retry.backoff[1]", "whole number"),
        ({"backoff": [5, 86_401]}, "retry.backoff[1]", "86400"),
        ({"backoff": []}, "retry.backoff", "1 to 14"),
        ({"backoff": [1] * 15}, "retry.backoff", "1 to 14"),
        ({"backoff": "fast"}, "retry.backoff", '"default"'),
        ({"backoff": {"initial": 5, "factor": 0.5, "max": 60}}, "retry.backoff.factor", "1 to 10"),
        ({"backoff": {"initial": 5, "factor": 2}}, "retry.backoff.max", "required"),
        ({"backoff": {"initial": 90, "factor": 2, "max": 60}}, "retry.backoff.max", "initial"),
        ({"backoff": {"initial": 5, "factor": 2, "max": 9, "x": 1}}, "retry.backoff.x", "known"),
        ({"max_attempts": 16}, "retry.max_attempts", "1 to 15"),
        ({"max_age_seconds": 0}, "retry.max_age_seconds", "1 to 604800"),
        ({"max_age_seconds": 604_801}, "retry.max_age_seconds", "604800"),
        ({"retry_on_status": [503, 99]}, "retry.retry_on_status[1]", "100 to 599"),
        ({"retry_on_status": [600]}, "retry.retry_on_status[0]", "100 to 599"),
        ({"retry_on_status": [204]}, "retry.retry_on_status[0]", "success"),
        ({"retry_on_status": [410]}, "retry.retry_on_status[0]", "410"),
        ({"non_retryable_status": [200]}, "retry.non_retryable_status[0]", "success"),
        ({"non_retryable_status": []}, "retry.non_retryable_status", "list of 1 to 100"),
        ({"non_retryable_status": 400}, "retry.non_retryable_status", "list"),
        (
            {"retry_on_status": [503], "non_retryable_status": [400]},
            "retry.non_retryable_status",
            "keep one",
        ),
        ({"max_attempt": 3}, "retry.max_attempt", "not a known field"),
    ],
)
def test_bad_input_names_the_exact_place(obj: dict[str, Any], field: str, words: str) -> None:
    _, errors = read(obj)
    assert field in errors, errors
    assert words in errors[field]


def test_status_lists_are_echoed_sorted_without_duplicates() -> None:
    policy, errors = read({"non_retryable_status": [422, 400, 422]})
    assert errors == {}
    assert retry_document(policy)["non_retryable_status"] == [400, 422]
    assert "retry_on_status" not in retry_document(policy)


def test_a_patch_giving_one_status_list_drops_the_other() -> None:
    stored = {"max_attempts": 3, "retry_on_status": [503]}
    merged = merge_retry(stored, {"non_retryable_status": [400]})
    assert merged == {"max_attempts": 3, "non_retryable_status": [400]}
    assert merge_retry(stored, {"backoff": [1], "max_attempts": None}) == {
        "retry_on_status": [503],
        "backoff": [1],
    }


_documents = st.fixed_dictionaries(
    {},
    optional={
        "max_attempts": st.integers(1, 15),
        "backoff": st.one_of(
            st.just("default"),
            st.lists(st.integers(1, 86_400), min_size=1, max_size=14),
            st.builds(
                lambda i, f, e: {"initial": i, "factor": f, "max": i + e},
                st.integers(1, 1000),
                st.floats(1, 10),
                st.integers(0, 1000),
            ),
        ),
        "max_age_seconds": st.integers(1, 604_800),
        "non_retryable_status": st.lists(st.integers(300, 599), min_size=1, max_size=10),
    },
)


@given(document=_documents)
def test_the_stored_form_reads_back_as_the_same_policy(document: dict[str, Any]) -> None:
    policy, errors = read(document)
    assert errors == {}
    assert stored_policy(policy.max_attempts, stored_retry(policy)) == policy
    assert read(retry_document(policy))[0] == policy
