import json

import pytest

from clihelp import mgcp
from conftest import dump


@pytest.fixture
def dbp(db):
    return str(db)


def test_db_status_json_lists_applied_and_tables(dbp):
    code, out, err = mgcp("db", "status", "--db", dbp, "--json")
    status = json.loads(out)
    assert code == 0 and status["pending"] == [] and "lessons" in status["tables"]


def test_lesson_round_trip_with_history(dbp):
    assert mgcp("lesson", "add", "a1", "--trigger", "writing a migration", "--action", "Make it idempotent.",
                "--tag", "db", "--db", dbp)[0] == 0
    assert mgcp("lesson", "refine", "a1", "--action", "Insert only what is missing.", "--reason", "too vague",
                "--db", dbp)[0] == 0
    code, out, _ = mgcp("lesson", "history", "a1", "--db", dbp, "--json")
    history = json.loads(out)
    assert code == 0 and [v["action"] for v in history] == ["Make it idempotent.", "Insert only what is missing."]
    assert history[0]["refinement_reason"] == "too vague"


def test_lesson_query_json_returns_scored_hits(dbp):
    mgcp("lesson", "add", "a1", "--trigger", "writing a migration", "--action", "Make it idempotent.", "--db", dbp)
    code, out, _ = mgcp("lesson", "query", "database migration", "--db", dbp, "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)] == ["a1"]


def test_context_save_history_and_at(dbp, tmp_path):
    cat = tmp_path / "cat.json"
    cat.write_text(json.dumps({"stack": ["python"]}))
    assert mgcp("context", "save", "--project", "/p/x", "--session-id", "s1", "--notes", "one",
                "--catalogue", cat, "--db", dbp)[0] == 0
    assert mgcp("context", "save", "--project", "/p/x", "--session-id", "s2", "--catalogue", "-",
                "--db", dbp, stdin='{"stack": ["python", "sqlite"]}')[0] == 0
    code, out, _ = mgcp("context", "at", "--project", "/p/x", "--session", "1", "--db", dbp, "--json")
    assert code == 0 and json.loads(out)["catalogue"] == {"stack": ["python"]}
    code, out, _ = mgcp("context", "history", "--project", "/p/x", "--db", dbp, "--json")
    assert [s["session_number"] for s in json.loads(out)] == [1, 2]


def test_context_history_in_text_shows_todos_done_and_decisions(dbp):
    assert mgcp("context", "save", "--project", "/p/x", "--session-id", "s1", "--todo", "write docs",
                "--decision", "Keep money in cents", "--db", dbp)[0] == 0
    assert mgcp("context", "save", "--project", "/p/x", "--session-id", "s1", "--done", "write docs", "--db", dbp)[0] == 0
    code, out, _ = mgcp("context", "history", "--project", "/p/x", "--db", dbp)
    first, second = out.split("session 1 ")[1:]
    assert "todos: write docs" in first and "decisions: Keep money in cents" in first
    assert "done: write docs" in second and "todos:" not in second


@pytest.mark.parametrize("args, stdin, message", [
    (["lesson", "show", "nope"], "", "no lesson with id 'nope'"),
    (["lesson", "add", "x", "--trigger", " ", "--action", "a"], "", "trigger must not be empty"),
    (["context", "save", "--project", "/p", "--catalogue", "-"], "{not json", "not valid JSON"),
    (["context", "save", "--project", "/p", "--notes", "key AKIAABCDEFGHIJKLMNOP"], "", "AWS access key"),
    (["rem", "run", "--op", "dreaming"], "", "unknown operation 'dreaming'"),
    (["context", "save", "--project", "/p/new"], "", "nothing to save"),  # no project made either
    (["lesson", "list", "--status", "gone"], "", "unknown status"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(dbp, args, stdin, message):
    before = dump(dbp)
    code, out, err = mgcp(*args, "--db", dbp, stdin=stdin)
    assert code == 2 and out == ""
    assert err.startswith("Error: ") and message in err and err.count("\n") == 1
    assert dump(dbp) == before


@pytest.mark.parametrize("content", [b"this is not a database", b"SQLite format 3\x00" + b"\x00" * 100])
def test_corrupt_or_foreign_db_is_refused(tmp_path, content):
    path = tmp_path / "bad.db"
    path.write_bytes(content)
    code, out, err = mgcp("lesson", "list", "--db", path)
    assert code == 2 and err.startswith("Error: ") and err.count("\n") == 1
    assert path.read_bytes() == content
