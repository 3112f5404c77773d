"""open_store opens what names a store and refuses anything else, naming both forms: a
mistyped scheme or an impossible path never becomes an empty SQLite file (a file named
``None`` once appeared at the repository root that way)."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.errors import StoreError
from appliance.settings.load import load_settings
from appliance.store.infra.backend import open_store
from appliance.store.infra.postgres.urls import is_postgres_url


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("postgresq://steeple:hunter2@db/steeple", "postgresq://…"),
        ("sqlite:///var/lib/steeple.db", "sqlite://…"),
        ("", "''"),
        (" steeple.db", "' steeple.db'"),
    ],
)
def test_a_target_that_is_neither_form_is_refused_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, shown: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as refused:
        open_store(target)
    message = str(refused.value)
    assert "postgresql://" in message and "SQLite file" in message
    assert shown in message and "hunter2" not in message
    assert list(tmp_path.iterdir()) == []


def test_a_directory_or_a_path_under_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="a directory"):
        open_store(tmp_path)
    with pytest.raises(StoreError, match="does not exist"):
        open_store(tmp_path / "missing" / "steeple.db")
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_path_given_as_text_or_path_opens(tmp_path: Path) -> None:
    for target in (tmp_path / "a.db", str(tmp_path / "b.db")):
        open_store(target).close()
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["a.db", "b.db"]


def test_one_predicate_says_postgresql_for_settings_and_store_alike(tmp_path: Path) -> None:
    for url in ("postgresql://u@h/d", "postgres://u@h/d"):
        assert is_postgres_url(url)
        settings = load_settings(environ={}, overrides={"data_dir": str(tmp_path), "database": url})
        assert settings.uses_postgres and settings.store_target == url
    for other in ("postgresql:/u@h/d", "mysql://u@h/d", tmp_path / "x.db", None):
        assert not is_postgres_url(other)
