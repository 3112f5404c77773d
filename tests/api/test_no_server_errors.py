"""No input a tenant can send makes the API answer 500: Hypothesis drives the real app
(its test client, a real SQLite file) with schedule bodies, merge patches, preview bodies
and list query parameters, and every answer must be a success or a problem below 500.

Named regressions first: each once answered 500 with a traceback in the log.
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Api, Reply, schedule_json


def cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode("ascii").rstrip("=")


@pytest.mark.parametrize(
    "position",
    ["9223372036854775808", "99999999999999999999999", "0" * 40 + "1", "-1", "1e3", ""],
)
async def test_a_runs_cursor_beyond_sqlite_integers_is_a_422_naming_the_cursor(
    api: Api, position: str
) -> None:
    schedule = await api.create()
    reply = await api.call(
        "GET", f"/v1/schedules/{schedule['id']}/runs", query={"cursor": cursor(f"run:{position}")}
    )
    assert reply.status == 422, reply.body
    assert reply.fields == ["cursor"]


async def test_the_largest_runs_cursor_sqlite_holds_is_a_position(api: Api) -> None:
    schedule = await api.create()
    query = {"cursor": cursor("run:9223372036854775807")}
    reply = await api.call("GET", f"/v1/schedules/{schedule['id']}/runs", query=query)
    assert reply.status == 200
    assert reply.body == {"items": [], "next_cursor": None}


# --- generated input ------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63, 2**63 - 1, -(2**63) - 1, 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    )


JSON = st.recursive(SCALARS, _nested, max_leaves=8)
VALID_CRON = st.sampled_from(
    ["0 0 */2 * 1", "0 0 0 15 * */3", "@weekly", "* * * * * *", "0 0 29 2 */7", "30 2 * * *"]
)
CRON_TEXT = st.one_of(
    VALID_CRON,
    st.text(alphabet="0123456789*/,-@ LW#?HJanMonFRI", max_size=40),
    st.sampled_from(["0 0 31 2 *", "1," * 150 + "1 * * * *"]),
)
INSTANT_TEXT = st.one_of(
    st.text(max_size=30),
    st.builds(
        "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}{}".format,
        st.sampled_from([1, 2, 999, 1000, 1969, 1970, 2026, 9998, 9999]),
        st.integers(1, 12),
        st.integers(1, 28),
        st.integers(0, 23),
        st.integers(0, 59),
        st.integers(0, 59),
        st.sampled_from(["Z", "+14:00", "-23:59", "+23:59", "", "+00:00"]),
    ),
    st.builds(  # the last minutes of a year, where an offset crosses into the next
        "{:04d}-12-31T23:{:02d}:{:02d}{}".format,
        st.sampled_from([1969, 9998, 9999]),
        st.integers(0, 59),
        st.integers(0, 59),
        st.sampled_from(["Z", "+14:00", "-23:59", "+23:59"]),
    ),
)
ZONES = st.one_of(
    st.sampled_from(["UTC", "Pacific/Kiritimati", "Etc/GMT+12", "America/New_York", "Nowhere"]),
    st.text(max_size=70),
)


def field_values(key: str) -> st.SearchStrategy[Any]:
    special: dict[str, st.SearchStrategy[Any]] = {
        "cron": CRON_TEXT,
        "timezone": ZONES,
        "after": INSTANT_TEXT,
        "target_url": st.sampled_from(
            ["https://hooks.example.com/x", "http://10.0.0.1/", "ftp://x", "https://[::1]/"]
        ),
    }
    return st.one_of(special.get(key, JSON), JSON)


def bodies(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    known = st.sampled_from(keys).flatmap(lambda k: st.tuples(st.just(k), field_values(k)))
    unknown = st.tuples(st.text(max_size=10), JSON)
    return st.lists(st.one_of(known, known, unknown), max_size=6).map(dict)


SCHEDULE_KEYS = [
    "name", "cron", "timezone", "target_url", "payload", "body", "content_type", "headers",
    "jitter_seconds", "catchup", "retry", "timeout_seconds", "paused",
]  # fmt: skip
PREVIEW_KEYS = ["cron", "timezone", "after", "count"]
POSITIONS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(2**63 - 3, 2**63 + 3),
    st.sampled_from([0, 10**25]),
).map(str)
CURSORS = st.one_of(
    st.builds(cursor, st.builds("run:{}".format, POSITIONS)),
    st.builds(
        cursor, st.builds("{}:{}".format, st.sampled_from(["sch", "x"]), st.text(max_size=20))
    ),
    st.text(alphabet=string.printable, max_size=30),
)
LIMITS = st.one_of(
    st.integers(1, 200).map(str),
    st.sampled_from(["0", "1", "200", "201", "-1", "9" * 30, "\u0663"]),
    st.text(alphabet=string.printable, max_size=10),
)
QUERIES = st.fixed_dictionaries({}, optional={"limit": LIMITS, "cursor": CURSORS})
PREVIEWS = st.fixed_dictionaries(
    {"cron": st.one_of(VALID_CRON, CRON_TEXT)},
    optional={
        "timezone": ZONES,
        "after": INSTANT_TEXT,
        "count": st.one_of(st.integers(-5, 105), JSON),
    },
)
REQUESTS = st.one_of(
    st.tuples(st.just("create"), bodies(SCHEDULE_KEYS).map(lambda b: schedule_json() | b)),
    st.tuples(st.just("create"), bodies(SCHEDULE_KEYS)),
    st.tuples(st.just("patch"), bodies(SCHEDULE_KEYS)),
    st.tuples(st.just("preview"), PREVIEWS),
    st.tuples(st.just("preview"), bodies(PREVIEW_KEYS)),
    st.tuples(st.just("preview"), JSON),
    st.tuples(st.just("list schedules"), QUERIES),
    st.tuples(st.just("list runs"), QUERIES),
)


MERGE_PATCH = "application/merge-patch+json"


async def send(api: Api, kind: str, value: Any, schedule: str) -> Reply:
    """One generated request; bodies go out as raw JSON text (``null`` included)."""
    if kind in ("create", "patch", "preview"):
        method, path, media = {
            "create": ("POST", "/v1/schedules", "application/json"),
            "patch": ("PATCH", schedule, MERGE_PATCH),
            "preview": ("POST", "/v1/cron/preview", "application/json"),
        }[kind]
        return await api.call(method, path, data=json.dumps(value), headers={"Content-Type": media})
    path = "/v1/schedules" if kind == "list schedules" else schedule + "/runs"
    return await api.call("GET", path, query=value)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(requests=st.lists(REQUESTS, min_size=1, max_size=4))
async def test_no_input_makes_the_api_answer_500(api: Api, requests: list[tuple[str, Any]]) -> None:
    existing = await api.create()  # a target for patches and run lists
    for kind, value in requests:
        reply = await send(api, kind, value, f"/v1/schedules/{existing['id']}")
        assert reply.status < 500, (kind, value, reply.body)
        if reply.status == 422:
            assert reply.fields, reply.body  # every 422 names the field it is about
