"""claims: the claim's own cost — CPU per claim while a backlog of due runs is drained,
for one tenant and for many. In-process, no HTTP.

Setup (not measured): ``--tenants`` tenants with one schedule each and a backlog of
``--backlog`` pending runs due now, spread evenly over the tenants (all due at the same
instant: the burst case). Measured: claims of ``--batch`` runs (the dispatcher's claim
batch) with the appliance's default tenant cap (half of 32 slots), one durable write
transaction each (``Database.write_now``, WAL + synchronous=FULL) as the dispatcher runs
them, until the backlog is gone. After each claim its runs are finished by a plain
``UPDATE`` (not measured), as completions would free the slots.

``python -m bench.claims [--backlogs 1000,10000] [--tenants 1,50] [--runs 3]``
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.store.claims import claim_runs
from appliance.store.infra.connection import Connection
from appliance.store.infra.database import Database
from appliance.store.materialise import insert_runs, store_body
from bench import seed
from bench.report import Figures, base_parser, publish, repeat

TENANT_CAP = 16  # the default: half of the default 32 slots
LEASE_MS = 30_000


def prepare(path: Path, *, backlog: int, tenants: int, now: int) -> None:
    db = Database.open(path)
    try:
        owners = []
        for i in range(tenants):
            tenant = seed.new_tenant(db, name=f"t{i}", now=now).tenant_id
            spec = seed.spec(target_url="http://127.0.0.1:9/hook", cron="0 0 1 1 *", name="c")
            (schedule,) = seed.create_schedules(db, tenant_id=tenant, specs=[spec], now=now)
            owners.append((tenant, schedule))

        def fill(conn: Connection) -> None:
            digest = store_body(conn, content_type=seed.CONTENT_TYPE, body=seed.BODY)
            runs = [
                occurrence_run(
                    schedule_id=owners[k % tenants][1],
                    tenant_id=owners[k % tenants][0],
                    schedule_version=1,
                    scheduled_for=(now - now % 1000) - k * 1000,
                    due_at=now,
                    state=RunState.PENDING,
                    trigger=Trigger.SCHEDULE,
                    body_digest=digest,
                )
                for k in range(backlog)
            ]
            insert_runs(conn, runs, now=now)

        db.write_now(fill)
    finally:
        db.close()


def drain(path: Path, *, batch: int, now: int) -> Figures:
    db = Database.open(path)
    claims = claimed = 0
    cpu = wall = 0.0
    try:
        while True:
            cpu_began, wall_began = time.process_time(), time.perf_counter()
            result = db.write_now(
                claim_runs,
                owner="inc_bench",
                now=now,
                lease_ms=LEASE_MS,
                limit=batch,
                tenant_cap=TENANT_CAP,
            )
            cpu += time.process_time() - cpu_began
            wall += time.perf_counter() - wall_began
            if not result.runs:
                break
            claims += 1
            claimed += len(result.runs)
            db.write_now(_finish_running)
    finally:
        db.close()
    return {
        "claims": claims,
        "claimed": claimed,
        "cpu_ms_per_claim": 1000 * cpu / max(claims, 1),
        "wall_ms_per_claim": 1000 * wall / max(claims, 1),
    }


def _finish_running(conn: Connection) -> None:
    conn.execute("UPDATE job_runs SET state = 'succeeded' WHERE state = 'running'")


def claim_runs_for(
    workdir: Path, *, backlog: int, tenants: int, batch: int, runs: int
) -> list[Figures]:
    def one(i: int) -> Figures:
        path = workdir / f"claims-{backlog}-{tenants}-{i}.db"
        now = int(time.time() * 1000)
        prepare(path, backlog=backlog, tenants=tenants, now=now)
        return drain(path, batch=batch, now=now + 1)

    return repeat(runs, one)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--backlogs", default="1000,10000")
    parser.add_argument("--tenants", default="1,50")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    groups = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for backlog in [int(s) for s in args.backlogs.split(",") if s]:
            for tenants in [int(s) for s in args.tenants.split(",") if s]:
                name = f"claims: backlog {backlog}, {tenants} tenants"
                print(name, flush=True)
                groups[name] = claim_runs_for(
                    Path(tmp), backlog=backlog, tenants=tenants, batch=args.batch, runs=args.runs
                )
    publish(
        "claims", {"backlogs": args.backlogs, "tenants": args.tenants, "batch": args.batch}, groups
    )


if __name__ == "__main__":
    main()
