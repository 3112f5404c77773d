"""scale: S schedules and R run rows → p50/p99 of the main list/detail API calls, RSS of
the serving process, database bytes per run row.

Setup (not measured): 10 tenants, S schedules written in bulk (fixed yearly/half-yearly
expressions in mixed zones, so nothing fires during the benchmark), R/S runs per schedule
with one attempt each, one in :data:`FAILED_EVERY` failed (HTTP 500), the rest succeeded
(:func:`bench.seed.bulk_runs`). Measured against a
running appliance, one keep-alive ``http.client`` connection, sequential requests of the
first tenant with random ids (so the page cache is exercised, not one hot row):
``GET /v1/schedules?limit=50`` (the first page 20 % of the time, else a page after a
random schedule, with the cursor the API would return there), ``GET /v1/schedules/{id}``,
``GET /v1/schedules/{id}/runs``, ``GET /v1/runs/{id}``, and the dead-letter view
``GET /v1/runs?state=failed`` (``list_failed``: the first page half of the time, else one
of its next four pages by the cursors the API returned). Latency is client-observed wall
time (the stdlib client adds ≈ 0.1 ms). RSS is VmRSS of the appliance after the requests.
``*_cpu_ms``: the appliance's CPU (all threads) per request of that endpoint, from
``/proc``. Bytes per run row: ``dbstat`` pages of ``job_runs`` (+ its indexes) and ``attempts``.

``python -m bench.scale [--schedules 1000000] [--run-rows 10000000] [--requests 500] [--runs 3]
[--data-dir DIR] [--profile]``: ``--data-dir`` keeps the seeded data (``DIR/built.json``
says what it holds) and reuses it when the sizes match, so before/after runs of one size
meet the same file; ``--profile`` adds one run with the appliance under pyinstrument.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import apsw

from appliance.api.pagination import encode_cursor
from appliance.store.infra.database import Database
from bench import seed
from bench.processes import Appliance, cpu_seconds, rss_bytes
from bench.report import Figures, base_parser, percentile, publish, repeat

SCALE_CRONS = ("0 0 1 1 *", "30 6 1 1 *", "0 12 1 7 *", "15 4 2 1 *")
TENANTS = 10
START_TIMEOUT_S = 600
IDLE_CPU_SHARE = 0.05  # of one core, over a second
IDLE_SECONDS = 2
FAILED_EVERY = 100  # one run in 100 failed: 100k failed runs among 10M


def build(data_dir: Path, *, schedules: int, runs: int) -> dict[str, object]:
    now = int(time.time() * 1000)
    db = seed.open_store(data_dir)
    tenants = [seed.new_tenant(db, name=f"t{i}", now=now) for i in range(TENANTS)]
    db.close()
    conn = seed.bulk_connection(seed.db_path(data_dir))
    pairs = [(c, z) for c in SCALE_CRONS for z in seed.MIXED_ZONES]
    began = time.perf_counter()
    with seed.indexes_deferred(conn, ("schedules", "job_runs", "attempts")):
        ids = seed.bulk_schedules(
            conn,
            tenant_ids=[t.tenant_id for t in tenants],
            crons=pairs,
            n=schedules,
            target_url="http://127.0.0.1:9/hook",
            now=now,
        )
        soonest = conn.execute("SELECT MIN(next_fire_at) FROM schedules").fetchone()
        assert soonest is not None and soonest[0] > now + 3_600_000, "scale schedules would fire"
        tenant_of = [tenants[i % TENANTS].tenant_id for i in range(len(ids))]
        per = max(1, runs // max(schedules, 1))
        rows = seed.bulk_runs(
            conn,
            tenant_of=tenant_of,
            schedule_ids=ids,
            per_schedule=per,
            now=now,
            failed_every=FAILED_EVERY,
        )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    print(
        f"  built {schedules} schedules, {rows} runs in {time.perf_counter() - began:.0f} s",
        flush=True,
    )
    first = tenants[0]
    mine = [sid for sid, tid in zip(ids, tenant_of, strict=True) if tid == first.tenant_id]
    return {"api_key": first.api_key, "schedule_ids": mine, "run_rows": rows}


def bytes_per_run(path: Path, run_rows: int) -> Figures:
    conn = apsw.Connection(str(path))
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        sizes = {str(name): size for name, size in rows if isinstance(size, int)}
    except apsw.SQLError:
        sizes = {}
    finally:
        conn.close()
    runs_objects = (
        "job_runs",
        "sqlite_autoindex_job_runs_1",
        "sqlite_autoindex_job_runs_2",
        "job_runs_claimable_tenant",
        "job_runs_leases",
        "job_runs_tenant_state_time",
    )
    run_bytes = sum(sizes.get(name, 0) for name in runs_objects)
    attempt_bytes = sizes.get("attempts", 0)
    total = path.stat().st_size
    return {
        "db_bytes_per_run_row": run_bytes / max(run_rows, 1),
        "db_bytes_per_attempt_row": attempt_bytes / max(run_rows, 1),
        "db_file_bytes_per_run_row": total / max(run_rows, 1),
        "db_file_mb": total / 2**20,
    }


class Client:
    def __init__(self, base_url: str, api_key: str) -> None:
        host, port = base_url.removeprefix("http://").rstrip("/").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.headers = {"Authorization": f"Bearer {api_key}"}

    def get(self, path: str) -> tuple[float, dict[str, object]]:
        began = time.perf_counter()
        self.conn.request("GET", path, headers=self.headers)
        response = self.conn.getresponse()
        body = response.read()
        elapsed = (time.perf_counter() - began) * 1000
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
        return elapsed, json.loads(body)


def measure(
    client: Client, make_path: Callable[[], str], n: int, *, pid: int
) -> tuple[list[float], float]:
    """Latencies (ms) of ``n`` requests, and the appliance's CPU ms per request meanwhile
    (all its threads; less sensitive than latency to other load on a shared machine)."""
    for _ in range(min(20, n)):  # warm-up: connection, code paths
        client.get(make_path())
    cpu = cpu_seconds(pid)
    latencies = [client.get(make_path())[0] for _ in range(n)]
    return latencies, (cpu_seconds(pid) - cpu) * 1000 / n


def scale_once(
    data_dir: Path,
    built: dict[str, object],
    *,
    requests: int,
    seed_: int,
    prefix: Sequence[str] = (),
) -> Figures:
    rng = random.Random(seed_)
    ids = built["schedule_ids"]
    assert isinstance(ids, list)
    api_key = str(built["api_key"])
    with _serving(data_dir, prefix) as app:
        client = Client(app.base_url, api_key)
        run_ids: list[str] = []

        def list_path() -> str:
            if rng.random() < 0.2:
                return "/v1/schedules?limit=50"
            # The cursor a page ending at a random schedule returns: pages from anywhere.
            return f"/v1/schedules?limit=50&cursor={encode_cursor('sch', rng.choice(ids))}"

        for _ in range(20):  # collect run ids to sample from
            _, runs = client.get(f"/v1/schedules/{rng.choice(ids)}/runs")
            items = runs["items"]
            assert isinstance(items, list)
            run_ids += [str(r["id"]) for r in items]
        failed_pages = dead_letter_cursors(client, pages=4)

        def failed_path() -> str:
            if rng.random() < 0.5 or not failed_pages:
                return "/v1/runs?state=failed"
            return f"/v1/runs?state=failed&cursor={rng.choice(failed_pages)}"

        paths: dict[str, Callable[[], str]] = {
            "list_schedules": list_path,
            "get_schedule": lambda: f"/v1/schedules/{rng.choice(ids)}",
            "list_runs": lambda: f"/v1/schedules/{rng.choice(ids)}/runs",
            "get_run": lambda: f"/v1/runs/{rng.choice(run_ids)}",
            "list_failed": failed_path,
        }
        timings = {
            name: measure(client, path, requests, pid=app.pid) for name, path in paths.items()
        }
        rss = rss_bytes(app.pid)
        client.conn.close()
    figures: Figures = {}
    for name, (values, cpu_ms) in timings.items():
        figures[f"{name}_p50_ms"] = percentile(values, 50)
        figures[f"{name}_p99_ms"] = percentile(values, 99)
        figures[f"{name}_cpu_ms"] = cpu_ms
    figures["rss_mb"] = rss / 2**20
    return figures


def dead_letter_cursors(client: Client, *, pages: int) -> list[str]:
    """The cursors of the dead-letter view's next ``pages`` pages, as the API returns them."""
    cursors: list[str] = []
    path = "/v1/runs?state=failed"
    for _ in range(pages):
        _, page = client.get(path)
        cursor = page["next_cursor"]
        if not isinstance(cursor, str):
            break
        cursors.append(cursor)
        path = f"/v1/runs?state=failed&cursor={cursor}"
    return cursors


