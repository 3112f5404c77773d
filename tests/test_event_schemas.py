"""The event contract: ``contracts/events/*.json`` (JSON Schema 2020-12) against the code.

- ``envelope.json`` describes what every event shares; ``<type>.json`` exists for exactly
  the members of :class:`~appliance.core.events.EventType` and fixes the shape of ``data``.
- Structural checks (dialect, ids, ``required`` ⊆ ``properties``, ``$ref`` targets, regex
  patterns) need nothing but the standard library and always run.
- Validating example instances needs the ``jsonschema`` package (a test dependency); those
  tests skip, saying so, where it is not installed.

The wire form assumed for an event is the stored row with ``occurred_at`` as RFC 3339 UTC
text (``format_instant``) and ``data`` as written by the engine.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.core.downtime import DowntimeReport
from appliance.core.events import Actor, ActorKind, EventType, JsonScalar, JsonValue
from appliance.core.ids import idempotency_key, new_id, run_id
from appliance.core.instants import format_instant, format_scheduled_for, parse_instant
from appliance.core.schedules import CatchupPolicy
from appliance.store.events import SYSTEM_TENANT, append_event, list_events
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "contracts" / "events"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
ENVELOPE = "envelope"
ID_PREFIX = "urn:steeple:events:"

Schema = dict[str, Any]


def load_schemas() -> dict[str, Schema]:
    """Every schema file by name without ``.json`` (``envelope``, ``schedule.created``, …)."""
    return {
        path.name.removesuffix(".json"): json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(SCHEMA_DIR.glob("*.json"))
    }


SCHEMAS = load_schemas()


def subschemas(node: Any) -> Iterator[Schema]:
    """Every JSON object nested anywhere in ``node`` (schemas and keyword maps alike)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from subschemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from subschemas(item)


def resolve(ref: str, base_id: str) -> Any:
    """The target of a ``$ref`` among our own schemas (absolute URN or ``#`` pointer)."""
    target, _, pointer = ref.partition("#")
    by_id = {schema["$id"]: schema for schema in SCHEMAS.values()}
    node: Any = by_id[target or base_id]
    for part in filter(None, pointer.split("/")):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


# --- structure (standard library only) -----------------------------------------------


def test_every_event_type_has_a_schema_file_and_every_file_a_type() -> None:
    assert set(SCHEMAS) - {ENVELOPE} == {str(t) for t in EventType}
    assert ENVELOPE in SCHEMAS


def test_envelope_type_enum_lists_exactly_the_event_types() -> None:
    listed = SCHEMAS[ENVELOPE]["properties"]["type"]["enum"]
    assert sorted(listed) == sorted(str(t) for t in EventType)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_declares_dialect_id_title_and_object_type(name: str) -> None:
    schema = SCHEMAS[name]
    assert schema["$schema"] == DIALECT
    assert schema["$id"] == ID_PREFIX + name
    assert schema["type"] == "object"
    assert schema["title"] and schema["description"]


@pytest.mark.parametrize("name", sorted(set(SCHEMAS) - {ENVELOPE}))
def test_type_schema_extends_the_envelope_and_pins_its_type(name: str) -> None:
    schema = SCHEMAS[name]
    assert {"$ref": SCHEMAS[ENVELOPE]["$id"]} in schema["allOf"]
    assert schema["properties"]["type"] == {"const": name}
    assert schema["properties"]["data"] == {"$ref": "#/$defs/data"}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_required_names_are_declared_properties(name: str) -> None:
    for node in subschemas(SCHEMAS[name]):
        if isinstance(node.get("required"), list) and "properties" in node:
            missing = set(node["required"]) - set(node["properties"])
            assert not missing, f"{name}: required but not declared: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_object_schemas_with_properties_forbid_unknown_fields(name: str) -> None:
    # Every closed shape says so explicitly; a typo in the engine must not pass silently.
    # Type schemas are the exception: they narrow the envelope, which is itself closed.
    for node in subschemas(SCHEMAS[name]):
        if node.get("type") == "object" and "properties" in node and "allOf" not in node:
            assert node.get("additionalProperties") is False, f"{name}: open object {node}"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_ref_resolves_within_the_contract(name: str) -> None:
    schema = SCHEMAS[name]
    refs = [node["$ref"] for node in subschemas(schema) if isinstance(node.get("$ref"), str)]
    assert refs or name == ENVELOPE
    for ref in refs:
        assert isinstance(resolve(ref, schema["$id"]), dict), ref


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_patterns_compile(name: str) -> None:
    for node in subschemas(SCHEMAS[name]):
        if isinstance(node.get("pattern"), str):
            re.compile(node["pattern"])


