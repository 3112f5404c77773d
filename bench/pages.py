"""pages: the web UI's server time per page at S schedules and R run rows (docs/ui.md).

Setup (not measured): one tenant holding all S schedules (written in bulk: the yearly
expressions of :mod:`bench.scale`, so nothing fires), R/S runs per schedule with one
attempt each, one in :data:`bench.scale.FAILED_EVERY` failed; an owner of the tenant and
an operator, signed in once each (argon2 is sign-in's cost, not a page's). Measured: the
app itself (API + UI blueprint, the same objects ``steeple serve`` builds) through Quart's
in-process test client, so the time is the server's — routing, session lookup, queries,
template rendering — with no network or HTTP parser. Each page is requested
``--requests`` times after a warm-up; a run's figure per page is the median of those,
in ms; the table shows the median of ``--runs`` runs and their spread. Pages that take an
id get a different random schedule or run each time.

``python -m bench.pages [--schedules 1000] [--run-rows 10000] [--requests 20] [--runs 3]
[--workdir DIR]``
"""

from __future__ import annotations

import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from quart_trio import QuartTrio

from appliance import __version__
from appliance.api.app import create_app
from appliance.clock import SystemClock
from appliance.core.addresses import AddressPolicy
from appliance.core.passwords import hash_password
from appliance.live.hub import EventHub
from appliance.store.infra.database import Database
from appliance.store.users import Role, create_user
from appliance.ui.app import register_ui
from appliance.ui.context import UiContext
from bench import seed
from bench.report import Figures, base_parser, publish, repeat
from bench.scale import FAILED_EVERY, SCALE_CRONS

PASSWORD = "bench password, long enough"
OWNER = "owner@bench.example"
OPERATOR = "ops@bench.example"
WARM_UP = 3


def build(data_dir: Path, *, schedules: int, runs: int) -> dict[str, Any]:
    """The data directory with one tenant's schedules and runs, and its two users."""
    now = int(time.time() * 1000)
    db = seed.open_store(data_dir)
    tenant = seed.new_tenant(db, name="bench", now=now)
    hashed = hash_password(PASSWORD)
    for email, tenant_id, operator in ((OWNER, tenant.tenant_id, False), (OPERATOR, None, True)):
        db.write_now(create_user, email=email, tenant_id=tenant_id, role=Role.OWNER,
                     operator=operator, password_hash=hashed, now=now)  # fmt: skip
    db.close()
    conn = seed.bulk_connection(seed.db_path(data_dir))
    pairs = [(c, z) for c in SCALE_CRONS for z in seed.MIXED_ZONES]
    with seed.indexes_deferred(conn, ("schedules", "job_runs", "attempts")):
        ids = seed.bulk_schedules(conn, tenant_ids=[tenant.tenant_id], crons=pairs, n=schedules,
                                  target_url="http://127.0.0.1:9/hook", now=now)  # fmt: skip
        rows = seed.bulk_runs(conn, tenant_of=[tenant.tenant_id] * len(ids), schedule_ids=ids,
                              per_schedule=max(1, runs // max(schedules, 1)), now=now,
                              failed_every=FAILED_EVERY)  # fmt: skip
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    sample = [
        str(r[0]) for r in conn.execute("SELECT id FROM job_runs ORDER BY random() LIMIT 200")
    ]
    conn.close()
    return {"schedule_ids": ids, "run_ids": sample, "run_rows": rows}


def app_for(db: Database) -> QuartTrio:
    """The app ``steeple serve`` builds (API + UI), without the engine behind it."""

    async def allow(_: str) -> None:
        return None

    clock, policy = SystemClock(), AddressPolicy()
    app = create_app(db=db, clock=clock, nudge=lambda: None, check_destination=allow,
                     policy=policy, version=__version__, event_hub=EventHub(db),
                     replay_rate_per_second=100)  # fmt: skip
    register_ui(app, UiContext(db=db, clock=clock, nudge=lambda: None, check_destination=allow,
                               policy=policy, replay_rate_per_second=100, version=__version__,
                               event_hub=app.extensions["steeple"].event_hub))  # fmt: skip
    return app


async def signed_in(app: QuartTrio, email: str) -> Any:
    client = app.test_client()
    form = await (await client.get("/login")).get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', form)
    fields = {"email": email, "password": PASSWORD, "csrf_token": token.group(1) if token else ""}
    answer = await client.post("/login", form=fields)
    assert answer.status_code == 302, await answer.get_data(as_text=True)
    return client


def pages(built: dict[str, Any], rng: random.Random) -> dict[str, tuple[str, Callable[[], str]]]:
    """Page name → (who asks, the path of one request)."""
    sids, rids = built["schedule_ids"], built["run_ids"]
    tenant: dict[str, Callable[[], str]] = {
        "dashboard": lambda: "/",
        "schedules": lambda: "/schedules",
        "schedules_filtered": lambda: "/schedules?q=job+1&status=active",
        "schedule": lambda: f"/schedules/{rng.choice(sids)}",
        "schedule_edit": lambda: f"/schedules/{rng.choice(sids)}/edit",
        "run": lambda: f"/runs/{rng.choice(rids)}",
        "events": lambda: "/events",
        "failed": lambda: "/failed",
        "keys": lambda: "/settings/keys",
        "secrets": lambda: "/settings/secrets",
        "users": lambda: "/settings/users",
        "guide": lambda: "/guide",
    }
    operator: dict[str, Callable[[], str]] = {
        "admin_health": lambda: "/admin/health",
        "admin_tenants": lambda: "/admin/tenants",
    }
    return {
        **{name: (OWNER, path) for name, path in tenant.items()},
        **{name: (OPERATOR, path) for name, path in operator.items()},
    }


async def _measure(data_dir: Path, built: dict[str, Any], requests: int, seed_: int) -> Figures:
    rng = random.Random(seed_)
    db = Database.open(seed.db_path(data_dir))
    try:
        app = app_for(db)
        clients = {email: await signed_in(app, email) for email in (OWNER, OPERATOR)}
        figures: Figures = {}
        for name, (email, path) in pages(built, rng).items():
            client = clients[email]
            times = []
            for i in range(WARM_UP + requests):
                began = time.perf_counter()
                answer = await client.get(path())
                await answer.get_data()
                elapsed = (time.perf_counter() - began) * 1000
                if answer.status_code != 200:
                    raise RuntimeError(f"{name}: {answer.status_code}")
                if i >= WARM_UP:
                    times.append(elapsed)
            figures[f"{name}_ms"] = statistics.median(times)
        return figures
    finally:
        db.close()


def pages_once(data_dir: Path, built: dict[str, Any], *, requests: int, seed_: int) -> Figures:
    return trio.run(_measure, data_dir, built, requests, seed_)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0] if __doc__ else "pages")
    parser.add_argument("--schedules", type=int, default=1_000)
    parser.add_argument("--run-rows", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        data_dir = Path(tmp) / "data"
        began = time.perf_counter()
        built = build(data_dir, schedules=args.schedules, runs=args.run_rows)
        print(f"  built {args.schedules} schedules, {built['run_rows']} runs in"
              f" {time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
        runs = repeat(
            args.runs,
            lambda i: pages_once(data_dir, built, requests=args.requests, seed_=i),
        )
    params = {"schedules": args.schedules, "run_rows": built["run_rows"],
              "requests": args.requests}  # fmt: skip
    publish("pages", params, {"server ms per page (median of requests)": runs})


if __name__ == "__main__":
    main()
