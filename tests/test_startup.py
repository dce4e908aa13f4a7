"""Cheap commands stay cheap to start: what `mgcp rem status` and `mgcp lesson show` import.

Each command runs as a user runs it (`python -m mgcp ...`, a subprocess) on the planted base with a
whole cycle's findings pending; on exit the process writes the names of the modules it loaded. No
timing here: benchmarks/run.py measures the start-up itself.
"""

import asyncio
import json
import subprocess
import sys

import pytest

from mgcp import engine
from mgcp.config import OPERATIONS, parse_config
from mgcp.persistence.store import Store
from planted import PROJECT, build

CONFIG = parse_config({}, "defaults")
# What running a cycle needs (and rich: help pages and progress bars), and a cheap command must not load.
NOT_AT_START = ["numpy", "networkx", "community", "igraph", "mgcp.operations", "mgcp.engine.cycle",
                "mgcp.engine.actions", "rich"]
# `rem status` reads plain rows: not even the pydantic models.
STATUS_NEVER = NOT_AT_START + ["pydantic", "mgcp.models", "mgcp.persistence.lessons", "mgcp.persistence.context"]
# `lesson show` reads one lesson (a pydantic model): no other part of the store.
SHOW_NEVER = NOT_AT_START + ["mgcp.engine", "mgcp.persistence.context", "mgcp.persistence.rem",
                             "mgcp.persistence.community_kept"]

REPORT_MODULES = """
import atexit, json, runpy, sys
out, sys.argv = sys.argv[1], ["mgcp", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
runpy.run_module("mgcp", run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    db = tmp_path_factory.mktemp("startup") / "lessons.db"
    build(db)

    async def cycle():
        async with Store.open(db) as store:
            await engine.run_cycle(store, CONFIG, PROJECT, list(OPERATIONS))
    asyncio.run(cycle())
    return db


def loaded(tmp_path, *args) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `mgcp ARGS` in a fresh interpreter: the result, and every module it had loaded at exit."""
    modules = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", REPORT_MODULES, str(modules), *map(str, args)],
                          capture_output=True, text=True, timeout=60)
    return done, set(json.loads(modules.read_text()))


def heavy(modules: set[str], never: list[str]) -> list[str]:
    return sorted(n for n in never if any(m == n or m.startswith(n + ".") for m in modules))


def test_rem_status_imports_no_pydantic_and_nothing_of_the_cycle(planted, tmp_path):
    done, modules = loaded(tmp_path, "rem", "status", "--project", PROJECT, "--db", planted, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pending_findings"] > 0  # a whole queue was checked
    assert "mgcp.engine.review" in modules
    assert heavy(modules, STATUS_NEVER) == []


def test_lesson_show_imports_only_the_lessons(planted, tmp_path):
    done, modules = loaded(tmp_path, "lesson", "show", "alembic-data-backfill-in-batches", "--db", planted)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("alembic-data-backfill-in-batches  (v")
    assert "mgcp.persistence.lessons" in modules
    assert heavy(modules, SHOW_NEVER) == []
