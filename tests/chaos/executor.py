"""A bare executor process for the chaos suite: the engine without the lock file or HTTP.

``python -m tests.chaos.executor --db PATH [options]`` registers its own incarnation and
runs the real planner, dispatcher (with heartbeats) and reaper on the database file, built
by ``build_engine`` as ``appliance.wiring.runtime`` builds them — but it takes **no lock file**,
so several of them (or one beside a zombie) can race on one file, which the appliance
itself refuses. Lease, heartbeat and margin are options, so a lease can lapse in seconds
rather than 30.

It prints ``ready <incarnation id>`` once its services run, and stops on SIGTERM.
Scenarios drive it through :class:`Executor`: kill it (SIGKILL), freeze it
(:meth:`Executor.freeze` — SIGSTOP at an instant it holds no database lock, SIGCONT on
:meth:`Executor.thaw`), or stop it (SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import apsw
import trio

from appliance.clock import SystemClock
from appliance.core.addresses import AddressPolicy
from appliance.engine.assembly import EngineConfig, build_engine
from appliance.engine.delivery import DeliveryClient
from appliance.engine.dispatcher import DispatchConfig
from appliance.engine.reaper import ReaperConfig
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.usecases.plan_pass import PlannerConfig

ROOT = Path(__file__).resolve().parents[2]


class Executor:
    """One executor process, started and waited for."""

    def __init__(self, db: Path, *options: str, wait: bool = True) -> None:
        """Spawn it; with ``wait``, return once it is ready (else call :meth:`ready`)."""
        self.db = db
        self.incarnation_id = ""
        # A file, not a pipe: a long soak must never block on a full stderr pipe.
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            "w+", prefix="executor-", suffix=".log", dir=db.parent
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.executor", "--db", str(db), *options],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        if wait:
            self.ready()

    def ready(self) -> Executor:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if line[:1] != ["ready"]:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"executor did not start: {line} {self.logs()}")
        self.incarnation_id = line[1]
        return self

    def freeze(self) -> None:
        """SIGSTOP, at an instant it holds no SQLite lock: a process frozen inside a write
        transaction would stall every other writer on the file — a different failure than
        a zombie's, which this suite does not simulate."""
        for _ in range(200):
            os.kill(self.proc.pid, signal.SIGSTOP)
            if not _write_locked(self.db):
                return
            os.kill(self.proc.pid, signal.SIGCONT)
            threading.Event().wait(0.002)
        raise AssertionError("could not freeze the executor outside a write transaction")

    def thaw(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def logs(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self, timeout: float = 30) -> str:
        """SIGTERM (after SIGCONT, in case it is frozen); returns its log. Raises if it
        had died on its own before (a crashed service stops the process)."""
        crashed = self.proc.poll()
        if crashed is None:
            self.thaw()
            self.proc.terminate()
        self.proc.communicate(timeout=timeout)
        text = self.logs()
        self.log.close()
        assert crashed is None, f"the executor died by itself ({crashed}):\n{text}"
        return text


def _write_locked(db: Path) -> bool:
    conn = apsw.Connection(str(db))
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except apsw.BusyError:
        return True
    finally:
        conn.close()


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
        policy = AddressPolicy.parse(("127.0.0.0/8",))
        async with DeliveryClient(policy) as client, trio.open_nursery() as nursery:
            engine = build_engine(
                db=db,
                clock=clock,
                client=client,
                incarnation_id=incarnation,
                config=_engine_config(args),
            )
            await nursery.start(engine.run)
            with trio.open_signal_receiver(signal.SIGTERM) as signals:
                print(f"ready {incarnation}", flush=True)
                async for _ in signals:
                    break
            nursery.cancel_scope.cancel()
    finally:
        db.close()


def _engine_config(args: argparse.Namespace) -> EngineConfig:
    """The appliance's services with short sleeps: other processes plan, claim and reclaim
    on the same file, and nothing here is nudged by their work."""
    return EngineConfig(
        planner=None if args.no_planner else PlannerConfig(max_sleep_s=1.0),
        dispatch=DispatchConfig(
            concurrency=args.concurrency,
            lease_ms=args.lease_ms,
            heartbeat_ms=args.heartbeat_ms,
            margin_ms=args.margin_ms,
            max_sleep_s=1.0,
            user_agent="Steeple/chaos",
        ),
        reaper=None if args.no_reaper else ReaperConfig(max_sleep_s=0.5),
    )


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    trio.run(_serve, _arguments(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
