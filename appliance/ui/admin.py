"""Operator pages: ``/admin/health`` — the figures ``/metrics`` and ``steeple status``
show, from the same function (:func:`appliance.store.figures.operator.operator_figures`);
``/admin/tenants`` — every tenant with its counts (never a secret), suspend and resume a
tenant (the store functions ``steeple tenant suspend|resume`` use),
create a tenant (its first API key and signing secret shown once, as ``steeple tenant
create`` prints them), and invite a user to a tenant (a one-hour setup link, as ``steeple
user create`` prints it; :func:`appliance.store.invitations.invite_user`). Only operators
reach them; to anyone else they do not exist (404), so tenants cannot discover them.
"""

from __future__ import annotations

from quart import Blueprint, Response, redirect, request

from appliance.core.events import Actor
from appliance.errors import NotFound
from appliance.store.figures.operator import WINDOW_MS, operator_figures
from appliance.store.figures.tenants import tenant_summaries
from appliance.store.invitations import invite_user
from appliance.store.suspension import resume_tenant, suspend_tenant
from appliance.store.tenants import NewTenant, check_tenant_name, create_tenant
from appliance.store.users import Role
from appliance.ui.context import ui
from appliance.ui.render import page
from appliance.ui.security import SignInRequired, current_session
from appliance.ui.settings_pages import form_role, setup_link


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/admin/health", view_func=health, methods=["GET"])
    bp.add_url_rule("/admin/tenants", view_func=tenant_list, methods=["GET"])
    bp.add_url_rule("/admin/tenants", view_func=add_tenant, methods=["POST"])
    bp.add_url_rule("/admin/users", view_func=add_tenant_user, methods=["POST"])
    bp.add_url_rule(
        "/admin/tenants/<tenant_id>/suspend", view_func=suspend_tenant_view, methods=["POST"]
    )
    bp.add_url_rule(
        "/admin/tenants/<tenant_id>/resume", view_func=resume_tenant_view, methods=["POST"]
    )


def require_operator() -> Actor:
    """The signed-in operator, as the actor of what they change; NotFound to others."""
    session = current_session()
    if session is None:
        raise SignInRequired
    if not session.user.operator:
        raise NotFound("no such page")
    return Actor.user(session.user.id)


async def health() -> Response:
    require_operator()
    ctx = ui()
    now = ctx.clock.now_ms()
    figures = await ctx.db.read(operator_figures, disk=ctx.db.disk, now=now)
    return await page(
        "admin_health.html", f=figures, version=ctx.version, window_min=WINDOW_MS // 60_000
    )


async def tenant_list(
    *,
    created: NewTenant | None = None,
    created_name: str = "",
    link: str | None = None,
    status: int = 200,
) -> Response:
    """The tenants, each by name (its id in the title, copyable); ``created`` and
    ``created_name``: a tenant just created, its key and secret shown once."""
    require_operator()
    now = ui().clock.now_ms()
    listed = await ui().db.read(tenant_summaries, now=now)
    return await page(
        "admin_tenants.html",
        status=status,
        tenants=listed,
        created=created,
        created_name=created_name,
        link=link,
        roles=list(Role),
    )


async def add_tenant() -> Response:
    require_operator()
    ctx = ui()
    name = check_tenant_name((await request.form).get("name", ""))
    created = await ctx.db.write(create_tenant, name=name, now=ctx.clock.now_ms())
    return await tenant_list(created=created, created_name=name, status=201)


async def add_tenant_user() -> Response:
    actor = require_operator()
    ctx = ui()
    form = await request.form
    invited = await ctx.db.write(
        invite_user,
        tenant=form.get("tenant", ""),
        email=form.get("email", ""),
        role=form_role(form.get("role", "")),
        now=ctx.clock.now_ms(),
        actor=actor,
    )
    return await tenant_list(link=setup_link(invited.token), status=201)


async def suspend_tenant_view(tenant_id: str) -> Response:
    actor = require_operator()
    ctx = ui()
    await ctx.db.write(suspend_tenant, tenant_id=tenant_id, now=ctx.clock.now_ms(), actor=actor)
    return redirect("/admin/tenants?done=suspended")  # type: ignore[return-value]


async def resume_tenant_view(tenant_id: str) -> Response:
    actor = require_operator()
    ctx = ui()
    await ctx.db.write(resume_tenant, tenant_id=tenant_id, now=ctx.clock.now_ms(), actor=actor)
    ctx.nudge()  # the planner catches the tenant's schedules up now, per their policies
    return redirect("/admin/tenants?done=resumed-tenant")  # type: ignore[return-value]
