"""What the run page shows of a delivery and the schedule page of its request (docs/ui.md,
"A run's page", "A schedule's page"): the request as its last attempt sent it, the
reason each attempt led where it did, the schedule's payload and retry policy.

Rules this module guards:

- The request is rebuilt the way ``GET /v1/runs/{id}/curl?signed=as_sent`` rebuilds it
  (:func:`appliance.store.reproduce.run_request`, :func:`appliance.core.delivery.
  build_request`, :func:`appliance.core.curl.curl_command`): the run's own body, the
  schedule's current URL and headers (Steeple keeps no per-attempt copy), the last
  attempt's signature. Never signed now: a viewer gets no signature Steeple did not send.
- Secret-bearing tenant headers are :data:`~appliance.core.secret_headers.MASK`ed in the
  header list as in the curl command (:func:`~appliance.core.secret_headers.looks_secret`).
- A response's headers are not stored (the ``attempts`` table keeps its status, latency
  and an excerpt): the page says so rather than showing none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from appliance import __version__
from appliance.core.curl import BodyNotShellSafe, curl_command
from appliance.core.retry import ExponentialBackoff, RetryPolicy
from appliance.core.runs import AttemptOutcome, RunState
from appliance.core.schedules import ScheduleSpec
from appliance.core.secret_headers import MASK, looks_secret
from appliance.core.signing import SignatureError
from appliance.errors import Conflict
from appliance.store.infra.connection import Connection
from appliance.store.reproduce import RunRequest, run_request
from appliance.store.runs import AttemptRecord, RunRecord
from appliance.store.schedules import get_schedule
from appliance.store.usecases.pages import RunPage, run_page

USER_AGENT: Final = f"Steeple/{__version__}"  # the dispatcher's (wiring/runtime.py)
NOT_STORED: Final = (
    "Steeple does not store response headers; the status, timing and an excerpt are kept."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SentRequest:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]  # secret-bearing tenant values masked
    body: str
    curl: str | None  # None: the body cannot go on a command line (``curl_problem``)
    curl_problem: str | None
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Inspected:
    page: RunPage
    request: SentRequest | None  # None: ``missing`` says why
    missing: str | None


def inspect_run(conn: Connection, *, tenant_id: str, run_id: str, now: int) -> Inspected:
    """The run page and its request as sent, read in one snapshot; NotFound as
    :func:`~appliance.store.usecases.pages.run_page`."""
    shown = run_page(conn, tenant_id=tenant_id, run_id=run_id)
    if not shown.attempts:
        return Inspected(page=shown, request=None, missing="No attempt yet: nothing was sent.")
    if get_schedule(conn, tenant_id=tenant_id, schedule_id=shown.run.schedule_id) is None:
        gone = "Its schedule was deleted: the request it sent is gone."
        return Inspected(page=shown, request=None, missing=gone)
    try:
        parts = run_request(conn, tenant_id=tenant_id, run_id=run_id, as_sent=True, now=now)
    except Conflict:
        gone = (
            "The signing secrets of its last attempt are gone:"
            " the request cannot be rebuilt as sent."
        )
        return Inspected(page=shown, request=None, missing=gone)
    try:
        return Inspected(page=shown, request=sent_request(parts), missing=None)
    except SignatureError:
        return Inspected(page=shown, request=None, missing="No signing secret to rebuild it with.")


def sent_request(parts: RunRequest) -> SentRequest:
    """``parts`` as the request went out, with its curl command. Raises SignatureError."""
    built = parts.build(user_agent=USER_AGENT)
    tenant = {name.lower() for name, _ in parts.headers}
    headers = tuple(
        (name, MASK if name.lower() in tenant and looks_secret(name) else value)
        for name, value in built.headers
    )
    try:
        command = curl_command(built, tenant_headers=tenant, timeout_seconds=parts.timeout_seconds)
        curl, problem = command.line, None
    except BodyNotShellSafe as exc:
        curl, problem = None, f"{exc}: no command line can carry it"
    return SentRequest(
        method=built.method.value,
        url=built.url,
        headers=headers,
        body=built.body.decode("utf-8", errors="replace"),
        curl=curl,
        curl_problem=problem,
        attempt=parts.attempt,
    )


def decision(run: RunRecord, attempts: Sequence[AttemptRecord], index: int) -> str:
    """Why attempt ``attempts[index]`` led where it did: the retry decision in words, from
    its outcome and what followed (the next attempt, or the run's state)."""
    attempt = attempts[index]
    later = index + 1 < len(attempts)
    answer = (
        f"HTTP {attempt.http_status}" if attempt.http_status else (attempt.error or "no answer")
    )
    match attempt.outcome:
        case None:
            return "In flight: no answer yet."
        case AttemptOutcome.OK:
            return f"{answer}: received; the run succeeded."
        case AttemptOutcome.STALE:
            return "Answered after its lease was taken back: recorded, it changed nothing."
        case AttemptOutcome.PERMANENT:
            reason = f" ({run.failure_reason})" if run.failure_reason and not later else ""
            return f"{answer}: not retried{reason}; the run failed."
        case AttemptOutcome.ABANDONED:
            first = "Taken back from its executor (lease lapsed or restart)"
        case _:
            first = f"{answer}: retryable"
    if later:
        return f"{first}; retried as attempt {attempts[index + 1].attempt}."
    if run.state is RunState.RETRY_WAIT:
        return f"{first}; the next attempt waits for its delay."
    if run.state is RunState.FAILED:
        return f"{first}, but the run failed ({run.failure_reason or 'exhausted'})."
    return f"{first}."


def payload_text(spec: ScheduleSpec) -> str:
    """The body every run sends (a template's text when templated), as text."""
    return spec.body.decode("utf-8", errors="replace")


def retry_lines(policy: RetryPolicy) -> list[tuple[str, str]]:
    """The retry policy as (term, value) lines: the API's `retry` object in words."""
    backoff = policy.backoff
    if isinstance(backoff, ExponentialBackoff):
        delays = (
            f"exponential: {seconds(backoff.initial_s)} × {backoff.factor:g},"
            f" at most {seconds(backoff.max_s)}"
        )
    else:
        delays = ", ".join(seconds(s) for s in backoff) + " (the last repeats)"
    lines = [
        ("Attempts", str(policy.max_attempts)),
        ("Delays", delays + "; ×0.8–1.2 at random"),
        ("Gives up after", f"{seconds(policy.window_ms // 1000)} from the occurrence"),
    ]
    if policy.retry_on_status is not None:
        lines.append(("Retries only", ", ".join(map(str, sorted(policy.retry_on_status)))))
    if policy.non_retryable_status:
        lines.append(("Never retries", ", ".join(map(str, sorted(policy.non_retryable_status)))))
    return lines


def seconds(value: int) -> str:
    """``45 s``, ``5 min``, ``2 h``, ``7 d``: the largest unit that divides ``value``."""
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if value and value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} s"
