"""Scheduled backups: due after the last one (whoever took it), dated, pruned to
``keep``, recorded; and the appliance takes the first one at boot when enabled."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from appliance.core.instants import parse_instant
from appliance.engine.backups import BackupConfig, Backups
from appliance.store.infra.database import Database
from appliance.store.infra.snapshot import last_backup, verify_copy
from appliance.store.tenants import create_tenant
from tests.e2e.harness import Appliance
from tests.ops.processes import wait_for_log

HOUR = 3_600_000
T0 = parse_instant("2026-03-02T10:00:00Z")


@dataclass
class Clock:
    now: int

    def now_ms(self) -> int:
        return self.now


async def test_backups_come_due_after_the_last_and_only_keep_the_newest(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "steeple.db")
    db.write_now(create_tenant, name="acme", now=T0)
    db.close()
    clock = Clock(T0)
    folder = tmp_path / "backups"
    service = Backups(
        db_path=tmp_path / "steeple.db",
        clock=clock,
        config=BackupConfig(every_ms=HOUR, keep=2, folder=folder),
    )
    assert service.due_in_ms() == 0  # none recorded: at once
    for hour in range(3):
        clock.now = T0 + hour * HOUR
        assert await service.run_once()
        assert service.due_in_ms() == HOUR
    clock.now += HOUR // 2
    assert service.due_in_ms() == HOUR // 2
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["steeple-20260302T110000Z.db", "steeple-20260302T120000Z.db"]
    assert all(verify_copy(folder / name) > 0 for name in names)
    recorded = last_backup(tmp_path)
    assert recorded is not None and recorded.at_ms == T0 + 2 * HOUR


async def test_a_failed_backup_is_reported_and_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = Backups(
        db_path=tmp_path / "missing.db",
        clock=Clock(T0),
        config=BackupConfig(every_ms=HOUR, keep=2, folder=tmp_path / "b"),
    )
    assert await service.run_once() is False
    assert "scheduled backup failed" in caplog.text and "does not exist" in caplog.text
    assert last_backup(tmp_path) is None and list((tmp_path / "b").iterdir()) == []


@pytest.mark.slow
def test_the_appliance_takes_its_first_scheduled_backup_at_boot(tmp_path: Path) -> None:
    app = Appliance(tmp_path, env={"STEEPLE_BACKUP_EVERY_HOURS": "24"}).start()
    try:
        wait_for_log(app.log, "backup written")
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    (made,) = (tmp_path / "backups").glob("steeple-*.db")
    assert verify_copy(made) > 0 and last_backup(tmp_path) is not None