def test_failed_reasons_match_the_retry_policy() -> None:
    retry = pytest.importorskip("appliance.core.retry", reason="core/retry.py not written yet")
    data = SCHEMAS[str(EventType.RUN_FAILED)]["$defs"]["data"]
    assert set(data["properties"]["reason"]["enum"]) == {r.value for r in retry.FailureReason}


# --- example instances (needs jsonschema) ----------------------------------------------

NOW = parse_instant("2026-08-06T03:00:01.250Z")
SLOT = parse_instant("2026-08-06T03:00:00Z")
SCH = "sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB"
TEN = "ten_01JDQ8Y5Z2M4X7K9P3R6T8V0WC"
SLOT_TEXT = format_scheduled_for(SLOT)
RUN = run_id(SCH, SLOT_TEXT)
KEY = idempotency_key(SCH, SLOT_TEXT)


def event(
    type: EventType,
    data: dict[str, JsonValue],
    *,
    schedule_id: str | None = SCH,
    run: str | None = RUN,
    tenant_id: str = TEN,
    actor: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "seq": 7,
        "id": new_id("evt", NOW),
        "tenant_id": tenant_id,
        "type": str(type),
        "schedule_id": schedule_id,
        "run_id": run,
        "occurred_at": format_instant(NOW),
        "actor": actor,
        "data": data,
    }


USER = {"kind": "user", "id": new_id("usr", NOW)}


def tenant_event(type: EventType, data: dict[str, JsonValue], **kw: Any) -> dict[str, Any]:
    """An event about the tenant itself (no schedule, no run)."""
    return event(type, data, schedule_id=None, run=None, **kw)


def run_data(**changes: JsonScalar) -> dict[str, JsonScalar]:
    data: dict[str, JsonScalar] = {
        "scheduled_for": SLOT_TEXT,
        "attempt": 1,
        "idempotency_key": KEY,
        "status": 200,
        "error": None,
        "reason": None,
    }
    data.update(changes)
    return data


def retrying(**changes: JsonScalar) -> dict[str, JsonScalar]:
    fields: dict[str, JsonScalar] = {
        "status": 503,
        "error": "HTTP 503",
        "next_attempt_at": format_instant(NOW + 5123),
    }
    return run_data(**(fields | changes))


def missed_summary(**changes: JsonScalar) -> dict[str, JsonScalar]:
    data: dict[str, JsonScalar] = {
        "count": 250,
        "first_scheduled_for": "2026-08-05T03:00:00Z",
        "last_scheduled_for": SLOT_TEXT,
        "reason": "outside_catchup_window",
    }
    return data | changes


def restarted(**changes: JsonValue) -> dict[str, Any]:
    """A downtime report as the engine writes it (``DowntimeReport.event_data``)."""
    report = DowntimeReport(
        previous_incarnation=new_id("inc", NOW - 600_000),
        down_since=NOW - 125_500,
        restarted_at=NOW,
        clean_shutdown=False,
        reclaimed=2,
        late={CatchupPolicy.ALL: 7, CatchupPolicy.LATEST: 1},
        missed={CatchupPolicy.SKIP: 3},
    )
    data = report.event_data() | changes
    return event(E.APPLIANCE_RESTARTED, data, schedule_id=None, run=None, tenant_id=SYSTEM_TENANT)


def resent(**changes: JsonScalar) -> dict[str, JsonScalar]:
    copy_text = format_scheduled_for(SLOT - 1000)
    data: dict[str, JsonScalar] = {
        "scheduled_for": copy_text,
        "idempotency_key": idempotency_key(SCH, copy_text),
        "resend_of": RUN,
        "original_scheduled_for": SLOT_TEXT,
        "original_idempotency_key": KEY,
    }
    data.update(changes)
    return data


