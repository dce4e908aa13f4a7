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


def test_the_hook_and_a_save_go_through_while_a_rem_run_is_analysing(db, run, monkeypatch, tmp_path):
    """REM holds no lock while it analyses: with the staleness scan held mid-analysis, the hook
    (whose busy timeout is 2 s) and a CLI save in other processes succeed."""
    import json
    import os
    import threading

    from conftest import ROOT
    from mgcp import engine
    from mgcp.config import load_config
    from mgcp.operations import staleness_scan

    run(db, lambda s: s.lessons.add("held", "when REM analyses", "Nothing waits for it."))
    analysing, release = threading.Event(), threading.Event()
    real = staleness_scan.scan

    def held(*args, **kwargs):
        analysing.set()
        assert release.wait(60), "the test never released the analysis"
        return real(*args, **kwargs)

    monkeypatch.setattr(staleness_scan, "scan", held)
    env = {**os.environ, "MGCP_DB": str(db), "MGCP_DATA_DIR": str(tmp_path / "data")}
    results = {}

    def others():
        assert analysing.wait(60)
        results["hook"] = subprocess.run([sys.executable, str(ROOT / "hooks" / "rem-cycle-trigger.py")],
                                         input=json.dumps({"session_id": "during-rem", "cwd": "/p"}).encode(),
                                         capture_output=True, env=env, timeout=60)
        results["save"] = subprocess.run([sys.executable, "-m", "mgcp", "context", "save", "--project", "/p",
                                          "--notes", "saved while REM analyses", "--db", str(db)],
                                         capture_output=True, env=env, timeout=60)
        release.set()

    thread = threading.Thread(target=others)
    thread.start()
    run(db, lambda s: engine.run(s, load_config(), "/p", ["staleness_scan"]))
    thread.join()
    assert results["save"].returncode == 0, results["save"].stderr
    assert results["hook"].returncode == 0 and not (tmp_path / "data" / "hook.log").exists()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM project_sessions WHERE session_id = 'during-rem'").fetchone()[0] == 1
    assert conn.execute("SELECT notes FROM context_history ORDER BY id DESC").fetchone()[0] == "saved while REM analyses"


def test_opening_the_database_again_in_a_process_keeps_its_connections_locks(db, run):
    """A server opens the database for each call while other calls hold it open. Checking the file
    must not drop this process's locks: a CLI process that exits meanwhile would take itself for the
    last user, checkpoint and remove the WAL under the open connection, and the file is damaged."""
    from mgcp.persistence.migrate import check_file

    run(db, lambda s: s.lessons.add("first", "when a call holds the database", "Keep reading it."))
    held = sqlite3.connect(db, isolation_level=None)
    try:
        held.execute("BEGIN")
        held.execute("SELECT count(*) FROM lessons").fetchone()  # a call's read, its lock held
        check_file(db)  # another call of the same process opens the database
        cli = subprocess.run([sys.executable, "-m", "mgcp", "lesson", "add", "second", "--trigger", "from the CLI",
                              "--action", "Write while the server reads.", "--db", str(db)], capture_output=True)
        assert cli.returncode == 0, cli.stderr
        assert db.with_name(db.name + "-wal").exists()  # still in use here: not checkpointed away
        held.execute("COMMIT")
        held.execute("UPDATE lessons SET usage_count = usage_count + 1 WHERE id = 'first'")
    finally:
        held.close()
    check = subprocess.run([sys.executable, "-m", "mgcp", "db", "check", "--db", str(db)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
