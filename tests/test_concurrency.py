"""Concurrent processes writing one database lose nothing."""

import sqlite3
import subprocess
import sys

WRITER = """
import asyncio, sys
from mgcp.persistence.store import Store
from mgcp.models import Todo

async def main(path, name):
    async with Store.open(path) as s:
        for i in range(40):
            await s.lessons.refine("shared", f"{name} round {i}", action=f"{name} action {i}")
            await s.context.save("/p/shared", f"{name}-session-{i}", notes=f"{name} note {i}",
                                 todos=[Todo(content=f"{name} todo {i}")])
asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_two_writers_interleave_without_loss(db, run):
    run(db, lambda s: s.lessons.add("shared", "when two agents write at once", "Start here."))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), name]) for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    conn = sqlite3.connect(db)
    versions = [v for (v,) in conn.execute("SELECT version FROM lesson_versions WHERE lesson_id = 'shared' ORDER BY version")]
    assert versions == list(range(1, 82))
    assert conn.execute("SELECT version FROM lessons").fetchone()[0] == 81
    sessions = [n for (n,) in conn.execute("SELECT session_number FROM project_sessions ORDER BY session_number")]
    assert sessions == list(range(1, 81))
    assert conn.execute("SELECT count(*) FROM context_history").fetchone()[0] == 80
    assert conn.execute("SELECT session_count FROM project_contexts").fetchone()[0] == 80


def test_a_writer_killed_mid_write_leaves_the_database_consistent(db, run):
    import time

    run(db, lambda s: s.lessons.add("shared", "when a process dies mid-write", "Start here."))
    proc = subprocess.Popen([sys.executable, "-c", WRITER.replace("range(40)", "range(10_000)"), str(db), "k"])
    conn = sqlite3.connect(db)
    deadline = time.time() + 60
    while conn.execute("SELECT count(*) FROM lesson_versions").fetchone()[0] < 20 and time.time() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    current = conn.execute("SELECT version, action FROM lessons WHERE id = 'shared'").fetchone()
    top = conn.execute("SELECT version, action FROM lesson_versions WHERE lesson_id = 'shared' ORDER BY version DESC LIMIT 1").fetchone()
    assert current == top
    count = conn.execute("SELECT count(*) FROM lesson_versions").fetchone()[0]
    assert [v for (v,) in conn.execute("SELECT version FROM lesson_versions ORDER BY version")] == list(range(1, count + 1))
    sessions = conn.execute("SELECT session_count FROM project_contexts").fetchone()
    assert sessions is None or sessions[0] == conn.execute("SELECT count(*) FROM project_sessions").fetchone()[0]