def dedupe_tested(**changes: JsonScalar) -> dict[str, JsonScalar]:
    text = "9999-03-04T05:06:07Z"
    data: dict[str, JsonScalar] = {
        "test": "dedupe",
        "idempotency_key": idempotency_key(SCH, text),
        "scheduled_for": text,
        "verdict": "duplicate_refused",
        "first_status": 200,
        "first_excerpt": "done",
        "first_error": None,
        "second_status": 409,
        "second_excerpt": "seen",
        "second_error": None,
    }
    data.update(changes)
    return data


E = EventType
REVEALED_DATA: dict[str, JsonValue] = {
    "secret_id": new_id("sec", NOW),
    "masked": "whsec_…a1B2",
}
SUSPENDED_DATA: dict[str, JsonValue] = {"cancelled_runs": 4}
API_KEY = {"kind": "api_key", "id": new_id("key", NOW)}
OPERATOR = {"kind": "operator", "id": "cli"}
KEY_DATA: dict[str, JsonValue] = {"key_id": new_id("key", NOW), "name": "ci", "scope": "read"}
ROTATED_DATA: dict[str, JsonValue] = {**REVEALED_DATA, "overlap_seconds": 86_400}
INVITED_DATA: dict[str, JsonValue] = {
    "invitation_id": new_id("inv", NOW),
    "email": "ada@example.com",
    "role": "editor",
}
CREATED_DATA: dict[str, JsonValue] = {
    "user_id": new_id("usr", NOW),
    "email": "ada@example.com",
    "role": "viewer",
}
MEMBER: dict[str, JsonValue] = {"user_id": USER["id"], "email": "ada@acme.example"}
ENDED = "sessions_ended"
HOOK_DATA: dict[str, JsonValue] = {"change": "set", "origin": "https://hooks.example.com:443"}
WHO: dict[str, JsonValue] = {
    "user_id": USER["id"],
    "email": "ada@acme.example",
    "address": "2001:db8::7",
}
VALID: list[tuple[str, dict[str, Any]]] = [
    ("succeeded", event(E.RUN_SUCCEEDED, run_data(status=204))),
    ("succeeded, explicit null next", event(E.RUN_SUCCEEDED, run_data(next_attempt_at=None))),
    ("retrying after a 503", event(E.RUN_RETRYING, retrying())),
    ("retrying, no response", event(E.RUN_RETRYING, retrying(status=None, reason="timeout"))),
    ("failed: gone", event(E.RUN_FAILED, run_data(attempt=3, status=410, reason="gone"))),
    (
        "failed: blocked",
        event(
            E.RUN_FAILED,
            run_data(status=None, error="10.0.0.7 is private", reason="destination_blocked"),
        ),
    ),
    ("failed: exhausted", event(E.RUN_FAILED, run_data(attempt=8, status=500, reason="exhausted"))),
    ("missed", event(E.RUN_MISSED, {"scheduled_for": SLOT_TEXT, "reason": "catchup_skip"})),
    ("missed summary", event(E.RUN_MISSED, missed_summary(), run=None)),
    ("resent", event(E.RUN_RESENT, resent())),
    ("updated", event(E.SCHEDULE_UPDATED, {"version": 2, "changed": ["cron"]}, run=None)),
    *[
        (str(t), event(t, {"version": 2}, run=None))
        for t in (
            E.SCHEDULE_CREATED,
            E.SCHEDULE_PAUSED,
            E.SCHEDULE_RESUMED,
            E.SCHEDULE_DELETED,
        )
    ],
    ("paused with a note", event(E.SCHEDULE_PAUSED, {"version": 3, "note": "db move"}, run=None)),
    ("secret revealed", tenant_event(E.SECRET_REVEALED, REVEALED_DATA, actor=USER)),
    ("suspended by an operator", tenant_event(E.TENANT_SUSPENDED, SUSPENDED_DATA, actor=USER)),
    ("signed in", tenant_event(E.USER_SIGNED_IN, WHO, actor=USER)),
    (
        "sign-in failed",
        tenant_event(E.USER_SIGN_IN_FAILED, WHO | {"reason": "wrong_password"}),
    ),
    (
        "suspended from the CLI",
        tenant_event(E.TENANT_SUSPENDED, {"cancelled_runs": 0}, actor=OPERATOR),
    ),
    ("suspended, recorded unnamed", tenant_event(E.TENANT_SUSPENDED, {"cancelled_runs": 0})),
    (
        "stream refused",
        tenant_event(
            E.STREAM_REFUSED,
            {"surface": "api", "limit": "key", "max": 4},
            actor={"kind": "api_key", "id": new_id("key", NOW)},
        ),
    ),
    (
        "resumed",
        tenant_event(E.TENANT_RESUMED, {"suspended_at": format_instant(NOW - 1000)}, actor=USER),
    ),
    ("key issued", tenant_event(E.API_KEY_CREATED, KEY_DATA, actor=API_KEY)),
    ("key revoked from the CLI", tenant_event(E.API_KEY_REVOKED, KEY_DATA, actor=OPERATOR)),
    ("secret rotated", tenant_event(E.SECRET_ROTATED, ROTATED_DATA, actor=USER)),
    ("secret revoked", tenant_event(E.SECRET_REVOKED, REVEALED_DATA, actor=API_KEY)),
    ("notification URL set", tenant_event(E.NOTIFICATIONS_UPDATED, HOOK_DATA, actor=API_KEY)),
    (
        "notification URL removed",
        tenant_event(E.NOTIFICATIONS_UPDATED, HOOK_DATA | {"change": "removed"}, actor=USER),
    ),
    ("user invited", tenant_event(E.USER_INVITED, INVITED_DATA, actor=USER)),
    ("user created", tenant_event(E.USER_CREATED, CREATED_DATA, actor=OPERATOR)),
    (
        "role changed",
        tenant_event(
            E.USER_ROLE_CHANGED, MEMBER | {"role": "owner", "previous_role": "editor"}, actor=USER
        ),
    ),
    (
        "user removed",
        tenant_event(E.USER_REMOVED, MEMBER | {"role": "viewer", ENDED: 2}, actor=OPERATOR),
    ),
    ("user reset", tenant_event(E.USER_RESET, MEMBER | {ENDED: 1}, actor=USER)),
    ("password changed", tenant_event(E.USER_PASSWORD_CHANGED, MEMBER | {ENDED: 0}, actor=USER)),
    ("sessions ended", tenant_event(E.USER_SESSIONS_ENDED, MEMBER | {ENDED: 3}, actor=USER)),
    ("dedupe tested", event(E.SCHEDULE_DEDUPE_TESTED, dedupe_tested(), run=None)),
    (
        "dedupe tested, no answer",
        event(
            E.SCHEDULE_DEDUPE_TESTED,
            dedupe_tested(verdict="first_failed", first_status=None, first_error="refused"),
            run=None,
        ),
    ),
    (
        "breaker opened",
        event(
            E.BREAKER_OPENED,
            {
                "origin": "https://hooks.example.com:443",
                "failures": 10,
                "probe_at": format_instant(NOW + 10_000),
            },
            schedule_id=None,
            run=None,
        ),
    ),
    (
        "breaker closed",
        event(E.BREAKER_CLOSED, {"origin": "http://[::1]:8080"}, schedule_id=None, run=None),
    ),
    ("paused by receiver", event(E.SCHEDULE_PAUSED_BY_RECEIVER, {"run_id": RUN, "status": 410})),
    (
        "clock jumped back",
        event(
            E.CLOCK_JUMP_DETECTED,
            {"wall_delta_ms": -3_600_000, "monotonic_delta_ms": 1000, "divergence_ms": -3_601_000},
            schedule_id=None,
            run=None,
            tenant_id=SYSTEM_TENANT,
        ),
    ),
    ("restarted after a crash", restarted()),
    ("restarted after a clean stop", restarted(clean_shutdown=True, downtime_ms=0, reclaimed=0)),
]


