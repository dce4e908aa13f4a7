"""Inputs refused with one line and a non-zero exit, before anything is written."""

import os
import socket
import subprocess
import sys

import pytest

from clihelp import mgcp
from conftest import dump


@pytest.mark.parametrize("args", [
    ["lesson", "list", "--db", ""], ["lesson", "list", "--db="], ["lesson", "list", "--db", "  "],
    ["context", "save", "--project", "", "--notes", "hello there"], ["export", "jsonl", "--out", ""],
])
def test_an_empty_path_option_is_refused_and_nothing_is_written(tmp_path, monkeypatch, args):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MGCP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("MGCP_DB", raising=False)
    code, out, err = mgcp(*args)
    assert code == 2 and err.startswith("Error: --") and "must not be empty" in err and err.count("\n") == 1
    assert not (tmp_path / "data").exists()


def test_init_where_claude_is_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / ".claude").write_text("")
    code, out, err = mgcp("init", "--project", tmp_path / "proj")
    assert code == 2 and "is a file, not a folder" in err and err.count("\n") == 1
    assert (tmp_path / "proj" / ".claude").read_text() == ""


def test_serve_refuses_a_database_it_cannot_use_and_a_taken_port(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    folder = tmp_path / "adir"
    folder.mkdir()
    run = subprocess.run([sys.executable, "-m", "mgcp", "serve", "--db", str(folder)], env=env,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert run.returncode == 2 and "is a directory" in run.stderr
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "mgcp", "serve", "--http", "--port", str(port),
                              "--db", str(tmp_path / "s.db")], env=env, capture_output=True, text=True,
                             timeout=60)
    assert run.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in run.stderr
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("kind", ["jsonl", "dpo"])
def test_export_replaces_only_an_earlier_export_unless_forced(tmp_path, kind):
    db = tmp_path / "k.db"
    mgcp("lesson", "add", "k1", "--trigger", "when testing things", "--action", "Run the whole suite first.", "--db", db)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, _, err = mgcp("export", kind, "--out", notes, "--db", db)
    assert code == 2 and "is not an earlier export; pass --force" in err and notes.read_text() == "my notes\n"
    out = tmp_path / f"out.{kind}"
    assert mgcp("export", kind, "--out", out, "--db", db)[0] == 0
    assert mgcp("export", kind, "--out", out, "--db", db)[0] == 0  # an earlier export: replaced
    assert mgcp("export", kind, "--out", notes, "--db", db, "--force")[0] == 0


def _count(db, table: str) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.mark.parametrize("session_id, why", [
    ("s" * 201, "session id is too long (201 characters; the limit is 200)"),
    ("ghp_" + "a1B2" * 10, "session id appears to contain a GitHub token"),
    ("  ", "session id must not be empty"),
])
def test_a_session_id_is_checked_wherever_it_is_stored(tmp_path, session_id, why):
    db = tmp_path / "k.db"
    assert mgcp("lesson", "add", "k1", "--trigger", "when testing things", "--action", "Run the suite.", "--db", db)[0] == 0
    tables = ("lessons", "lesson_versions", "lesson_outcomes", "context_history")
    before = [_count(db, t) for t in tables]
    for args in (["lesson", "add", "k2", "--trigger", "when shipping", "--action", "Tag the release."],
                 ["lesson", "refine", "k1", "--action", "Run the whole suite.", "--reason", "partial runs missed"],
                 ["lesson", "outcome", "k1", "--failed"],
                 ["context", "save", "--project", tmp_path, "--notes", "a note"]):
        code, _, err = mgcp(*args, "--session-id", session_id, "--db", db)
        assert code == 2 and why in err and err.count("\n") == 1, (args, err)
    assert [_count(db, t) for t in tables] == before


def test_an_overlong_query_is_refused_and_not_logged(tmp_path):
    db = tmp_path / "k.db"
    assert mgcp("lesson", "add", "k1", "--trigger", "when testing things", "--action", "Run the suite.", "--db", db)[0] == 0
    code, _, err = mgcp("lesson", "query", "testing " * 300, "--db", db)
    assert code == 2 and "the query is too long (2400 characters; the limit is 2000)" in err
    assert _count(db, "query_log") == 0
    assert mgcp("lesson", "query", "testing " * 250, "--db", db)[0] == 0  # 2000 characters, stripped by nobody
    assert _count(db, "query_log") == 1


