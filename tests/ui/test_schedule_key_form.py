"""The schedule form's "Key" (docs/schedules.md, "Keys"): set on create, shown on the
schedule page, kept by saving the form unchanged, cleared by a blank box; a malformed
key and a taken one land on the field, nothing stored."""

from __future__ import annotations

from appliance.store.infra.database import Database
from appliance.store.schedules import get_schedule, list_schedules
from tests.ui.conftest import Browser, Tenant, schedule_form, submitted_fields


def created_id(location: str) -> str:
    return location.split("/")[2].split("?")[0]


async def test_a_key_set_in_the_form_is_shown_kept_and_cleared(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form(key="nightly-report"))
    assert created.status == 302, created.text[:500]
    sid = created_id(created.headers["Location"])
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid).spec.key == (
        "nightly-report"
    )
    shown = await browser.get(f"/schedules/{sid}")
    assert '<code id="schedule-key">nightly-report</code>' in shown.text
    edit = await browser.get(f"/schedules/{sid}/edit")
    fields = submitted_fields(edit.text)
    assert fields["key"] == "nightly-report"
    assert '<details class="advanced" id="advanced" open>' in edit.text  # not hidden
    before = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid)
    unchanged = await browser.post(f"/schedules/{sid}/edit", fields)
    assert unchanged.status == 302
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid) == before
    cleared = await browser.post(f"/schedules/{sid}/edit", fields | {"key": ""})
    assert cleared.status == 302
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid).spec.key is None
    assert 'id="schedule-key"' not in (await browser.get(f"/schedules/{sid}")).text


async def test_a_malformed_key_is_named_on_its_field(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    page = await browser.post("/schedules/new", schedule_form(key="Not A Key"))
    assert page.status == 422
    assert 'id="key-error"' in page.text and "lower-case letters" in page.text
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []


async def test_a_taken_key_is_named_on_its_field_on_create_and_edit(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    first = await browser.post("/schedules/new", schedule_form(key="rollup"))
    first_id = created_id(first.headers["Location"])
    again = await browser.post("/schedules/new", schedule_form(key="rollup", form_key="j" * 43))
    assert again.status == 409
    assert 'id="key-error"' in again.text and first_id in again.text
    assert 'value="rollup"' in again.text  # what was typed is kept
    other = await browser.post("/schedules/new", schedule_form(key="other", form_key="m" * 43))
    other_id = created_id(other.headers["Location"])
    before = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=other_id)
    edit = await browser.get(f"/schedules/{other_id}/edit")
    refused = await browser.post(
        f"/schedules/{other_id}/edit", submitted_fields(edit.text) | {"key": "rollup"}
    )
    assert refused.status == 409 and 'id="key-error"' in refused.text
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=other_id) == before