DELETE = object()
Invalid = tuple[str, str, tuple[str, ...], Any]  # label, schema name, changed path, instance


def bad(label: str, base: dict[str, Any], path: str, value: Any) -> Invalid:
    """A deep copy of ``base`` with the dotted ``path`` set to ``value`` (or removed, for
    ``DELETE``), to be checked against ``base``'s schema."""
    instance = copy.deepcopy(base)
    *parents, leaf = path.split(".")
    node = instance
    for part in parents:
        node = node[part]
    if value is DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return label, base["type"], tuple(path.split(".")), instance


SUCCEEDED = event(E.RUN_SUCCEEDED, run_data())
RETRYING = event(E.RUN_RETRYING, retrying())
FAILED = event(E.RUN_FAILED, run_data(status=410, reason="gone"))
MISSED = event(E.RUN_MISSED, {"scheduled_for": SLOT_TEXT, "reason": "catchup_skip"})
SUMMARY = event(E.RUN_MISSED, missed_summary(), run=None)
UPDATED = event(E.SCHEDULE_UPDATED, {"version": 3, "changed": ["name", "cron"]}, run=None)
RESENT = event(E.RUN_RESENT, resent(), run=run_id(SCH, format_scheduled_for(SLOT - 1000)))
DEDUPE = event(E.SCHEDULE_DEDUPE_TESTED, dedupe_tested(), run=None)
GONE = event(E.SCHEDULE_PAUSED_BY_RECEIVER, {"run_id": RUN, "status": 410})
JUMP = dict(VALID)["clock jumped back"]
PAUSED = dict(VALID)["paused with a note"]
REVEALED = dict(VALID)["secret revealed"]
SUSPENDED = dict(VALID)["suspended by an operator"]
RESUMED = dict(VALID)["resumed"]
REFUSED = dict(VALID)["stream refused"]
SIGNED_IN = dict(VALID)["signed in"]
HOOK = dict(VALID)["notification URL set"]
SIGN_IN_FAILED = dict(VALID)["sign-in failed"]
RESTARTED = restarted()

