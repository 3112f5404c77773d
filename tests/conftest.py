"""Shared fixtures: real SQLite files in tmp_path, the conformance vectors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.store.database import Database

VECTORS_PATH = Path(__file__).parent / "vectors" / "delivery-contract.json"


@pytest.fixture(scope="session")
def vectors() -> dict[str, Any]:
    return json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A migrated database file, threaded like production."""
    database = Database.open(tmp_path / "steeple.db")
    yield database
    database.close()


@pytest.fixture
def inline_db(tmp_path: Path) -> Iterator[Database]:
    """The same database, but calls run inline (for engine tests under MockClock autojump)."""
    database = Database.open(tmp_path / "steeple.db", threaded=False)
    yield database
    database.close()
