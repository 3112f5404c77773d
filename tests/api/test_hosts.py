"""The Host allow-list: a page that rebinds its own DNS name to the appliance's address
(DNS rebinding) sends its own name as ``Host``, and the API, the UI and ``/metrics``
refuse it (400, a problem document) before any view runs; ``/healthz`` and ``/readyz``
answer load balancers that probe by address."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from quart_trio import QuartTrio

from appliance.core.hosts import AllowedHosts
from appliance.store.infra.database import Database
from tests.api.conftest import FakeClock, Nudges
from tests.e2e.harness import Appliance, create_tenant
from tests.ui.conftest import make_app

REBOUND = "rebind.attacker.example"
LOOPBACK = {"client": ("127.0.0.1", 40000)}


@pytest.fixture
def full_app(db: Database, clock: FakeClock, nudges: Nudges) -> QuartTrio:
    return make_app(db, clock, nudges, allowed_hosts=AllowedHosts.of(["cron.example.org"]))


@pytest.mark.parametrize(
    "path", ["/v1/schedules", "/", "/login", "/metrics", "/static/steeple.css"]
)
async def test_a_rebound_host_is_refused_everywhere(full_app: QuartTrio, path: str) -> None:
    reply = await full_app.test_client().get(
        path, headers={"Host": f"{REBOUND}:8080"}, scope_base=LOOPBACK
    )
    assert reply.status_code == 400
    assert reply.mimetype == "application/problem+json"
    problem = await reply.get_json()
    assert problem["type"] == "urn:steeple:problem:host-not-allowed"
    assert "allowed_hosts" in problem["detail"]


@pytest.mark.parametrize("host", ["cron.example.org", "CRON.example.org.:443"])
async def test_an_allowed_host_is_answered(full_app: QuartTrio, host: str) -> None:
    client = full_app.test_client()
    assert (await client.get("/login", headers={"Host": host})).status_code == 200
    assert (await client.get("/v1/schedules", headers={"Host": host})).status_code == 401
    metrics = await client.get("/metrics", headers={"Host": host}, scope_base=LOOPBACK)
    assert metrics.status_code == 200


async def test_probes_answer_any_host(full_app: QuartTrio) -> None:
    client = full_app.test_client()
    assert (await client.get("/healthz", headers={"Host": REBOUND})).status_code == 200
    assert (await client.get("/readyz", headers={"Host": REBOUND})).status_code == 200


async def test_a_star_turns_the_check_off(db: Database, clock: FakeClock, nudges: Nudges) -> None:
    app = make_app(db, clock, nudges, allowed_hosts=AllowedHosts.of(["*"]))
    assert (await app.test_client().get("/login", headers={"Host": REBOUND})).status_code == 200


@pytest.mark.slow
def test_a_real_appliance_refuses_a_rebound_host_by_default(tmp_path: Path) -> None:
    key = create_tenant(tmp_path)["api_key"]
    app = Appliance(tmp_path).start()
    try:
        with httpx.Client(base_url=app.base_url, timeout=10) as client:
            auth = {"Authorization": f"Bearer {key}"}
            for path in ("/v1/schedules", "/login", "/metrics"):
                refused = client.get(path, headers={**auth, "Host": REBOUND})
                assert refused.status_code == 400, path
                assert refused.json()["type"] == "urn:steeple:problem:host-not-allowed"
            assert client.get("/v1/schedules", headers=auth).status_code == 200
            assert client.get("/metrics").status_code == 200
            assert client.get("/login", headers={"Host": "localhost"}).status_code == 200
            assert client.get("/healthz", headers={"Host": REBOUND}).status_code == 200
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
