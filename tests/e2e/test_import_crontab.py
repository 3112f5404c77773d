"""``steeple import-crontab --apply`` against a real appliance on loopback
(docs/move-from-cron.md): a crontab in, the schedules there with cron's method, timing and
zone, a triggered run of each delivered as the line would have called it, the line that
cannot move named, and a second import of the same crontab changing nothing."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, Receiver, create_tenant, iter_pages, steeple

pytestmark = pytest.mark.slow


def crontab(url: str) -> str:
    return f"""\
MAILTO=ops@example.com
# Warm the cache
*/5 * * * * curl -fsS -m 20 {url}/warm > /dev/null 2>&1
CRON_TZ=Europe/Berlin
TOKEN=abc
30 2 * * mon-fri curl -s -H "X-Token: $TOKEN" --json '{{"job":"rollup"}}' {url}/rollup
0 4 1 * * wget -q -O- --method=DELETE {url}/cache
@reboot curl -s {url}/boot
"""


def test_a_crontab_applied_to_a_real_appliance(tmp_path: Path) -> None:
    data = tmp_path / "data"
    tenant = create_tenant(data)
    receiver = Receiver()
    app = Appliance(data).start()
    file = tmp_path / "crontab"
    file.write_text(crontab(receiver.url), encoding="utf-8")
    env = {"STEEPLE_URL": app.base_url, "STEEPLE_API_KEY": tenant["api_key"],
           "TOKEN": "t0ken", "XDG_CONFIG_HOME": str(tmp_path / "config")}  # fmt: skip
    command = ("import-crontab", str(file), "--timezone", "America/Chicago", "--apply")
    try:
        done = steeple(*command, env=env)
        assert done.returncode == 1, done.stderr  # the @reboot line did not move
        assert "steeple: line 8 not moved: @reboot runs once" in done.stderr
        assert "applied: created 3, changed 0, deleted 0" in done.stdout, done.stdout
        with app.client(tenant["api_key"]) as api:
            schedules = {s["key"]: s for s in iter_pages(api, "/v1/schedules")}
            shown = sorted(
                (s["method"], s["cron"], s["timezone"], s["timeout_seconds"])
                for s in schedules.values()
            )
            assert shown == [
                ("DELETE", "0 4 1 * *", "Europe/Berlin", 30),
                ("GET", "*/5 * * * *", "America/Chicago", 20),
                ("POST", "30 2 * * mon-fri", "Europe/Berlin", 30),
            ]
            for schedule in schedules.values():
                trigger = api.post(f"/v1/schedules/{schedule['id']}/trigger")
                assert trigger.status_code == 201, trigger.text
            receiver.wait_for(lambda ds: len(ds) >= 3)
        again = steeple(*command, env=env)
        assert again.returncode == 1 and "nothing to change" in again.stdout, again.stdout
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        receiver.close()
    calls = {d.method: d for d in receiver.snapshot()}
    assert sorted(calls) == ["DELETE", "GET", "POST"]
    assert calls["GET"].body == calls["DELETE"].body == b""
    posted = calls["POST"]
    assert json.loads(posted.body) == {"job": "rollup"}
    assert posted.headers["content-type"] == "application/json"
    assert posted.headers["x-token"] == "t0ken"  # ${TOKEN}, filled in by the apply
    assert posted.headers["accept"] == "application/json"
