"""The SessionStart hook, run as Claude Code runs it: a subprocess fed SessionStart JSON on stdin."""

import json
import os
import sqlite3
import subprocess
import sys
import uuid

import pytest

from conftest import ROOT
from legacy import build_legacy
from mgcp.persistence import migrate, sessions
from mgcp.surfaces.hook import MAX_REMINDER, reminder

HOOK = ROOT / "hooks" / "rem-cycle-trigger.py"
PROJECT = "/work/projects/shop"
LESSON_OPS_DUE_AT_5 = ["staleness_scan", "community_detection"]


def payload(session_id=None, source="startup", cwd=PROJECT) -> str:
    """What Claude Code writes on the hook's stdin (the exact shape seen from Claude Code 2.1)."""
    session_id = session_id or str(uuid.uuid4())
    return json.dumps({"session_id": session_id,
                       "transcript_path": f"/home/dev/.claude/projects/-work-projects-shop/{session_id}.jsonl",
                       "cwd": cwd, "hook_event_name": "SessionStart", "source": source})


def run_hook(stdin: str, db, *args, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args, str(HOOK)], input=stdin, capture_output=True, text=True,
                          env={**os.environ, "MGCP_DB": str(db), **env}, timeout=60)


def session_count(db, path=PROJECT) -> int:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT session_count FROM project_contexts WHERE project_path = ?", [path]).fetchone()
        return row[0] if row else 0
    finally:
        conn.close()


def at_session(db, n: int, path=PROJECT) -> None:
    """Bring the project to session n through the same SQL the hook uses."""
    conn = sessions.open_current(str(db), 5.0)
    try:
        for i in range(n - session_count(db, path)):
            sessions.register_session(conn, path, f"earlier-{i}", "startup", "2025-01-01T00:00:00+00:00")
    finally:
        conn.close()


def write(db, sql: str, params=()) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


def add_pending_finding(db, operation="duplicate_detection") -> None:
    write(db, """INSERT INTO rem_findings (id, project_id, operation, kind, fingerprint, title, description,
                 options, status, created_at) VALUES (?, NULL, ?, 'merge', ?, 't', 'd', '[]', 'pending', ?)""",
          [uuid.uuid4().hex[:8], operation, uuid.uuid4().hex, "2025-01-01T00:00:00+00:00"])


def context(stdout: str) -> str:
    output = json.loads(stdout)
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return output["hookSpecificOutput"]["additionalContext"]


def log_lines(data_dir) -> list[str]:
    log = data_dir / "hook.log"
    return log.read_text().splitlines() if log.exists() else []


# -- sessions -------------------------------------------------------------------------------------

def test_two_startups_with_two_ids_advance_the_session_by_two(db):
    for _ in range(2):
        assert run_hook(payload(), db).returncode == 0
    assert session_count(db) == 2


def test_resume_with_a_known_id_does_not_advance(db):
    run_hook(payload("s-1"), db)
    result = run_hook(payload("s-1", source="resume"), db)
    assert result.returncode == 0 and session_count(db) == 1


def test_compact_with_a_known_id_does_not_advance(db):
    run_hook(payload("s-1"), db)
    run_hook(payload("s-1", source="compact"), db)
    assert session_count(db) == 1


@pytest.mark.parametrize("source", ["resume", "compact"])
def test_an_id_never_seen_is_a_new_session_whatever_its_source(db, source):
    """Only the id tells sessions apart: an unknown id opens the next session even when Claude Code
    says it resumes one, and replaying its JSON does not count it again."""
    at_session(db, 3)
    for _ in range(2):
        assert run_hook(payload("H2", source=source), db).returncode == 0
    assert session_count(db) == 4


def test_clear_with_a_new_id_advances_by_one(db):
    run_hook(payload("s-1"), db)
    run_hook(payload("s-2", source="clear"), db)
    assert session_count(db) == 2


def test_cwd_is_normalized_to_the_project_path(db):
    run_hook(payload(cwd=PROJECT + "/./"), db)
    assert session_count(db) == 1


