"""``POST /v1/schedules/{id}/dedupe-test``: send one real delivery of the schedule twice
under the same key and answer what the receiver said each time (the rules of the test are
:mod:`appliance.core.dedupe_test`'s; docs/receiver.md, "Resend, curl and the dedupe test").

- A ``write`` key; the body, if any, is an empty JSON object.
- Synchronous: the two requests go one after the other, each bounded by the schedule's
  ``timeout_seconds`` like an attempt, so the answer comes within twice that.
- The destination is checked first, as when the schedule is saved (422 naming
  ``target_url``); the requests then go through the engine's delivery client
  (``ApiContext.send_probe``), which judges every address again at connect time.
- Nothing of the schedule changes: no run, no cursor, no version. The answers are recorded
  as a ``schedule.dedupe_tested`` event.
"""

from __future__ import annotations

import trio
from quart import Response, request
from quart_trio import QuartTrio

from appliance.api.auth import authenticate_caller
from appliance.api.bodies import json_response, read_json
from appliance.api.context import ApiContext, context
from appliance.api.problems import Problem
from appliance.core.dedupe_test import (
    TEST_MARK,
    ProbeAnswer,
    event_data,
    probe_instant,
    verdict,
)
from appliance.core.delivery import TEST_HEADER, build_request
from appliance.core.events import EventType
from appliance.core.ids import occurrence_ids
from appliance.core.instants import format_scheduled_for
from appliance.core.schedules import Schedule
from appliance.core.signing import SignatureError
from appliance.errors import Conflict, ValidationError
from appliance.store.events import append_event
from appliance.store.reproduce import probe_inputs


def register(app: QuartTrio) -> None:
    app.add_url_rule(
        "/v1/schedules/<schedule_id>/dedupe-test", view_func=dedupe_test, methods=["POST"]
    )


async def dedupe_test(schedule_id: str) -> Response:
    caller = await authenticate_caller()
    data = await request.get_data(cache=True, as_text=False, parse_form_data=False)
    if data and await read_json() != {}:
        raise ValidationError.single("$", "send no body, or an empty JSON object {}")
    ctx = context()
    schedule, secrets = await ctx.db.read(
        probe_inputs, tenant_id=caller.tenant_id, schedule_id=schedule_id,
        now=ctx.clock.now_ms(),
    )  # fmt: skip
    if not secrets:
        raise Conflict("you have no active signing secret; rotate one in first")
    await ctx.check_destination(schedule.spec.target_url)
    if ctx.send_probe is None:
        raise Problem(
            status=503,
            kind="unavailable",
            title="Service unavailable",
            detail="this appliance was started without a delivery client; try again later",
        )
    instant = probe_instant(ctx.clock.now_ms())
    text = format_scheduled_for(instant)
    run_id, key = occurrence_ids(schedule.id, text)
    first, second = [
        await _send(ctx, schedule, secrets, attempt=n, instant=instant, run_id=run_id, key=key)
        for n in (1, 2)
    ]
    await ctx.db.write(
        append_event,
        tenant_id=caller.tenant_id,
        type=EventType.SCHEDULE_DEDUPE_TESTED,
        now=ctx.clock.now_ms(),
        schedule_id=schedule.id,
        actor=caller.actor,
        data=event_data(key=key, scheduled_for=text, first=first, second=second),
    )
    return json_response(
        {
            "test": TEST_MARK,
            "idempotency_key": key,
            "scheduled_for": text,
            "run_id": run_id,
            "answers": [_render(n, answer) for n, answer in ((1, first), (2, second))],
            "verdict": verdict(first, second).value,
        }
    )


async def _send(
    ctx: ApiContext,
    schedule: Schedule,
    secrets: list[str],
    *,
    attempt: int,
    instant: int,
    run_id: str,
    key: str,
) -> ProbeAnswer:
    """One request of the test, signed now, cut off at the schedule's timeout."""
    assert ctx.send_probe is not None
    spec = schedule.spec
    try:
        built = build_request(
            target_url=spec.target_url,
            body=spec.body,
            content_type=spec.content_type,
            tenant_headers=spec.headers,
            schedule_id=schedule.id,
            run_id=run_id,
            attempt=attempt,
            scheduled_for_ms=instant,
            idempotency_key=key,
            secrets=secrets,
            signed_at_s=ctx.clock.now_ms() // 1000,
            user_agent=f"Steeple/{ctx.version}",
            marks=((TEST_HEADER, TEST_MARK),),
            method=spec.method,
        )
    except SignatureError:  # pragma: no cover - checked before
        raise Conflict("you have no active signing secret; rotate one in first") from None
    started = trio.current_time()
    with trio.move_on_after(spec.timeout_seconds):
        return await ctx.send_probe(built)
    elapsed = round((trio.current_time() - started) * 1000)
    return ProbeAnswer(
        status=None,
        excerpt="",
        error=f"no response within the {spec.timeout_seconds} s deadline",
        latency_ms=elapsed,
    )


def _render(attempt: int, answer: ProbeAnswer) -> dict[str, object]:
    return {
        "attempt": attempt,
        "status": answer.status,
        "excerpt": answer.excerpt,
        "error": answer.error,
        "latency_ms": answer.latency_ms,
    }