INVALID: list[Invalid] = [
    bad("succeeded with a 500", SUCCEEDED, "data.status", 500),
    bad("succeeded with a reason", SUCCEEDED, "data.reason", "gone"),
    bad("unknown data field", SUCCEEDED, "data.latency_ms", 12),
    bad("missing key", SUCCEEDED, "data.idempotency_key", DELETE),
    bad("upper-case key", SUCCEEDED, "data.idempotency_key", KEY.upper()),
    bad("attempt 0", SUCCEEDED, "data.attempt", 0),
    bad("attempt as text", SUCCEEDED, "data.attempt", "1"),
    bad("scheduled_for with ms", SUCCEEDED, "data.scheduled_for", "2026-08-06T03:00:00.000Z"),
    bad("scheduled_for +00:00", SUCCEEDED, "data.scheduled_for", "2026-08-06T03:00:00+00:00"),
    bad("succeeded without a run", SUCCEEDED, "run_id", None),
    bad("retrying without next", RETRYING, "data.next_attempt_at", DELETE),
    bad("retrying with null next", RETRYING, "data.next_attempt_at", None),
    bad("retrying with epoch next", RETRYING, "data.next_attempt_at", NOW + 5000),
    bad("failed without a reason", FAILED, "data.reason", None),
    bad("failed, unknown reason", FAILED, "data.reason", "teapot"),
    bad("failed with a next attempt", FAILED, "data.next_attempt_at", format_instant(NOW)),
    bad("missed, unknown reason", MISSED, "data.reason", "late"),
    bad("missed without its run", MISSED, "run_id", None),
    bad("summary naming a run", SUMMARY, "run_id", RUN),
    bad("summary without last", SUMMARY, "data.last_scheduled_for", DELETE),
    bad("summary with scheduled_for", SUMMARY, "data.scheduled_for", SLOT_TEXT),
    bad("restart of one tenant", RESTARTED, "tenant_id", TEN),
    bad("restart without its downtime", RESTARTED, "data.downtime_ms", DELETE),
    bad("negative downtime", RESTARTED, "data.downtime_ms", -1),
    bad("restart without a policy's count", RESTARTED, "data.missed_latest", DELETE),
    bad("restart, unknown policy", RESTARTED, "data.late_sometimes", 1),
    bad("restart since an epoch number", RESTARTED, "data.down_since", NOW),
    bad("resent without its copy", RESENT, "run_id", None),
    bad("resent without the original", RESENT, "data.resend_of", DELETE),
    bad("resent, original not a run id", RESENT, "data.resend_of", "sch_x"),
    bad("dedupe test naming a run", DEDUPE, "run_id", RUN),
    bad("dedupe test in this year", DEDUPE, "data.scheduled_for", SLOT_TEXT),
    bad("dedupe test, unknown verdict", DEDUPE, "data.verdict", "fine"),
    bad("dedupe test without the second", DEDUPE, "data.second_status", DELETE),
    bad("schedule event with a run", UPDATED, "run_id", RUN),
    bad("version 0", UPDATED, "data.version", 0),
    bad("no version", UPDATED, "data", {}),
    bad("updated without what changed", UPDATED, "data.changed", DELETE),
    bad("changed as one string", UPDATED, "data.changed", "name,cron"),
    bad("actor of an unknown kind", UPDATED, "actor", {"kind": "robot", "id": "r1"}),
    bad("actor without an id", UPDATED, "actor", {"kind": "api_key"}),
    bad("no schedule", UPDATED, "schedule_id", None),
    bad("receiver status 404", GONE, "data.status", 404),
    bad("receiver without run", GONE, "data.run_id", DELETE),
    bad("clock jump on a schedule", JUMP, "schedule_id", SCH),
    bad("fractional clock delta", JUMP, "data.wall_delta_ms", 1.5),
    bad("monotonic went back", JUMP, "data.monotonic_delta_ms", -1),
    bad("empty pause note", PAUSED, "data.note", ""),
    bad("pause note of 501 characters", PAUSED, "data.note", "x" * 501),
    bad("pause note as a number", PAUSED, "data.note", 7),
    bad("reveal without who asked", REVEALED, "actor", None),
    bad("reveal without the secret", REVEALED, "data.secret_id", DELETE),
    bad("reveal carrying the secret", REVEALED, "data.secret", "whsec_abc"),
    bad("reveal of a key id", REVEALED, "data.secret_id", "key_x"),
    bad("notification change without who", HOOK, "actor", None),
    bad("notification change carrying the URL", HOOK, "data.url", "https://hooks.example.com/t"),
    bad("notification origin with a path", HOOK, "data.origin", "https://hooks.example.com/t"),
    bad("notification change, unknown kind", HOOK, "data.change", "edited"),
    bad("system suspended", SUSPENDED, "tenant_id", SYSTEM_TENANT),
    bad("suspension on a schedule", SUSPENDED, "schedule_id", SCH),
    bad("negative cancelled count", SUSPENDED, "data.cancelled_runs", -1),
    bad("resumed without its start", RESUMED, "data.suspended_at", DELETE),
    bad("refusal without who asked", REFUSED, "actor", None),
    bad("refusal of an unknown limit", REFUSED, "data.limit", "schedule"),
    bad("refusal of an unknown surface", REFUSED, "data.surface", "cli"),
    bad("refusal without the cap", REFUSED, "data.max", DELETE),
    bad("sign-in without who", SIGNED_IN, "actor", None),
    bad("sign-in of the system", SIGNED_IN, "tenant_id", SYSTEM_TENANT),
    bad("sign-in without its address", SIGNED_IN, "data.address", DELETE),
    bad("failed sign-in naming an actor", SIGN_IN_FAILED, "actor", USER),
    bad("failed sign-in carrying a password", SIGN_IN_FAILED, "data.password", "hunter2"),
    bad("failed sign-in, unknown reason", SIGN_IN_FAILED, "data.reason", "typo"),
    bad("unknown envelope field", UPDATED, "tenant", TEN),
    bad("event id without prefix", UPDATED, "id", "01JDQ8Y5Z2M4X7K9P3R6T8V0WB"),
    bad("occurred_at as epoch ms", UPDATED, "occurred_at", NOW),
    bad("malformed tenant", UPDATED, "tenant_id", "ten_x"),
    bad("seq 0", UPDATED, "seq", 0),
    bad("data not an object", UPDATED, "data", [3]),
    bad("type of another schema", UPDATED, "type", str(E.SCHEDULE_CREATED)),
]