def test_a_missing_database_is_created_and_migrated(tmp_path):
    db = tmp_path / "new" / "lessons.db"
    result = run_hook(payload(), db)
    assert result.returncode == 0 and result.stdout == ""
    assert migrate.status(db)["pending"] == [] and session_count(db) == 1


def test_a_database_with_pending_migrations_is_upgraded(tmp_path):
    db = tmp_path / "legacy.db"
    build_legacy(db)
    result = run_hook(payload(), db)
    assert result.returncode == 0 and migrate.status(db)["pending"] == [] and session_count(db) == 1


# -- reminders ------------------------------------------------------------------------------------

def test_due_operations_print_one_reminder(db):
    at_session(db, 4)
    result = run_hook(payload(), db)
    text = context(result.stdout)
    assert result.returncode == 0 and len(text) <= MAX_REMINDER
    assert text.startswith("REM cycle due at session 5. Operations ready: staleness_scan, community_detection.")
    assert "rem_run" in text


def test_nothing_due_prints_nothing(db):
    result = run_hook(payload(), db)
    assert result.returncode == 0 and result.stdout == "" and session_count(db) == 1


def test_operations_that_ran_are_not_due_again(db):
    at_session(db, 5)
    project_id = sessions.project_id_for(PROJECT)
    for op in LESSON_OPS_DUE_AT_5:
        write(db, "INSERT INTO rem_state (project_id, operation, last_run_session, last_run_timestamp) "
                  "VALUES (?, ?, 5, '2025-01-01T00:00:00+00:00')", [project_id, op])
    assert run_hook(payload(), db).stdout == ""


def test_pending_findings_alone_print_a_reminder(db):
    add_pending_finding(db)
    text = context(run_hook(payload(), db).stdout)
    assert "1 REM finding awaits review" in text and "review it (or" in text and "due" not in text


def test_a_team_servers_reminder_names_only_the_mcp_tools():
    from mgcp.surfaces.hook import reminder

    for due, pending in ((["staleness_scan"], 0), ([], 2)):
        assert "mgcp rem" in reminder(5, due, pending)
        text = reminder(5, due, pending, local=False)
        assert "rem_run" in text and "mgcp rem" not in text and text.endswith(".")


def test_due_operations_and_findings_share_one_reminder(db):
    at_session(db, 4)
    for _ in range(3):
        add_pending_finding(db)
    text = context(run_hook(payload(), db).stdout)
    assert "Operations ready: staleness_scan, community_detection." in text and "3 REM findings await review" in text


def test_a_per_project_override_in_the_config_file_is_honoured(db, tmp_path):
    config = tmp_path / "rem.yaml"
    config.write_text(f"projects:\n  {PROJECT}:\n    context_summary:\n      interval: 1\n")
    text = context(run_hook(payload(), db, MGCP_REM_CONFIG=str(config)).stdout)
    assert "Operations ready: context_summary." in text


def test_the_reminder_never_exceeds_the_limit():
    text = reminder(10**40, ["an_operation_with_a_long_name"] * 40, 10**40)
    assert len(text) == MAX_REMINDER


# -- failing open ---------------------------------------------------------------------------------

def corrupt(tmp_path):
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    return path


def foreign(tmp_path):
    path = tmp_path / "foreign.db"
    write(path, "CREATE TABLE invoices (id INTEGER)")
    return path


def newer(tmp_path):
    path = tmp_path / "newer.db"
    migrate.open_and_migrate(path)
    write(path, "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('mgcp', '9999_future', 'x')")
    return path


def not_sqlite(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("these are my notes")
    return path


def unwritable_dir(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the data directory should be")
    return blocker / "sub" / "lessons.db"  # works even as root: a path under a file cannot be created


@pytest.mark.parametrize("make_db", [corrupt, foreign, newer, not_sqlite, unwritable_dir])
def test_an_unusable_database_fails_open(tmp_path, isolated_data, make_db):
    db = make_db(tmp_path)
    before = db.read_bytes() if db.exists() else None
    result = run_hook(payload(), db)
    assert (result.returncode, result.stdout) == (0, "")
    assert len(log_lines(isolated_data)) == 1
    assert (db.read_bytes() if db.exists() else None) == before  # refused, never modified


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"cwd": "/p", "source": "startup"}',
                                   '{"session_id": "s", "source": "startup"}', '{"session_id": 7, "cwd": "/p"}'])
