"""Sign-in under concurrency, through real HTTP on loopback: the app served by hypercorn in
this process, many httpx clients at once (issue: 60 concurrent attempts got 59 × 401 and
the right password's 302 against a limit of 10; 100 bad sign-ins held the dashboard for
20 s).

- Attempts on one account are counted before their password is checked: however many
  race, at most ``MAX_FAILURES`` are checked, and the right password is refused after.
- Password work has its own bounded pool: a signed-in user's dashboard does not queue
  behind the sign-ins waiting for it, and one sign-in more than the pool holds is
  refused at once (503, ``Retry-After``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import httpx
import hypercorn.config
import hypercorn.trio
import trio
import trio.testing
from quart_trio import QuartTrio

from appliance.store.infra.database import Database
from appliance.store.sessions import MAX_FAILURES
from appliance.store.users import create_user, issue_setup_token
from appliance.ui.hashing import RETRY_AFTER_S, HashingPool
from tests.api.conftest import START, FakeClock, Nudges
from tests.ui.conftest import PASSWORD, Browser, Tenant, make_app

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
DEADLINE_S = 60  # a broken build fails here instead of hanging


@asynccontextmanager
async def served(app: QuartTrio) -> AsyncIterator[str]:
    """``app`` on a free loopback port; its base URL."""
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        serve = partial(hypercorn.trio.serve, app, config, shutdown_trigger=stop.wait)
        binds: list[str] = await nursery.start(serve)
        try:
            yield binds[0]
        finally:
            stop.set()


async def attempt(base: str, email: str, password: str) -> httpx.Response:
    """One browser's sign-in: its own connection, the form fetched, then posted."""
    async with httpx.AsyncClient(base_url=base, timeout=DEADLINE_S) as client:
        form = await client.get("/login")
        fields = {"email": email, "password": password}
        if found := TOKEN.search(form.text):
            fields["csrf_token"] = found.group(1)
        return await client.post("/login", data=fields)


async def wait_until(condition: Callable[[], bool]) -> None:
    """Until ``condition`` holds, looked at again whenever every task here is waiting."""
    with trio.fail_after(DEADLINE_S):
        while not condition():
            await trio.testing.wait_all_tasks_blocked(cushion=0.01)


async def test_racing_attempts_on_one_account_are_checked_at_most_the_limit(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    app = make_app(db, clock, nudges, passwords=HashingPool(waiting=200))  # the race, not 503s
    answers: list[int] = []

    async def one(password: str) -> None:
        answers.append((await attempt(base, alpha.owner, password)).status_code)

    with trio.fail_after(DEADLINE_S):
        async with served(app) as base:
            async with trio.open_nursery() as nursery:
                for _ in range(6 * MAX_FAILURES):
                    nursery.start_soon(one, "wrong password, wrong")
            assert sorted(answers) == [401] * MAX_FAILURES + [429] * (5 * MAX_FAILURES)
            answers.clear()
            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(one, PASSWORD)
            assert answers == [429] * 20  # the right password too: nothing was checked


async def test_the_dashboard_does_not_queue_behind_sign_ins_waiting_to_be_checked(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    pool = HashingPool()
    app = make_app(db, clock, nudges, passwords=pool)
    flood = pool.capacity  # every place of the pool taken
    assert flood < MAX_FAILURES  # all from this address, none throttled
    answered: list[int] = []

    async def bad(n: int) -> None:
        reply = await attempt(base, f"nobody-{n}@flood.example", "wrong password, wrong")
        answered.append(reply.status_code)

    with trio.fail_after(DEADLINE_S):
        async with served(app) as base, httpx.AsyncClient(base_url=base, timeout=60) as viewer:
            form = await viewer.get("/login")
            fields = {"email": alpha.viewer, "password": PASSWORD}
            if found := TOKEN.search(form.text):
                fields["csrf_token"] = found.group(1)
            assert (await viewer.post("/login", data=fields)).status_code == 302
            async with trio.open_nursery() as nursery:
                # The hashing thread is busy (the test holds it, as a slow check would):
                # every sign-in of the flood waits for it, and stays waiting.
                await pool.limiter.acquire()
                try:
                    for n in range(flood):
                        nursery.start_soon(bad, n)
                    await wait_until(lambda: pool.queued == 1 + flood)
                    one_more = await attempt(base, "late@flood.example", "wrong password, wrong")
                    assert one_more.status_code == 503
                    assert one_more.headers["Retry-After"] == str(RETRY_AFTER_S)
                    assert "try again in" in one_more.text
                    # Sharing one limiter, the dashboard would wait behind all of them.
                    dashboard = await viewer.get("/")
                    assert dashboard.status_code == 200 and "<h1>Dashboard</h1>" in dashboard.text
                    assert answered == [] and pool.queued == 1 + flood  # the flood still waits
                finally:
                    pool.limiter.release()
            assert sorted(answered) == [401] * flood


async def test_a_setup_is_refused_at_once_when_the_pool_is_full_and_not_used_up(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    pool = HashingPool(waiting=0)
    browser = Browser(make_app(db, clock, nudges, passwords=pool))
    user = db.write_now(
        create_user, email="new@alpha.example", tenant_id=alpha.id, role="viewer",
        operator=False, password_hash=None, now=START,
    )  # fmt: skip
    token = db.write_now(issue_setup_token, user_id=user.id, now=START)
    fields = {"password": PASSWORD, "repeat": PASSWORD}
    await browser.get(f"/setup/{token}")
    with pool.admit():  # the pool's only place, taken
        busy = await browser.post(f"/setup/{token}", fields)
    assert busy.status == 503 and busy.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert "try again in" in busy.text
    assert (await browser.get(f"/setup/{token}")).status == 200  # the link still works
    done = await browser.post(f"/setup/{token}", fields)
    assert done.status == 302 and done.headers["Location"] == "/"  # signed in