@pytest.fixture(scope="module")
def validators() -> dict[str, Any]:
    """A 2020-12 validator per schema file, all resolving ``$ref`` among each other."""
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema is not installed (test dependency for contracts)"
    )
    referencing = pytest.importorskip("referencing")
    resources = [
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in SCHEMAS.values()
    ]
    registry = referencing.Registry().with_resources(resources)
    cls = jsonschema.Draft202012Validator
    for schema in SCHEMAS.values():
        cls.check_schema(schema)
    return {name: cls(schema, registry=registry) for name, schema in SCHEMAS.items()}


def errors(validator: Any, instance: Any) -> list[str]:
    return [error.message for error in validator.iter_errors(instance)]


def test_schemas_are_valid_2020_12(validators: dict[str, Any]) -> None:
    assert set(validators) == set(SCHEMAS)  # check_schema ran on each in the fixture


def test_every_event_type_has_a_valid_example() -> None:
    assert {example["type"] for _, example in VALID} == {str(t) for t in EventType}


@pytest.mark.parametrize(("label", "instance"), VALID, ids=[label for label, _ in VALID])
def test_valid_examples_pass_their_type_and_the_envelope(
    validators: dict[str, Any], label: str, instance: dict[str, Any]
) -> None:
    assert errors(validators[instance["type"]], instance) == [], label
    assert errors(validators[ENVELOPE], instance) == [], label