def test_bad_input_fails_open(db, isolated_data, stdin):
    result = run_hook(stdin, db)
    assert (result.returncode, result.stdout) == (0, "")
    assert len(log_lines(isolated_data)) == 1 and session_count(db) == 0


@pytest.mark.parametrize("stdin, why", [
    ('{"session_id": "s", "cwd": "/x/P\\u0000x", "source": "startup"}', "'cwd' holds a NUL character"),
    ('{"session_id": "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "cwd": "/p", "source": "startup"}',
     "'session_id' appears to contain"),
    ('{"session_id": "s\\u0000", "cwd": "/p", "source": "startup"}', "'session_id' holds a NUL character"),
    ('{"session_id": "s", "cwd": "/p/' + "d" * 4_100 + '", "source": "startup"}', "the project path is too long"),
    ('{"session_id": "s", "cwd": "/home/dev/ghp_abcdefghijklmnopqrstuvwxyz0123456789", "source": "startup"}',
     "the project path appears to contain a GitHub token"),
    ('{"session_id": "s", "cwd": "/p", "source": "' + "x" * 33 + '"}', "'source' is not a word"),
    ('{"session_id": "s", "cwd": "/p", "source": "start up; rm"}', "'source' is not a word"),
])
def test_what_a_session_start_would_store_is_screened_and_refused_fails_open(db, isolated_data, stdin, why):
    result = run_hook(stdin, db)
    assert (result.returncode, result.stdout) == (0, "")
    assert why in log_lines(isolated_data)[0] and session_count(db) == 0


def test_a_relative_cwd_fails_open_and_registers_no_project(db, isolated_data):
    result = run_hook('{"session_id": "s", "cwd": "relative/dir", "source": "startup"}', db)
    assert (result.returncode, result.stdout) == (0, "")
    assert "'cwd' is not an absolute path" in log_lines(isolated_data)[0]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM project_contexts").fetchone()[0] == 0
    conn.close()


