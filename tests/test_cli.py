import json
import sqlite3

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


def test_a_query_holding_a_secret_is_answered_and_logged_without_it(dbp):
    mgcp("lesson", "add", "stg", "--trigger", "logging in to staging", "--action",
         "Use the shared vault entry for staging.", "--db", dbp)
    code, out, err = mgcp("lesson", "query", "staging login with password=Sup3rS3cret!", "--db", dbp, "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)] == ["stg"], err
    conn = sqlite3.connect(dbp)
    try:
        assert conn.execute("SELECT query FROM query_log").fetchall() == [("staging login with [redacted]",)]
    finally:
        conn.close()


def test_an_answer_or_a_reason_keeps_no_secret_and_an_answer_with_input_its_option_does_not_read_is_refused(dbp):
    for lesson_id, trigger in (("a1", "deploying to production on friday"),
                               ("a2", "deploying a release to production on friday")):
        mgcp("lesson", "add", lesson_id, "--trigger", trigger, "--action",
             "Do not deploy on Friday afternoons without a rollback plan", "--db", dbp)
    assert mgcp("rem", "run", "--project", "/p", "--op", "duplicate_detection", "--db", dbp)[0] == 0
    (finding,) = json.loads(mgcp("rem", "report", "--project", "/p", "--db", dbp, "--json")[1])["pending"]
    options = [o["action"] for o in finding["options"]]
    delete, keep = options.index("delete_one") + 1, options.index("keep_both") + 1
    before = dump(dbp)
    code, out, err = mgcp("rem", "resolve", finding["id"], "--option", str(delete), "--input",
                          "a2 password=Sup3rS3cret!", "--project", "/p", "--db", dbp)
    assert (code, out) == (2, "") and "the input appears to contain a password" in err and dump(dbp) == before
    code, out, err = mgcp("lesson", "archive", "a2", "--reason", "password=Sup3rS3cret! leaked", "--db", dbp)
    assert (code, out) == (2, "") and "reason appears to contain a password" in err and dump(dbp) == before
    code, out, err = mgcp("rem", "resolve", finding["id"], "--option", str(keep), "--input", "not read",
                          "--project", "/p", "--db", dbp)
    assert (code, out) == (2, "") and "takes no input" in err and dump(dbp) == before  # meant for another option


@pytest.mark.parametrize("content", [b"this is not a database", b"SQLite format 3\x00" + b"\x00" * 100])
def test_corrupt_or_foreign_db_is_refused(tmp_path, content):
    path = tmp_path / "bad.db"
    path.write_bytes(content)
    code, out, err = mgcp("lesson", "list", "--db", path)
    assert code == 2 and err.startswith("Error: ") and err.count("\n") == 1
    assert path.read_bytes() == content


# -- control characters: stored as given, shown harmlessly ----------------------------------------

TITLE, COLOUR = "when colour \x1b]0;pwned\x07 title", "Use \x1b[31mred\x1b[0m for errors \x9b2J\x7f"
SHOWN_TITLE, SHOWN_COLOUR = "when colour \\x1b]0;pwned\\x07 title", "Use \\x1b[31mred\\x1b[0m for errors \\x9b2J\\x7f"


def terminal_controls(text: str) -> list[str]:
    """The characters a terminal acts on, but newline and tab."""
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0]


@pytest.fixture
def coloured(dbp):
    assert mgcp("lesson", "add", "esc1", "--trigger", TITLE, "--action", COLOUR, "--db", dbp)[0] == 0
    return dbp


@pytest.mark.parametrize("args", [["lesson", "add", "esc2", "--trigger", TITLE + " again", "--action", COLOUR],
                                  ["lesson", "show", "esc1"], ["lesson", "list"], ["lesson", "history", "esc1"],
                                  ["lesson", "query", "colour title"]])
def test_control_characters_in_a_lesson_are_printed_escaped(coloured, args):
    code, out, err = mgcp(*args, "--db", coloured)
    assert code == 0 and terminal_controls(out + err) == []
    assert SHOWN_TITLE in out


def test_control_characters_are_stored_as_given_and_json_escapes_every_one(coloured):
    row = sqlite3.connect(coloured).execute("SELECT trigger, action FROM lessons WHERE id = 'esc1'").fetchone()
    assert row == (TITLE, COLOUR)
    code, out, err = mgcp("lesson", "show", "esc1", "--db", coloured, "--json")
    assert code == 0 and terminal_controls(out) == []  # DEL and U+009B too, which JSON leaves raw
    assert (json.loads(out)["trigger"], json.loads(out)["action"]) == (TITLE, COLOUR)


def test_a_review_shows_control_characters_escaped(coloured):
    sqlite3.connect(coloured).execute(
        "UPDATE lessons SET created_at = '2020-01-01T00:00:00+00:00', last_refined = '2020-01-01T00:00:00+00:00'"
    ).connection.commit()
    assert mgcp("rem", "run", "--op", "staleness_scan", "--project", "/p/x", "--db", coloured)[0] == 0
    code, out, err = mgcp("rem", "review", "--project", "/p/x", "--db", coloured, stdin="q\n")
    assert code == 0 and terminal_controls(out + err) == [] and SHOWN_TITLE in out
    code, out, err = mgcp("rem", "show", out.split("finding ")[1].split()[0], "--db", coloured)
    assert code == 0 and terminal_controls(out + err) == [] and SHOWN_TITLE in out


def test_an_error_message_shows_control_characters_escaped(dbp):
    code, out, err = mgcp("context", "save", "--project", "/p", "--catalogue", "/no/such\x1b]0;x\x07.json", "--db", dbp)
    assert code == 2 and terminal_controls(err) == [] and "/no/such\\x1b]0;x\\x07.json" in err


def test_a_lesson_with_a_parent_and_that_parent_are_not_orphans(dbp):
    """The hierarchy is an explicit relationship: community detection reads a lesson's parent as a
    link (the store's rows give it as one), so neither end is asked to be linked."""
    lessons = [("deploy-meta", "shipping a release to production", "Follow the release checklist end to end.", None),
               ("deploy-smoke", "after a production deploy", "Run the smoke tests against production.", "deploy-meta"),
               ("lone-lesson", "naming a git branch", "Name branches after the ticket they close.", None)]
    for lesson_id, trigger, action, parent in lessons:
        assert mgcp("lesson", "add", lesson_id, "--trigger", trigger, "--action", action,
                    *(["--parent", parent] if parent else []), "--db", dbp)[0] == 0
    assert mgcp("rem", "run", "--project", "/p", "--op", "community_detection", "--db", dbp)[0] == 0
    pending = json.loads(mgcp("rem", "report", "--project", "/p", "--db", dbp, "--json")[1])["pending"]
    assert sorted(f["data"]["lesson"] for f in pending if f["kind"] == "orphan") == ["lone-lesson"]


def test_context_show_marks_a_todo_in_progress_apart_from_a_pending_one(db, dbp, run):
    from mgcp.models import Todo

    run(db, lambda s: s.context.save("/p/x", "s1", todos=[Todo(content="write docs", status="in_progress"),
                                                         Todo(content="load test")]))
    code, out, err = mgcp("context", "show", "--project", "/p/x", "--db", dbp)
    assert code == 0 and "[~] write docs" in out and "[ ] load test" in out, err


def test_a_dry_run_of_auto_on_a_missing_database_creates_none(tmp_path):
    code, out, err = mgcp("rem", "run", "--auto", "--dry-run", "--db", tmp_path / "typo.db")
    assert code == 2 and "no database" in err and not (tmp_path / "typo.db").exists(), (out, err)
