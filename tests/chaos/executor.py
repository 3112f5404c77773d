"""A bare executor process for the chaos suite: the engine without the lock file or HTTP.

``python -m tests.chaos.executor --db PATH [options]`` registers its own incarnation and
runs the real planner, dispatcher (with heartbeats) and reaper on the database file, wired
as ``appliance.runtime`` wires them — but it takes **no lock file**, so several of them
(or one beside a zombie) can race on one file, which the appliance itself refuses. Lease,
heartbeat and margin are options, so a lease can lapse in seconds rather than 30.

It prints ``ready <incarnation id>`` once its services run, and stops on SIGTERM.
Scenarios kill it (SIGKILL), freeze it (SIGSTOP/SIGCONT), or let it finish.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

import trio

from appliance.clock import SystemClock
from appliance.core.addresses import AddressPolicy
from appliance.engine.dispatcher import DispatchConfig, Dispatcher
from appliance.engine.planner import Planner, PlannerConfig
from appliance.engine.reaper import Reaper, ReaperConfig
from appliance.engine.transport import build_client
from appliance.engine.wakeup import Wakeup
from appliance.store.database import Database
from appliance.store.incarnations import register_incarnation


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tests.chaos.executor")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--lease-ms", type=int, default=30_000)
    parser.add_argument("--heartbeat-ms", type=int, default=10_000)
    parser.add_argument("--margin-ms", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-planner", action="store_true")
    parser.add_argument("--no-reaper", action="store_true")
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    clock = SystemClock()
    db = Database.open(args.db)
    try:
        incarnation = await db.write(register_incarnation, pid=os.getpid(), now=clock.now_ms())
        planner_wakeup, dispatcher_wakeup = Wakeup(), Wakeup()
        policy = AddressPolicy.parse(("127.0.0.0/8",))
        async with build_client(policy) as client, trio.open_nursery() as nursery:
            if not args.no_planner:
                planner = Planner(
                    db=db,
                    clock=clock,
                    wakeup=planner_wakeup,
                    on_planned=dispatcher_wakeup.nudge,
                    config=PlannerConfig(max_sleep_s=1.0),  # others move cursors too
                )
                await nursery.start(planner.run)
            dispatcher = Dispatcher(
                db=db,
                clock=clock,
                client=client,
                incarnation_id=incarnation,
                wakeup=dispatcher_wakeup,
                config=DispatchConfig(
                    concurrency=args.concurrency,
                    lease_ms=args.lease_ms,
                    heartbeat_ms=args.heartbeat_ms,
                    margin_ms=args.margin_ms,
                    max_sleep_s=1.0,  # other processes plan and reclaim: look often
                    user_agent="Steeple/chaos",
                ),
            )
            await nursery.start(dispatcher.run)
            if not args.no_reaper:
                reaper = Reaper(
                    db=db,
                    clock=clock,
                    on_reclaimed=dispatcher_wakeup.nudge,
                    config=ReaperConfig(max_sleep_s=0.5),  # others' leases wake nobody here
                )
                await nursery.start(reaper.run)
            with trio.open_signal_receiver(signal.SIGTERM) as signals:
                print(f"ready {incarnation}", flush=True)
                async for _ in signals:
                    break
            nursery.cancel_scope.cancel()
    finally:
        db.close()


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    trio.run(_serve, _arguments(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
