"""The web UI: a blueprint at ``/`` on the API's own app (same process, same port), built
from the top-level ``web/`` directory (templates and static files, shipped inside the
wheel as ``appliance/ui/web``) (docs/ui.md).

The UI is a second face of the functions the API uses: its views call ``store`` and
``core`` with the session's tenant, never ``api`` or ``engine`` (import contracts in
pyproject.toml). Every action is a plain ``<form method="post">`` that works without
JavaScript; htmx (vendored, pinned) only swaps fragments such as the live cron preview.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final
from urllib.parse import quote

from quart import Blueprint, Quart, Response, redirect, request
from werkzeug.exceptions import NotFound as NoSuchFile

from appliance.core.json_text import NUL_MESSAGE, field_with_nul
from appliance.errors import Conflict, NotFound, ValidationError
from appliance.live.limits import RETRY_AFTER_S, StreamLimitReached
from appliance.ui import (
    admin,
    notifications,
    pages,
    runs,
    schedule_actions,
    schedules,
    settings_pages,
    signin,
)
from appliance.ui.context import UiContext, install
from appliance.ui.render import page, register_filters
from appliance.ui.security import (
    Forbidden,
    SignInRequired,
    add_security_headers,
    load_session,
)

WEB_DIR: Final = Path(__file__).resolve().parent / "web"
NAME_MAX: Final = 255  # bytes in one path component (POSIX NAME_MAX on Linux and macOS)


def register_ui(app: Quart, context: UiContext) -> None:
    """Serve the UI from ``app`` at ``/`` (the API keeps ``/v1``)."""
    install(app.extensions, context)
    bp = _StaticBlueprint(
        "ui",
        __name__,
        template_folder=str(WEB_DIR / "templates"),
        static_folder=str(WEB_DIR / "static"),
        static_url_path="/static",
    )
    bp.before_request(load_session)
    bp.before_request(_refuse_nul_in_form)
    bp.after_request(add_security_headers)
    bp.register_error_handler(SignInRequired, _sign_in)
    bp.register_error_handler(Forbidden, _forbidden)
    bp.register_error_handler(NotFound, _not_found)
    bp.register_error_handler(Conflict, _conflict)
    bp.register_error_handler(ValidationError, _invalid)
    bp.register_error_handler(StreamLimitReached, _too_many_streams)
    register_filters(bp)
    for module in (
        signin,
        pages,
        schedules,
        schedule_actions,
        runs,
        settings_pages,
        notifications,
        admin,
    ):
        module.register(bp)
    app.register_blueprint(bp)


async def _refuse_nul_in_form() -> None:
    """A NUL in a form field is a 422 naming it, as in a URL (``api.app.refuse_nul_in_url``
    runs before every route, this one's too)."""
    if request.method != "POST":
        return
    name = field_with_nul((await request.form).items(multi=True))
    if name is not None:
        raise ValidationError.single(name, NUL_MESSAGE)


class _StaticBlueprint(Blueprint):
    async def send_static_file(self, filename: str) -> Response:
        """A 404 for a name no file can have: the OS refuses a component over NAME_MAX
        bytes with an error of its own (ENAMETOOLONG), not "no such file"."""
        if any(len(part.encode()) > NAME_MAX for part in filename.split("/")):
            raise NoSuchFile()
        return await super().send_static_file(filename)


async def _sign_in(_: SignInRequired) -> Response:
    target = request.full_path if request.method == "GET" else "/"
    return redirect(f"/login?next={_quote(target.rstrip('?'))}")  # type: ignore[return-value]


async def _forbidden(error: Forbidden) -> Response:
    return await page("error.html", status=403, title="Not allowed", message=error.message)


async def _not_found(error: NotFound) -> Response:
    return await page("error.html", status=404, title="Not found", message=str(error))


async def _conflict(error: Conflict) -> Response:
    return await page("error.html", status=409, title="Not possible now", message=str(error))


async def _invalid(error: ValidationError) -> Response:
    return await page("error.html", status=422, title="Invalid input", message=str(error))


async def _too_many_streams(error: StreamLimitReached) -> Response:
    return pages.stream_problem(
        status=429,
        kind="stream-limit",
        title="Too many open streams",
        detail=str(error),
        headers={"Retry-After": str(RETRY_AFTER_S)},
        limit=str(error.limit),
        max=error.most,
    )


def _quote(path: str) -> str:
    return quote(path, safe="/")