@contextlib.contextmanager
def _serving(data_dir: Path, prefix: Sequence[str]) -> Iterator[Appliance]:
    """The appliance, once its start-up work is over (see :func:`wait_until_idle`)."""
    app = Appliance(data_dir, prefix=prefix)
    try:
        app.start(timeout=START_TIMEOUT_S)
        wait_until_idle(app.pid, timeout_s=START_TIMEOUT_S)
        yield app
    finally:
        app.stop()


def wait_until_idle(pid: int, *, timeout_s: float) -> float:
    """Seconds until the appliance's CPU stays under :data:`IDLE_CPU_SHARE` of a core for
    :data:`IDLE_SECONDS` in a row. It answers HTTP before its start-up work ends (the
    database check reads the whole file beside the services: ≈ 30 s at 1M/10M; the first
    retention pass), and this benchmark measures the API in steady state."""
    began = time.monotonic()
    quiet = 0
    while quiet < IDLE_SECONDS and time.monotonic() - began < timeout_s:
        cpu = cpu_seconds(pid)
        time.sleep(1)
        quiet = quiet + 1 if cpu_seconds(pid) - cpu < IDLE_CPU_SHARE else 0
    return time.monotonic() - began


def prepared(data_dir: Path, *, schedules: int, runs: int) -> dict[str, object]:
    """The data built in ``data_dir`` earlier for these sizes, or build it now."""
    record = data_dir / "built.json"
    wanted = {"schedules": schedules, "runs": runs}
    if record.exists():
        saved = json.loads(record.read_text())
        if saved["sizes"] == wanted:
            print(f"  reusing {data_dir}", flush=True)
            return dict(saved["built"])
        raise SystemExit(f"{data_dir} holds {saved['sizes']}, not {wanted}: pick another dir")
    print(f"building {schedules} schedules / {runs} runs", flush=True)
    built = build(data_dir / "data", schedules=schedules, runs=runs)
    record.write_text(json.dumps({"sizes": wanted, "built": built}))
    return built


