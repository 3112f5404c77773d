"""``/schedules`` pages: list, new, edit, detail and the live preview — each the store
function the API calls for the same thing, with the session's tenant and the user as the
actor. The actions on schedules (pause, resume, run now, delete, and the selected rows at
once) are :mod:`appliance.ui.schedule_actions`. The schedule page shows a pause's note
while the schedule stays paused, and the tenant headers with every secret-bearing value
masked, whatever the role: the form never carries headers, so saving it keeps them.

A create carries a ``form_key`` minted when the form was shown and is written through
the API's own idempotent create (``request_keys.create_schedule_once``), so a double
submit makes one schedule and both submits land on it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping

from quart import Blueprint, Response, redirect, request

from appliance.core.events import Actor
from appliance.core.json_text import whole_number
from appliance.core.payload_template import NAMES
from appliance.core.schedule_input import merge_patch, parse_schedule
from appliance.core.schedules import PayloadKind, Schedule, ScheduleSpec
from appliance.core.secret_headers import masked_headers
from appliance.errors import FieldError, ValidationError
from appliance.store import overview, request_keys
from appliance.store import schedules as store
from appliance.store.figures.charts import schedule_strip
from appliance.store.request_keys import StoredResponse
from appliance.store.schedule_keys import KeyTaken
from appliance.store.usecases import pages
from appliance.store.users import Role
from appliance.ui import charts, preview
from appliance.ui.context import UiContext, ui
from appliance.ui.inspector import payload_text, retry_lines
from appliance.ui.live_pages import live_marker
from appliance.ui.render import page
from appliance.ui.schedule_form import (
    ScheduleForm,
    blank_form,
    document_of,
    form_error,
    form_of,
    with_errors,
)
from appliance.ui.security import require

PAGE_SIZE = 50
_FORM_KEY_CHARS = 43


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/schedules", view_func=list_page, methods=["GET"])
    bp.add_url_rule("/schedules/new", view_func=new_form, methods=["GET"])
    bp.add_url_rule("/schedules/new", view_func=create, methods=["POST"])
    bp.add_url_rule("/schedules/preview", view_func=preview_page, methods=["POST"])
    bp.add_url_rule("/schedules/<schedule_id>", view_func=schedule_page, methods=["GET"])
    bp.add_url_rule("/schedules/<schedule_id>/edit", view_func=edit_form, methods=["GET"])
    bp.add_url_rule("/schedules/<schedule_id>/edit", view_func=save, methods=["POST"])


async def list_page(
    *,
    note: str = "",
    note_error: str = "",
    selected: frozenset[str] = frozenset(),
    status_code: int = 200,
) -> Response:
    """The list; ``note``, ``note_error`` and ``selected``: a refused bulk pause's, kept."""
    _, tenant_id = require(Role.VIEWER)
    ctx = ui()
    status = _status(request.args.get("status", ""))
    query = request.args.get("q", "")[:200]
    after = request.args.get("after") or None

    rows = await ctx.db.read(
        pages.schedule_list,
        tenant_id=tenant_id,
        status=status,
        name_contains=query,
        limit=PAGE_SIZE + 1,
        after_id=after,
    )
    more = rows[PAGE_SIZE - 1][0].id if len(rows) > PAGE_SIZE else None
    return await page(
        "schedules.html",
        status=status_code,
        rows=rows[:PAGE_SIZE],
        status_filter=str(status),
        q=query,
        more=more,
        note=note,
        note_error=note_error,
        selected=selected,
    )


def _status(text: str) -> overview.Status:
    try:
        return overview.Status(text)
    except ValueError:
        return overview.Status.ANY


async def new_form() -> Response:
    require(Role.EDITOR)
    return await _form_page(blank_form(), schedule=None)


async def _form_page(
    form: ScheduleForm,
    *,
    schedule: Schedule | None,
    status: int = 200,
    **shown: object,
) -> Response:
    """The form page; ``shown``: a kept ``form_key`` and ``version``, a filled preview."""
    return await page(
        "schedule_form.html",
        status=status,
        form=form,
        schedule=schedule,
        zones=preview.ZONES,
        template_names=NAMES,
        **({"form_key": secrets.token_urlsafe(32)} | shown),
    )


async def preview_page() -> Response:
    """The live preview's fragment (htmx) — or, from the form's Preview button (how a
    browser without JavaScript previews), the form again as typed with the preview filled
    in, keeping its one-time key and the version it edits."""
    form = await request.form
    if "full_preview" not in form:
        return await preview.fragment()
    _, tenant_id = require(Role.EDITOR)
    schedule_id = form.get("schedule_id", "")
    schedule = await load_schedule(tenant_id, schedule_id) if schedule_id else None
    kind = blank_form().payload_kind if schedule is None else schedule.spec.payload_kind
    found, errors = await preview.compute(form)
    return await _form_page(
        with_errors(form, [], kind),
        schedule=schedule,
        form_key=form.get("form_key", "")[:_FORM_KEY_CHARS],
        version=_version(form.get("version", "")),
        preview=found,
        preview_errors=errors,
        target=preview.verdict(form.get("target_url", "")),
    )


