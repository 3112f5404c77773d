"""The peer under test: APScheduler 3.11 in its own process, configured as a person would
for durable HTTP jobs — ``AsyncIOScheduler``, ``SQLAlchemyJobStore`` on a SQLite file,
each job an ``httpx.AsyncClient`` POST to the sink.

``python -m bench.apscheduler_runner --db FILE --url URL --jobs N (--at EPOCH_S | --every-second)
[--targets FILE]`` adds N jobs to a *paused* scheduler (a date trigger at ``--at``, or a
cron trigger every second; job ``i`` posts to line ``i`` of ``--targets``, else to
``--url``), prints ``ready``, resumes, and runs until SIGTERM.

Configuration chosen to give APScheduler its best chance not to lose work (its defaults
would drop late runs): ``misfire_grace_time=None`` (run however late), ``coalesce=False``,
``max_instances`` high. In-flight POSTs are bounded at 32 (Steeple's default dispatch
concurrency; httpx stalls when thousands queue on one pool). Each POST
carries the headers the sink records: ``X-Idempotency-Key`` = ``<job id>@<scheduled_for>``,
``X-Attempt: 1``, ``X-Scheduled-For`` = the run time APScheduler scheduled, which the job
learns through a context variable set by :class:`TimedExecutor` (APScheduler does not
pass it to the job).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import datetime
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger

CONCURRENCY = 32
RUN_TIME: contextvars.ContextVar[datetime.datetime] = contextvars.ContextVar("run_time")
_state: dict[str, Any] = {}


class TimedExecutor(AsyncIOExecutor):  # type: ignore[misc]
    """One task per run time, each seeing its own scheduled time in :data:`RUN_TIME`."""

    def _do_submit_job(self, job: Any, run_times: list[datetime.datetime]) -> None:
        for run_time in run_times:
            token = RUN_TIME.set(run_time)  # create_task copies the current context
            try:
                super()._do_submit_job(job, [run_time])
            finally:
                RUN_TIME.reset(token)


def scheduled_text(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def deliver(name: str, url: str | None = None) -> None:
    """The job: one POST to the sink (to ``url``, else ``--url``)."""
    text = scheduled_text(RUN_TIME.get())
    headers = {
        "X-Idempotency-Key": f"{name}@{text}",
        "X-Attempt": "1",
        "X-Scheduled-For": text,
        "Content-Type": "application/json",
    }
    async with _state["limit"]:
        response = await _state["client"].post(url or _state["url"], content=b'{"bench":true}',
                                               headers=headers)  # fmt: skip
        response.raise_for_status()


async def run(args: argparse.Namespace) -> None:
    _state["url"] = args.url
    _state["limit"] = asyncio.Semaphore(CONCURRENCY)
    _state["client"] = httpx.AsyncClient(trust_env=False, timeout=10)
    scheduler = AsyncIOScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{args.db}")},
        executors={"default": TimedExecutor()},
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1000},
        timezone=datetime.UTC,
    )
    scheduler.start(paused=True)
    if args.every_second:
        trigger: Any = CronTrigger(second="*", timezone=datetime.UTC)
    else:
        trigger = DateTrigger(
            run_date=datetime.datetime.fromtimestamp(args.at, datetime.UTC), timezone=datetime.UTC
        )
    urls: list[str] | None = args.urls
    for i in range(args.jobs):
        job_args = [f"j{i}", urls[i]] if urls else [f"j{i}"]
        scheduler.add_job(deliver, trigger, args=job_args, id=f"j{i}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    scheduler.resume()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await stop.wait()
    logging.getLogger("apscheduler").setLevel(logging.CRITICAL)  # cancelled jobs at exit
    scheduler.shutdown(wait=False)
    await _state["client"].aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--at", type=float, help="burst: the epoch second every job fires")
    parser.add_argument("--every-second", action="store_true", help="steady: cron every second")
    parser.add_argument("--targets", help="job i posts to line i (else --url)")
    args = parser.parse_args()
    args.urls = Path(args.targets).read_text().split() if args.targets else None
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
