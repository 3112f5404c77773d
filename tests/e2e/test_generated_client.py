"""The OpenAPI file serves a real client generator: ``openapi-python-client`` builds a
client with every central model, and that client works against the live appliance."""

from __future__ import annotations

import importlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Appliance, create_tenant

pytestmark = pytest.mark.slow

SPEC = Path(__file__).parents[2] / "contracts" / "openapi" / "scheduler.yaml"
PACKAGE = "steeple_tenant_api_client"
CENTRAL_MODELS = [
    "schedule.Schedule",
    "schedule_list.ScheduleList",
    "run.Run",
    "run_list.RunList",
    "run_with_attempts.RunWithAttempts",
    "attempt.Attempt",
    "event.Event",
    "event_list.EventList",
    "api_key.ApiKey",
    "new_api_key.NewApiKey",
    "signing_secret.SigningSecret",
    "cron_preview.CronPreview",
    "problem.Problem",
]


@pytest.fixture(scope="module")
def client_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    out = tmp_path_factory.mktemp("generated")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(SPEC),
            "--output-path",
            str(out / PACKAGE),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    for failure in ("Unable to process schema", "Cannot parse response", "will be omitted"):
        assert failure not in said, said
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m.startswith(PACKAGE)]:
            del sys.modules[name]


def test_every_central_model_is_generated(client_package: Any) -> None:
    for dotted in CENTRAL_MODELS:
        module, name = dotted.split(".")
        models = importlib.import_module(f"{PACKAGE}.models.{module}")
        assert isinstance(getattr(models, name), type), dotted


def test_the_generated_client_creates_lists_and_reads_a_run(
    client_package: Any, tmp_path: Path
) -> None:
    api = importlib.import_module(f"{PACKAGE}.api.schedules")
    runs = importlib.import_module(f"{PACKAGE}.api.runs")
    models = importlib.import_module(f"{PACKAGE}.models")
    for name in ("create_schedule", "list_schedules", "trigger_schedule"):
        importlib.import_module(f"{PACKAGE}.api.schedules.{name}")
    importlib.import_module(f"{PACKAGE}.api.runs.get_run")
    tenant = create_tenant(tmp_path)
    app = Appliance(tmp_path).start()
    try:
        with client_package.AuthenticatedClient(
            base_url=app.base_url, token=tenant["api_key"]
        ) as client:
            body = {
                "name": "generated",
                "cron": "0 3 * * *",
                "target_url": "http://127.0.0.1:9/hook",
                "headers": [["X-Team", "billing"]],
                "payload": {"n": 1},
            }
            created = api.create_schedule.sync(client=client, body=body)
            assert isinstance(created, models.Schedule), created
            assert created.headers.additional_properties == {"X-Team": "billing"}
            listed = api.list_schedules.sync(client=client, limit=10)
            assert isinstance(listed, models.ScheduleList)
            assert [s.id for s in listed.items] == [created.id]
            run = api.trigger_schedule.sync(created.id, client=client)
            assert isinstance(run, models.Run) and run.schedule_id == created.id
            fetched = runs.get_run.sync(run.id, client=client)
            assert isinstance(fetched, models.RunWithAttempts) and fetched.id == run.id
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
