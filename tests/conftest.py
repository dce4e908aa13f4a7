"""Shared fixtures. An autouse fixture points every data path at a temp dir: no test ever touches a
real ~/.mgcp or ~/.claude."""

import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest

from mgcp.persistence.migrate import open_and_migrate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def isolated_data(tmp_path, monkeypatch):
    data = tmp_path / "mgcp-data"
    monkeypatch.setenv("MGCP_DATA_DIR", str(data))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MGCP_DB", raising=False)
    monkeypatch.delenv("MGCP_REM_CONFIG", raising=False)
    return data


@pytest.fixture
def db(tmp_path) -> Path:
    """A fresh, fully migrated database."""
    path = tmp_path / "lessons.db"
    open_and_migrate(path)
    return path


@pytest.fixture
def run():
    """Run a coroutine function against a Store opened on a path: run(path, lambda s: ...)."""
    from mgcp.persistence.store import Store

    def _run(path, work):
        async def main():
            async with Store.open(path) as store:
                return await work(store)
        return asyncio.run(main())
    return _run


def dump(path, tables=None) -> dict:
    """Every row of every (or the named) table, for before/after comparisons."""
    conn = sqlite3.connect(path)
    try:
        names = tables or [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in names}
    finally:
        conn.close()