@pytest.mark.parametrize(
    ("label", "schema", "changed", "instance"), INVALID, ids=[case[0] for case in INVALID]
)
def test_invalid_examples_are_rejected_where_they_were_changed(
    validators: dict[str, Any], label: str, schema: str, changed: tuple[str, ...], instance: Any
) -> None:
    # Checked against the schema of the example it was derived from (not dispatched on
    # its own `type`), so a wrong `type` value must be caught by the `const`. An error must
    # sit on the changed field or an object enclosing it (`required`, `additionalProperties`,
    # `oneOf` report there), not somewhere unrelated that happens to be wrong too.
    found = [tuple(e.absolute_path) for e in validators[schema].iter_errors(instance)]
    assert found, f"{label} was accepted"
    assert any(changed[: len(path)] == path for path in found), (label, found)


def test_events_round_tripped_through_the_store_validate(
    validators: dict[str, Any], db: Database
) -> None:
    tenant = db.write_now(create_tenant, name="acme", now=NOW).tenant_id
    for _, instance in VALID:
        db.write_now(
            append_event,
            tenant_id=SYSTEM_TENANT if instance["tenant_id"] == SYSTEM_TENANT else tenant,
            type=EventType(instance["type"]),
            now=NOW,
            schedule_id=instance["schedule_id"],
            run_id=instance["run_id"],
            data=instance["data"],
            actor=None if instance["actor"] is None else as_actor(instance["actor"]),
        )
    stored = db.read_now(list_events, tenant_id=tenant, limit=100)  # with the system's
    assert len(stored) == len(VALID)
    for row in stored:
        wire = {
            "seq": row.seq,
            "id": row.id,
            "tenant_id": row.tenant_id,
            "type": str(row.type),
            "schedule_id": row.schedule_id,
            "run_id": row.run_id,
            "occurred_at": format_instant(row.occurred_at),
            "actor": None
            if row.actor is None
            else {"kind": str(row.actor.kind), "id": row.actor.id},
            "data": row.data,
        }
        assert errors(validators[wire["type"]], wire) == [], wire


def as_actor(wire: dict[str, str]) -> Actor:
    return Actor(kind=ActorKind(wire["kind"]), id=wire["id"])


def test_the_engines_run_event_data_matches_the_contract(validators: dict[str, Any]) -> None:
    runs = pytest.importorskip("appliance.store.runs", reason="store/runs.py not written yet")
    build = runs.run_event_data
    cases = [
        (E.RUN_SUCCEEDED, build(scheduled_for=SLOT, attempt=1, key=KEY, status=200)),
        (
            E.RUN_RETRYING,
            build(scheduled_for=SLOT, attempt=2, key=KEY, error="timeout", next_attempt_at=NOW),
        ),
        (
            E.RUN_FAILED,
            build(scheduled_for=SLOT, attempt=8, key=KEY, status=500, reason="exhausted"),
        ),
    ]
    for type_, data in cases:
        instance = event(type_, data)
        assert errors(validators[str(type_)], instance) == [], instance