def test_a_locked_database_fails_open_and_registers_nothing(db, isolated_data):
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = run_hook(payload(), db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (result.returncode, result.stdout) == (0, "")
    assert "locked" in log_lines(isolated_data)[0] and session_count(db) == 0


def test_a_bad_config_fails_open_and_names_the_file_in_the_log(db, tmp_path, isolated_data):
    config = tmp_path / "rem.yaml"
    config.write_text("rem:\n  staleness_scan:\n    strategy: weekly\n")
    result = run_hook(payload(), db, MGCP_REM_CONFIG=str(config))
    assert (result.returncode, result.stdout) == (0, "")
    assert str(config) in log_lines(isolated_data)[0]


def test_an_unwritable_log_does_not_break_failing_open(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    result = run_hook("not json", tmp_path / "lessons.db", MGCP_DATA_DIR=str(blocker / "data"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# -- staying light --------------------------------------------------------------------------------

HEAVY = ["pydantic", "typer", "networkx", "community", "aiosqlite", "sqlite_utils", "yaml", "mcp"]


def test_the_steady_state_imports_nothing_heavy(db):
    at_session(db, 4)  # the full path: register, plan, print a reminder
    result = run_hook(payload(), db, "-X", "importtime")
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in result.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "mgcp" in imported and "REM cycle due" in context(result.stdout)
    assert sorted(set(HEAVY) & imported) == []


# -- the recall section ------------------------------------------------------------------------------

def seed_memory(db):
    """A constraint, a lesson used often and the project's notes, as the CLI and MCP tools write them."""
    now = "2026-01-01T00:00:00+00:00"
    for lesson_id, trigger, action, kind, confidence, uses in (
            ("never-force-push", "pushing to main", "Never force-push to main; open a pull request.",
             "constraint", 0.97, 0),
            ("verify-api", "calling an unfamiliar API", "Read its signature first, then one call site.",
             "pattern", 0.8, 12)):
        write(db, """INSERT INTO lessons (id, trigger, action, created_at, last_refined, usage_count)
                     VALUES (?, ?, ?, ?, ?, ?)""", [lesson_id, trigger, action, now, now, uses])
        write(db, "INSERT INTO lesson_traits (lesson_id, version, kind, confidence, created_at) VALUES (?, 1, ?, ?, ?)",
              [lesson_id, kind, confidence, now])
    at_session(db, 1)
    write(db, "UPDATE project_contexts SET notes = ?, todos = ? WHERE project_path = ?",
          ["Payments next. Is the retry cap right?", '[{"content": "load test", "status": "pending"}]', PROJECT])


@pytest.mark.parametrize("source", ["startup", "clear"])
def test_startup_and_clear_carry_the_recall_section(db, source):
    seed_memory(db)
    text = context(run_hook(payload(source=source), db).stdout)
    assert text.startswith("## Memory context (mgcp)") and len(text) <= 2000
    assert "[never-force-push] When pushing to main" in text and "[verify-api]" in text
    assert "Open question: Is the retry cap right?" in text and "Todo: load test" in text
    uses = sqlite3.connect(db).execute("SELECT usage_count FROM lessons WHERE id = 'verify-api'").fetchone()[0]
    assert uses == 12  # a session start is no retrieval: shown lessons are not counted as used


@pytest.mark.parametrize("source", ["resume", "compact"])
def test_resume_and_compact_carry_none(db, source):
    seed_memory(db)
    session_id = str(uuid.uuid4())
    run_hook(payload(session_id), db)
    assert run_hook(payload(session_id, source=source), db).stdout == ""


def test_the_recall_section_follows_the_reminder_and_keeps_the_budget(db, tmp_path):
    at_session(db, 4)
    seed_memory(db)
    config = tmp_path / "rem.yaml"
    config.write_text("recall:\n  hook_budget: 400\n")
    text = context(run_hook(payload(), db, MGCP_REM_CONFIG=str(config)).stdout)
    reminder_text, section = text.split("\n\n", 1)
    assert reminder_text.startswith("REM cycle due at session 5") and len(section) <= 400
    assert "[never-force-push]" in section


def test_a_hook_budget_of_zero_turns_it_off(db, tmp_path):
    seed_memory(db)
    config = tmp_path / "rem.yaml"
    config.write_text("recall:\n  hook_budget: 0\n")
    assert run_hook(payload(), db, MGCP_REM_CONFIG=str(config)).stdout == ""


def test_a_failing_recall_leaves_the_reminder_and_a_log_line(db, isolated_data):
    at_session(db, 4)
    seed_memory(db)
    write(db, "DROP TABLE lesson_outcome_stats")
    text = context(run_hook(payload(), db).stdout)
    assert text.startswith("REM cycle due") and "Memory context" not in text
    assert any("left out the recall section" in line for line in log_lines(isolated_data))


def test_alike_constraints_fill_the_hook_budget_instead_of_being_trimmed(db):
    now = "2026-01-01T00:00:00+00:00"
    for m in range(1, 13):
        write(db, "INSERT INTO lessons (id, trigger, action, created_at, last_refined) VALUES (?, ?, ?, ?, ?)",
              [f"k{m}", f"updating module m{m} of billing",
               f"Run the billing contract suite for module m{m} before merging", now, now])
        write(db, "INSERT INTO lesson_traits (lesson_id, version, kind, confidence, created_at) VALUES (?, 1, ?, ?, ?)",
              [f"k{m}", "constraint", 0.94, now])
    text = context(run_hook(payload(), db).stdout)
    assert len(text) <= 2000 and "trimmed" not in text
    assert all(f"[k{m}] When updating module m{m} of billing" in text for m in range(1, 13))


def test_lessons_without_a_task_are_titled_by_their_ranking_not_by_use(db):
    seed_memory(db)
    text = context(run_hook(payload(), db).stdout)
    assert "### Top-ranked lessons (confidence, use, outcomes)\n- [verify-api]" in text
    assert "Most used" not in text


def test_the_recall_path_imports_nothing_heavy(db):
    seed_memory(db)
    result = run_hook(payload(), db, "-X", "importtime")
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in result.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "[verify-api]" in context(result.stdout)
    assert sorted(set(HEAVY) & imported) == []