@pytest.mark.parametrize("path, why", [
    ("/p/" + "d" * 5000, "the project path is too long"),
    ("/home/dev/ghp_" + "a1B2" * 10, "the project path appears to contain a GitHub token"),
])
def test_a_project_path_is_checked_before_a_project_is_stored(tmp_path, path, why):
    db = tmp_path / "k.db"
    assert mgcp("lesson", "add", "k1", "--trigger", "when testing things", "--action", "Run the suite.", "--db", db)[0] == 0
    for args in (["context", "save", "--project", path, "--notes", "a note"],
                 ["rem", "run", "--project", path]):
        code, _, err = mgcp(*args, "--db", db)
        assert code == 2 and why in err and err.count("\n") == 1, (args, err)
    assert _count(db, "project_contexts") == 0 and _count(db, "rem_runs") == 0


def _no_longer_active(tmp_path):
    """A database with lesson "pool" active, "pool-2" merged into it and "old" archived."""
    import sqlite3

    db = tmp_path / "k.db"
    for lesson_id, action in (("pool", "Set max_connections to 20 per API worker."),
                              ("pool-2", "Keep max_connections at 20 per API worker."), ("old", "Run the full suite.")):
        assert mgcp("lesson", "add", lesson_id, "--trigger", "sizing the database pool", "--action", action,
                    "--db", db)[0] == 0
    assert mgcp("lesson", "archive", "old", "--reason", "replaced by CI", "--db", db)[0] == 0
    with sqlite3.connect(db) as conn:  # as a merge leaves it
        conn.execute("INSERT INTO lesson_lifecycle (lesson_id, status, superseded_by, changed_at) "
                     "VALUES ('pool-2', 'superseded', 'pool', '2026-01-01T00:00:00+00:00')")
    return db


def test_a_refine_of_a_lesson_no_longer_active_is_refused_naming_what_to_do(tmp_path):
    """A new version of a merged, archived or deleted lesson would be retrieved by nobody (the merge's
    kept lesson would not get the change): refused as an outcome of one is, nothing written."""
    db = _no_longer_active(tmp_path)
    before = dump(db)
    for lesson_id, why in (("pool-2", "lesson pool-2 was merged into pool; refine pool"),
                           ("old", "lesson old is archived; restore it first (`mgcp lesson restore old`) to refine it")):
        code, _, err = mgcp("lesson", "refine", lesson_id, "--reason", "sharper", "--action", "Size the pool per worker.",
                            "--db", db)
        assert code == 2 and why in err and err.count("\n") == 1, err
    assert dump(db) == before
    assert mgcp("lesson", "restore", "old", "--db", db)[0] == 0
    assert mgcp("lesson", "refine", "old", "--reason", "sharper", "--action", "Run the whole suite in CI.",
                "--db", db)[0] == 0


def test_an_outcome_of_a_lesson_no_longer_active_is_refused_naming_what_to_do(tmp_path):
    db = _no_longer_active(tmp_path)
    for lesson_id, why in (("pool-2", "lesson pool-2 was merged into pool; report the outcome of pool"),
                           ("old", "lesson old is archived; restore it first (`mgcp lesson restore old`)")):
        code, _, err = mgcp("lesson", "outcome", lesson_id, "--failed", "--db", db)
        assert code == 2 and why in err and err.count("\n") == 1, err
    assert _count(db, "lesson_outcomes") == 0
    assert mgcp("lesson", "outcome", "pool", "--helped", "--db", db)[0] == 0


def test_lists_hold_a_bounded_number_of_values(tmp_path):
    """Fifty thousand active files or a hundred thousand tags made every later reply that shows them
    megabytes long: a list over its limit is refused with one line, nothing written."""
    db = tmp_path / "k.db"
    assert mgcp("lesson", "add", "k1", "--trigger", "when testing things", "--action", "Run the suite.", "--db", db)[0] == 0
    before = dump(db)
    tags = [arg for i in range(51) for arg in ("--tag", f"t{i}")]
    for args in (["lesson", "add", "k2", "--trigger", "when tagging lessons", "--action", "Give each lesson its tags.", *tags],
                 ["lesson", "refine", "k1", "--reason", "tagged", *tags],
                 ["context", "save", "--project", "/p", *[a for i in range(201) for a in ("--active-file", f"f{i}.py")]],
                 ["context", "save", "--project", "/p", *[a for i in range(201) for a in ("--todo", f"do {i}")]]):
        code, _, err = mgcp(*args, "--db", db)
        assert code == 2 and "too many values for" in err and err.count("\n") == 1, (args[:2], err)
    assert dump(db) == before
    assert mgcp("lesson", "add", "k2", "--trigger", "when tagging lessons", "--action", "Give each lesson its tags.",
                *tags[:100], "--db", db)[0] == 0