async def create() -> Response:
    session, tenant_id = require(Role.EDITOR)
    ctx = ui()
    form = await request.form
    document, errors = document_of(form)
    spec = await _validated(ctx, errors, lambda: parse_schedule(document, policy=ctx.policy))
    if spec is None:
        return await _form_page(
            with_errors(form, errors, blank_form().payload_kind), schedule=None, status=422
        )
    key = form.get("form_key", "")
    if len(key) != _FORM_KEY_CHARS:
        raise ValidationError.single("form_key", "the form is incomplete; reload it")
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        stored, created = await ctx.db.write(
            request_keys.create_schedule_once,
            tenant_id=tenant_id,
            spec=spec,
            request_key=f"ui-form-{key}",
            request_hash=hashlib.sha256(canonical.encode()).hexdigest(),
            render=lambda s: StoredResponse(status=201, body=json.dumps({"id": s.id})),
            now=ctx.clock.now_ms(),
            max_schedules=ctx.max_schedules,
            actor=Actor.user(session.user.id),
        )
    except KeyTaken as error:
        return await _key_taken(form, error, blank_form().payload_kind, schedule=None)
    if created:
        ctx.nudge()
    schedule_id = json.loads(stored.body)["id"]
    return redirect(f"/schedules/{schedule_id}?done=created")  # type: ignore[return-value]


async def _validated(
    ctx: UiContext, errors: list[FieldError], parse: Callable[[], ScheduleSpec]
) -> ScheduleSpec | None:
    """``parse()`` then the destination check, as the API does; None with ``errors``
    extended when anything is wrong."""
    try:
        spec = parse()
    except ValidationError as error:
        # A field the form already faulted (a payload that is not JSON, a blank "At")
        # is absent or blank in the document: the API's word on it adds nothing.
        faulted = {form_error(e)[0] for e in errors}
        errors.extend(e for e in error.errors if form_error(e)[0] not in faulted)
        return None
    if errors:
        return None
    try:
        await ctx.check_destination(spec.target_url)
    except ValidationError as error:
        errors.extend(error.errors)
        return None
    return spec


async def schedule_page(schedule_id: str) -> Response:
    _, tenant_id = require(Role.VIEWER)
    return await detail(tenant_id, schedule_id)


async def detail(
    tenant_id: str, schedule_id: str, *, note: str = "", note_error: str = "", status: int = 200
) -> Response:
    """The schedule page; ``note`` and ``note_error``: a refused pause's, shown inline."""
    ctx = ui()

    shown = await ctx.db.read(
        pages.schedule_page, tenant_id=tenant_id, schedule_id=schedule_id, runs=PAGE_SIZE
    )
    schedule = shown.schedule
    strip = await ctx.db.read(schedule_strip, tenant_id=tenant_id, schedule_id=schedule_id)
    upcoming = await preview.upcoming(schedule.spec, count=5)
    return await page(
        "schedule.html",
        status=status,
        schedule=schedule,
        headers=masked_headers(schedule.spec.headers),
        runs=shown.runs,
        upcoming=upcoming,
        paused_note=shown.paused_note,
        strip=strip,
        sparkline=charts.sparkline(strip),
        sparkline_label=charts.sparkline_label(strip),
        marks=charts.STATE_MARKS,
        payload=payload_text(schedule.spec),
        retry_lines=retry_lines(schedule.spec.retry),
        live=live_marker(shown.newest_seq, schedule_id=schedule.id),
        note=note,
        note_error=note_error,
    )


async def edit_form(schedule_id: str) -> Response:
    _, tenant_id = require(Role.EDITOR)
    schedule = await load_schedule(tenant_id, schedule_id)
    return await _form_page(form_of(schedule.spec), schedule=schedule)


async def save(schedule_id: str) -> Response:
    session, tenant_id = require(Role.EDITOR)
    ctx = ui()
    current = await load_schedule(tenant_id, schedule_id)
    form = await request.form
    kind = current.spec.payload_kind
    document, errors = document_of(form, kind, templated=current.spec.templated)
    spec = await _validated(
        ctx, errors, lambda: merge_patch(current.spec, document, policy=ctx.policy)
    )
    if spec is None:
        return await _form_page(with_errors(form, errors, kind), schedule=current, status=422)
    if spec != current.spec:
        try:
            await ctx.db.write(
                store.update_schedule,
                tenant_id=tenant_id,
                schedule_id=schedule_id,
                spec=spec,
                now=ctx.clock.now_ms(),
                expected_version=_expected_version(form.get("version", "")),
                actor=Actor.user(session.user.id),
            )
        except KeyTaken as error:
            return await _key_taken(form, error, kind, schedule=current)
        ctx.nudge()
    return redirect(f"/schedules/{schedule_id}?done=saved")  # type: ignore[return-value]


async def _key_taken(
    form: Mapping[str, str], error: KeyTaken, kind: PayloadKind, *, schedule: Schedule | None
) -> Response:
    """The form again, as typed, the taken key's error on "Key" (the API's 409)."""
    errors = [FieldError(field="key", message=str(error))]
    return await _form_page(with_errors(form, errors, kind), schedule=schedule, status=409)


def _version(text: str) -> int | None:
    """The version a form edits; None when it carries none (no compare-and-set)."""
    value = whole_number(text)
    return value if value is not None and value >= 0 else None


def _expected_version(text: str) -> int | None:
    """The version a save compares against: none when blank; a version no schedule can
    have is an incomplete form, not a reason to skip the check."""
    if not text.strip():
        return None
    value = _version(text)
    if value is None:
        raise ValidationError.single("version", "the form is incomplete; reload it")
    return value


async def load_schedule(tenant_id: str, schedule_id: str) -> Schedule:
    """The tenant's live schedule; NotFound otherwise."""
    return await ui().db.read(store.require_schedule, tenant_id=tenant_id, schedule_id=schedule_id)
