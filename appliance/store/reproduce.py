"""What it takes to rebuild a request outside the engine: a run's, for ``GET
/v1/runs/{id}/curl``, and a schedule's probe, for ``POST /v1/schedules/{id}/dedupe-test``
(docs/receiver.md, "Resend, curl and the dedupe test").

Rules this module guards:

- The body is the run's own (fixed when it was materialised); the URL, the method and the
  tenant's headers are the schedule's current ones, which is what the run's next attempt sends
  (Steeple keeps no copy of them per attempt).
- **Signed now**: the tenant's secrets active now. **As sent**: the last attempt's
  signing second (``attempts.signed_at``; for an attempt that never finished, the second
  it started, when it was signed) and the secrets that were active during that second,
  as far as Steeple still holds them: so ``X-Signature`` comes out as it went out (a
  rotation within that very second may add one entry, which verifies all the same).
- A run of a deleted schedule is not reproduced (Conflict), nor a run never attempted
  or whose secrets are all gone "as sent".
- A probe is the schedule's current request signed with the secrets active now, both
  read in one snapshot (:func:`probe_inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.core.delivery import RESEND_HEADER, DeliveryRequest, build_request
from appliance.core.schedules import Method, Schedule
from appliance.errors import Conflict, NotFound, StoreError
from appliance.store.active_secrets import MAX_ACTIVE_SECRETS, active_secrets
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection
from appliance.store.runs import RunRecord, get_run, list_attempts
from appliance.store.schedules import get_schedule, require_schedule


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """A run's request parts, and the secrets and second to sign it with."""

    run: RunRecord
    target_url: str
    headers: tuple[tuple[str, str], ...]  # the tenant's
    body: bytes
    content_type: str
    timeout_seconds: int
    attempt: int  # the last attempt's number; 1 for a run never attempted
    signed_at_s: int
    secrets: tuple[str, ...]
    method: Method = Method.POST

    def build(self, *, user_agent: str) -> DeliveryRequest:
        """The request these parts make, signed as they say (the API's curl and the run
        page's inspector). Raises SignatureError when there is no secret."""
        run = self.run
        return build_request(
            target_url=self.target_url,
            body=self.body,
            content_type=self.content_type,
            tenant_headers=self.headers,
            schedule_id=run.schedule_id,
            run_id=run.id,
            attempt=self.attempt,
            scheduled_for_ms=run.scheduled_for,
            idempotency_key=run.idempotency_key,
            secrets=self.secrets,
            signed_at_s=self.signed_at_s,
            user_agent=user_agent,
            marks=() if run.resend_of is None else ((RESEND_HEADER, run.resend_of),),
            method=self.method,
        )


# Active at some moment of one second (the signature names only the second).
_SECRETS_AT: Final = (
    "SELECT secret FROM signing_secrets WHERE tenant_id = :tenant AND created_at < :end"
    " AND (revoked_at IS NULL OR revoked_at > :start)"
    " AND (expires_at IS NULL OR expires_at > :start)"
    " ORDER BY created_at DESC, rowid DESC LIMIT :most"
)


def run_and_schedule(
    conn: Connection, *, tenant_id: str, run_id: str, gone: str
) -> tuple[RunRecord, Schedule]:
    """The tenant's run and its live schedule: NotFound for another tenant's or no run,
    Conflict (saying ``gone``) when its schedule was deleted."""
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    schedule = get_schedule(conn, tenant_id=tenant_id, schedule_id=run.schedule_id)
    if schedule is None:
        raise Conflict(f"run {run_id} belongs to a deleted schedule; {gone}")
    return run, schedule


def run_request(
    conn: Connection, *, tenant_id: str, run_id: str, as_sent: bool, now: int
) -> RunRequest:
    """The tenant's run ``run_id`` ready to rebuild, signed now or as its last attempt
    was. NotFound; Conflict (see the module rules)."""
    run, schedule = run_and_schedule(
        conn, tenant_id=tenant_id, run_id=run_id, gone="its request is gone"
    )
    attempts = list_attempts(conn, run_id=run_id)
    last = attempts[-1] if attempts else None
    if not as_sent:
        signed_at_s = now // 1000
        secrets = tuple(active_secrets(conn, tenant_id=tenant_id, now=now))
    elif last is None:
        raise Conflict(f"run {run_id} has no attempt yet: nothing was sent; ask for signed=now")
    else:
        signed_at_s = last.signed_at if last.signed_at is not None else last.started_at // 1000
        secrets = _secrets_at(conn, tenant_id, signed_at_s)
        if not secrets:
            raise Conflict(
                f"the signing secrets of run {run_id}'s last attempt are gone; ask for signed=now"
            )
    body, content_type = _body(conn, run_id)
    spec = schedule.spec
    return RunRequest(
        run=run,
        target_url=spec.target_url,
        headers=spec.headers,
        body=body,
        content_type=content_type,
        timeout_seconds=spec.timeout_seconds,
        attempt=1 if last is None else last.attempt,
        signed_at_s=signed_at_s,
        secrets=secrets,
        method=spec.method,
    )


def probe_inputs(
    conn: Connection, *, tenant_id: str, schedule_id: str, now: int
) -> tuple[Schedule, list[str]]:
    """The tenant's live schedule (NotFound otherwise) and the tenant's signing secrets
    active at ``now``, newest first, read together: the probe is signed with the secrets
    of the same snapshot its request is read from (an empty list: none is active)."""
    schedule = require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    return schedule, active_secrets(conn, tenant_id=tenant_id, now=now)


def _secrets_at(conn: Connection, tenant_id: str, second: int) -> tuple[str, ...]:
    """The tenant's secrets active during unix second ``second``, newest first."""
    span = {"tenant": tenant_id, "start": second * 1000, "end": second * 1000 + 1000}
    found = conn.execute(_SECRETS_AT, {**span, "most": MAX_ACTIVE_SECRETS})
    return tuple(rows.text(secret) for (secret,) in found)


def _body(conn: Connection, run_id: str) -> tuple[bytes, str]:
    row = conn.execute(
        "SELECT b.body, b.content_type FROM job_runs r JOIN bodies b ON b.digest = r.body_digest"
        " WHERE r.id = ?",
        (run_id,),
    ).fetchone()
    if row is None:
        raise StoreError(f"run {run_id} has no body")
    return rows.blob(row[0]), rows.text(row[1])
