"""Form fields the API would refuse as JSON or numbers, refused by the UI the same way: a
422 page naming the field, nothing stored. Each value below once answered 500 (Python's
int-string limit, its recursion limit, ``"²".isdigit()``)."""

from __future__ import annotations

import pytest
from quart_trio import QuartTrio

from appliance.core.json_text import MAX_INTEGER_DIGITS
from appliance.store.infra.database import Database
from appliance.store.schedules import get_schedule, list_schedules
from appliance.store.tenants import list_signing_secrets
from tests.api.conftest import START, Api
from tests.ui.conftest import Browser, Tenant, schedule_form

HUGE = "9" * (MAX_INTEGER_DIGITS + 1)  # int() of it raises ValueError

REFUSED = [
    ("payload", HUGE),
    ("payload", f'{{"n": [{HUGE}]}}'),
    ("payload", "[" * 50_000),  # json.loads raised RecursionError
    ("payload", "[" * 65 + "]" * 65),  # deeper than the API allows
    ("payload", '{"n": 1e400}'),
    ("payload", "NaN"),
    ("payload", '{"s": "\\ud800"}'),
    ("backoff", HUGE),
    ("backoff", f"30, {HUGE}"),
    ("backoff", f'{{"initial": {HUGE}, "factor": 2, "max": 60}}'),
    ("backoff", "30, 1e400"),
    ("jitter_seconds", HUGE),
    ("jitter_seconds", "²"),  # "²".isdigit() is True; int("²") raises
    ("jitter_seconds", "9999999999999999999"),  # beyond SQLite's int64
    ("max_attempts", HUGE),
    ("max_attempts", "9999999999999999999"),
    ("max_age_seconds", HUGE),
    ("max_age_seconds", "-9223372036854775809"),
]


@pytest.mark.parametrize(("field", "value"), REFUSED, ids=lambda v: str(v)[:24])
async def test_a_create_with_a_bad_number_or_json_names_the_field_and_stores_nothing(
    browser: Browser, alpha: Tenant, db: Database, field: str, value: str
) -> None:
    await browser.sign_in(alpha.editor)
    page = await browser.post("/schedules/new", schedule_form(**{field: value}))
    assert page.status == 422, page.text[:500]
    assert f'id="{field}-error"' in page.text
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []


@pytest.mark.parametrize(("field", "value"), REFUSED, ids=lambda v: str(v)[:24])
async def test_an_edit_with_a_bad_number_or_json_names_the_field_and_changes_nothing(
    browser: Browser, alpha: Tenant, db: Database, field: str, value: str
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form())
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    before = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    page = await browser.post(f"/schedules/{schedule_id}/edit", schedule_form(**{field: value}))
    assert page.status == 422, page.text[:500]
    assert f'id="{field}-error"' in page.text
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id) == before


@pytest.mark.parametrize("jitter", [HUGE, "²", "9999999999999999999"], ids=["huge", "sup", "i64"])
async def test_the_preview_names_a_bad_jitter(browser: Browser, alpha: Tenant, jitter: str) -> None:
    await browser.sign_in(alpha.viewer)
    fragment = await browser.post(
        "/schedules/preview", {"cron": "0 3 * * *", "timezone": "UTC", "jitter_seconds": jitter}
    )
    assert fragment.status == 200 and "jitter seconds:" in fragment.text


async def test_the_full_preview_ignores_a_version_that_is_no_number(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    for version in (HUGE, "²", "-1"):
        page = await browser.post(
            "/schedules/preview", schedule_form(full_preview="1", version=version)
        )
        assert page.status == 200 and 'name="version"' not in page.text


@pytest.mark.parametrize(
    ("version", "status"),
    [(HUGE, 422), ("²", 422), ("-1", 422), ("9999999999999999999", 409)],
    ids=["huge", "sup", "negative", "i64"],
)
async def test_an_edit_of_a_version_no_schedule_has_is_refused(
    browser: Browser, alpha: Tenant, db: Database, version: str, status: int
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form())
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    before = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    changed = schedule_form(name="renamed", version=version)
    page = await browser.post(f"/schedules/{schedule_id}/edit", changed)
    assert page.status == status
    assert "version" in page.text
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id) == before


@pytest.mark.parametrize("overlap", [HUGE, "²", "9999999999999999999", "-1", "1.5", ""])
async def test_a_rotation_with_a_bad_overlap_names_it_and_rotates_nothing(
    browser: Browser, alpha: Tenant, db: Database, overlap: str
) -> None:
    await browser.sign_in(alpha.owner)
    before = db.read_now(list_signing_secrets, tenant_id=alpha.id, now=START)
    page = await browser.post("/settings/secrets/rotate", {"overlap_seconds": overlap})
    assert page.status == 422 and "overlap_seconds" in page.text
    assert db.read_now(list_signing_secrets, tenant_id=alpha.id, now=START) == before


async def test_a_payload_integer_beyond_64_bits_is_kept_exactly_as_the_api_keeps_it(
    app: QuartTrio, browser: Browser, alpha: Tenant, db: Database
) -> None:
    """Valid JSON is the tenant's to send: 9999999999999999999 (> 2^63) goes out as typed
    from the form and from the API alike, never rounded or clipped."""
    big = "9999999999999999999"
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form(payload=f'{{"n": {big}}}'))
    assert created.status == 302, created.text[:500]
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    from_form = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    api = Api(app=app, key=alpha.tenant.api_key)
    reply = await api.call(
        "POST",
        "/v1/schedules",
        data=f'{{"name": "n", "cron": "0 3 * * *", "target_url": "https://hooks.example.com/r",'
        f' "payload": {{"n": {big}}}}}',
        headers={"Content-Type": "application/json"},
    )
    assert reply.status == 201, reply.body
    from_api = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=reply.body["id"])
    assert from_form is not None and from_api is not None
    assert from_form.spec.body == from_api.spec.body == f'{{"n":{big}}}'.encode()
    shown = await browser.get(f"/schedules/{schedule_id}/edit")
    assert big in shown.text


@pytest.mark.parametrize(
    ("path", "form", "field"),
    [
        ("/schedules/new", {"name": "a\x00b"}, "name"),
        ("/schedules/new", {"payload": '"\x00"'}, "payload"),
        ("/settings/users", {"email": "\x00@alpha.example", "role": "viewer"}, "email"),
    ],
)
async def test_a_nul_in_a_form_field_is_a_422_naming_it_on_both_stores(
    browser: Browser, alpha: Tenant, db: Database, path: str, form: dict[str, str], field: str
) -> None:
    """PostgreSQL text cannot hold a NUL (the lookup or the insert failed there as a 503):
    it is refused before any view reads it, on SQLite alike."""
    await browser.sign_in(alpha.owner)
    page = await browser.post(path, schedule_form(**form) if path.endswith("new") else form)
    assert page.status == 422, page.text[:300]
    assert f"{field}: contains a NUL character" in page.text
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []


async def test_an_id_holding_a_nul_names_nothing_on_both_stores(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.owner)
    assert (await browser.get("/schedules/sch_%00")).status == 404
    assert (await browser.post("/schedules/sch_%00/pause", {})).status == 404
    listed = await browser.get("/schedules?q=a%00")
    assert listed.status == 422 and "q: contains a NUL character" in listed.text