def _profiler(out: Path) -> tuple[str, ...]:
    return ("-m", "pyinstrument", "--renderer", "text", "--show-all", "-o", str(out), "-m")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument(
        "--run-rows",
        "--runs-rows",
        dest="run_rows",
        type=int,
        default=10_000_000,
        help="run rows (10 per schedule by default)",
    )
    parser.add_argument("--requests", type=int, default=500, help="per endpoint per run")
    parser.add_argument("--data-dir", type=Path, help="keep the seeded data here and reuse it")
    parser.add_argument("--profile", action="store_true", help="one extra run under pyinstrument")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        root = args.data_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(dir=args.workdir))
        )
        root.mkdir(parents=True, exist_ok=True)
        built = prepared(root, schedules=args.schedules, runs=args.run_rows)
        data_dir = root / "data"
        Database.open(seed.db_path(data_dir)).close()  # the appliance's own open path works
        runs = repeat(
            args.runs, lambda i: scale_once(data_dir, built, requests=args.requests, seed_=i)
        )
        storage = bytes_per_run(seed.db_path(data_dir), int(str(built["run_rows"])))
        for run in runs:
            run.update(storage)
        extra = {}
        if args.profile:
            out = (
                Path(__file__).resolve().parent / "results" / f"scale-{args.schedules}-profile.txt"
            )
            out.parent.mkdir(exist_ok=True)
            scale_once(data_dir, built, requests=args.requests, seed_=99, prefix=_profiler(out))
            extra["profile"] = str(out)
    params = {"schedules": args.schedules, "run_rows": built["run_rows"], "requests": args.requests}
    publish("scale", params, {f"scale {args.schedules} schedules": runs}, extra=extra)


if __name__ == "__main__":
    main()
