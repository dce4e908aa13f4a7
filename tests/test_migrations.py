import json
import sqlite3
from pathlib import Path

import pytest

from conftest import dump
from legacy import build_legacy, pid
from mgcp.errors import DatabaseError
from mgcp.persistence import migrate

LEGACY_TABLES = ["lessons", "project_contexts", "workflows", "community_summaries",
                 "telemetry_events", "lesson_usage"]


@pytest.fixture
def legacy(tmp_path):
    path = tmp_path / "legacy.db"
    build_legacy(path)
    return path


def columns(path, table):
    conn = sqlite3.connect(path)
    try:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def test_blank_database_gets_exact_columns(db):
    assert columns(db, "lessons") == ["id", "trigger", "action", "rationale", "examples", "version",
                                      "created_at", "last_refined", "last_used", "usage_count", "tags",
                                      "parent_id", "related_ids", "relationships"]
    assert columns(db, "lesson_versions") == ["id", "lesson_id", "version", "trigger", "action", "rationale",
                                              "tags", "timestamp", "refinement_reason", "session_id",
                                              "reconstructed"]
    assert columns(db, "context_history") == ["id", "project_id", "session_number", "session_id", "timestamp",
                                              "notes", "active_files", "todos", "recent_decisions",
                                              "catalogue_hash", "catalogue_delta"]
    assert columns(db, "rem_state")[:2] == ["project_id", "operation"]
    assert columns(db, "reinforced_patterns") == ["id", "cluster_key", "category", "text", "lesson_id", "canonical",
                                                  "reinforcement_count", "last_reinforced_at", "derived_from",
                                                  "derived_via", "created_at", "updated_at"]
    assert columns(db, "decision_observations") == ["project_id", "session_number", "decision", "observed_at"]
    assert columns(db, "community_kept_readings") == ["name", "state"]
    assert columns(db, "community_kept_runs") == ["id", "settings", "runs_since_full", "lessons"]
    assert columns(db, "community_kept") == []  # dropped by 0019


def test_migrating_twice_changes_nothing(db):
    before = dump(db)
    assert migrate.open_and_migrate(db).applied == []
    assert dump(db) == before


def test_legacy_rows_stay_byte_identical(legacy):
    before = dump(legacy, LEGACY_TABLES)
    schema_before = sqlite3.connect(legacy).execute(
        "SELECT name, sql FROM sqlite_master WHERE name IN (%s)" % ",".join("?" * len(LEGACY_TABLES)),
        LEGACY_TABLES).fetchall()
    report = migrate.open_and_migrate(legacy)
    assert report.failures == {} and len(report.applied) == len(migrate.migration_names())
    assert dump(legacy, LEGACY_TABLES) == before
    assert sqlite3.connect(legacy).execute(
        "SELECT name, sql FROM sqlite_master WHERE name IN (%s)" % ",".join("?" * len(LEGACY_TABLES)),
        LEGACY_TABLES).fetchall() == schema_before


def test_second_migrate_of_legacy_changes_nothing(legacy):
    migrate.open_and_migrate(legacy)
    before = dump(legacy)
    migrate.open_and_migrate(legacy)
    assert dump(legacy) == before


def versions(path, lesson_id):
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    return [dict(r) for r in conn.execute(
        "SELECT * FROM lesson_versions WHERE lesson_id = ? ORDER BY version", [lesson_id])]


def test_v1_lesson_gets_one_real_row(legacy):
    migrate.open_and_migrate(legacy)
    rows = versions(legacy, "plain-v1")
    assert [(r["version"], r["reconstructed"], r["action"]) for r in rows] == [(1, 0, "Read its signature first.")]


def test_v3_lesson_reasons_and_rationale_prefixes(legacy):
    migrate.open_and_migrate(legacy)
    rows = versions(legacy, "three-versions")
    assert [r["version"] for r in rows] == [1, 2, 3]
    assert rows[0]["rationale"] == "Flaky tests erode trust."
    assert rows[0]["refinement_reason"] == "did not say how to find the cause"
    assert rows[1]["rationale"] == "Flaky tests erode trust.\n\n[v2] did not say how to find the cause"
    assert rows[1]["refinement_reason"] == "quarantining alone hid real bugs"
    assert rows[2]["refinement_reason"] is None
    assert rows[2]["action"] == "Quarantine it and file a ticket." and rows[2]["reconstructed"] == 0
    assert [r["reconstructed"] for r in rows[:2]] == [1, 1]


def test_v2_lesson_refined_from_empty_rationale(legacy):
    migrate.open_and_migrate(legacy)
    rows = versions(legacy, "from-empty")
    assert rows[0]["rationale"] == "" and rows[0]["reconstructed"] == 1
    assert rows[0]["refinement_reason"] == "generated files drifted from their sources"
    assert rows[1]["rationale"] == "generated files drifted from their sources"


def test_each_project_gets_one_session_zero_row(legacy):
    migrate.open_and_migrate(legacy)
    conn = sqlite3.connect(legacy)
    rows = conn.execute("SELECT project_id, session_number, catalogue_delta FROM context_history ORDER BY project_id").fetchall()
    assert [(r[0], r[1]) for r in rows] == sorted([(pid("/home/dev/alpha"), 0), (pid("/home/dev/beta"), 0)])
    assert json.loads(rows[0][2])["removed"] == {}


def test_newer_database_is_refused_untouched(db):
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('mgcp', '9999_future', 'x')")
    conn.commit()
    conn.close()
    before = dump(db)
    with pytest.raises(DatabaseError, match="newer mgcp"):
        migrate.open_and_migrate(db)
    assert dump(db) == before


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(DatabaseError, match="another application"):
        migrate.open_and_migrate(path)
    assert [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")] == ["customers"]


@pytest.mark.parametrize("schema", [
    ["CREATE TABLE lessons (id INTEGER PRIMARY KEY, title TEXT)"],  # another application's lessons
    ["CREATE TABLE lessons (id TEXT, trigger TEXT, action TEXT, rationale TEXT, version INTEGER, "  # some of
     "created_at TEXT, last_refined TEXT, tags TEXT, relationships TEXT)"],  # the legacy columns only
    ["CREATE TABLE _sqlite_migrations (migration_set TEXT, name TEXT, applied_at TEXT)",  # sqlite-utils'
     "INSERT INTO _sqlite_migrations VALUES ('shop', '0001_init', 'x')", "CREATE TABLE customers (id INTEGER)"],
])
def test_another_applications_file_is_refused_even_with_a_lessons_or_migrations_table(tmp_path, schema):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    for statement in schema:
        conn.execute(statement)
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(DatabaseError, match="belongs to another application"):
        migrate.open_and_migrate(path)
    assert path.read_bytes() == before and not Path(f"{path}-wal").exists()  # not even put in WAL mode


def test_non_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(DatabaseError, match="not an SQLite database"):
        migrate.open_and_migrate(path)
    assert path.read_text() == "hello"


def test_bad_record_is_reported_skipped_and_retried(legacy):
    conn = sqlite3.connect(legacy)
    conn.execute("UPDATE lessons SET version = -1 WHERE id = 'plain-v1'")
    conn.commit()
    conn.close()
    report = migrate.open_and_migrate(legacy)
    assert "plain-v1" in report.failures["0004_backfill_lesson_versions"][0]
    assert {"0004_backfill_lesson_versions", "0020_complete_lesson_histories"} <= set(migrate.status(legacy)["pending"])
    assert versions(legacy, "three-versions")  # the good records went in
    conn = sqlite3.connect(legacy)
    conn.execute("UPDATE lessons SET version = 1 WHERE id = 'plain-v1'")
    conn.commit()
    conn.close()
    assert migrate.open_and_migrate(legacy).applied == ["0004_backfill_lesson_versions", "0020_complete_lesson_histories"]
    assert len(versions(legacy, "plain-v1")) == 1


LEGACY_V3 = ("Original why.\n\n[v2] first reason\n\n[v3] second reason")


def test_a_legacy_lesson_with_comma_separated_tags_gets_its_whole_history(legacy):
    """0004 backfills a lesson whose tags column holds comma-separated words with the tags mgcp
    reads there, in the first upgrade: nothing is left pending, and no legacy row changes."""
    conn = sqlite3.connect(legacy)
    conn.execute("UPDATE lessons SET tags = 'deploy, database', version = 3, rationale = ? WHERE id = 'plain-v1'",
                 [LEGACY_V3])
    conn.commit()
    conn.close()
    before = dump(legacy, LEGACY_TABLES)
    migrate.open_and_migrate(legacy)
    rows = versions(legacy, "plain-v1")
    assert [(r["version"], r["reconstructed"], r["refinement_reason"]) for r in rows] == [
        (1, 1, "first reason"), (2, 1, "second reason"), (3, 0, None)]
    assert rows[1]["rationale"] == "Original why.\n\n[v2] first reason"
    assert {r["tags"] for r in rows} == {json.dumps(["deploy", "database"])}
    assert migrate.status(legacy)["pending"] == [] and dump(legacy, LEGACY_TABLES) == before
    assert migrate.open_and_migrate(legacy).applied == []


def test_0004_left_pending_by_an_older_mgcp_adds_nothing(legacy):
    """A database upgraded before 0004 read comma-separated tags: 0004 stayed pending and 0020
    rebuilt the lesson's rows. 0004, run at the next start, finds nothing to add."""
    conn = sqlite3.connect(legacy)
    conn.execute("UPDATE lessons SET tags = 'deploy, database', version = 3, rationale = ? WHERE id = 'plain-v1'",
                 [LEGACY_V3])
    conn.commit()
    conn.close()
    migrate.open_and_migrate(legacy)
    rows = versions(legacy, "plain-v1")
    conn = sqlite3.connect(legacy)
    with conn:
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0004_backfill_lesson_versions'")
    conn.close()
    assert migrate.open_and_migrate(legacy).applied == ["0004_backfill_lesson_versions"]
    assert versions(legacy, "plain-v1") == rows


def test_a_lesson_refined_before_its_first_rows_were_rebuilt_gets_them_back(legacy):
    """A database where a refinement wrote only rows N and N+1 of a lesson no backfill reached:
    0020 rebuilds rows 1..N-1 from row N's legacy rationale."""
    migrate.open_and_migrate(legacy)
    conn = sqlite3.connect(legacy)
    with conn:
        conn.execute("DELETE FROM lesson_versions WHERE lesson_id = 'three-versions' AND version < 3")
        conn.execute("UPDATE lesson_versions SET refinement_reason = 'third reason' WHERE lesson_id = 'three-versions'")
        conn.execute("""INSERT INTO lesson_versions (lesson_id, version, trigger, action, rationale, tags, timestamp)
                        SELECT lesson_id, 4, trigger, 'Newer.', 'Newer why.', tags, timestamp FROM lesson_versions
                        WHERE lesson_id = 'three-versions'""")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0020_complete_lesson_histories'")
    conn.close()
    assert migrate.open_and_migrate(legacy).applied == ["0020_complete_lesson_histories"]
    rows = versions(legacy, "three-versions")
    assert [(r["version"], r["reconstructed"], r["refinement_reason"]) for r in rows] == [
        (1, 1, "did not say how to find the cause"), (2, 1, "quarantining alone hid real bugs"),
        (3, 0, "third reason"), (4, 0, None)]


def test_status_lists_applied_pending_and_counts(legacy):
    status = migrate.status(legacy)
    assert status["applied"] == [] and status["pending"] == migrate.migration_names()
    migrate.open_and_migrate(legacy)
    status = migrate.status(legacy)
    assert status["pending"] == [] and status["tables"]["lessons"] == 3


def test_the_search_index_loses_inactive_lessons_once_and_keeps_active_ones(db):
    """0010 takes out of the index lessons that an earlier mgcp left there when they stopped being
    active; running it again changes nothing."""
    migrate.open_and_migrate(db)
    conn = sqlite3.connect(db)
    with conn:
        for n, lesson_id in enumerate(("kept", "gone")):
            conn.execute("INSERT INTO lessons (id, trigger, action, version, tags, created_at, last_refined) "
                         "VALUES (?, 'deploying', ?, 1, '[]', 'x', 'x')",
                         [lesson_id, f"Tag release {n}"])
            conn.execute("INSERT INTO lesson_search_docs (lesson_id) VALUES (?)", [lesson_id])
            conn.execute("""INSERT INTO lesson_search (rowid, trigger, action, rationale, tags)
                            SELECT d.id, 'deploying', ?, '', '[]' FROM lesson_search_docs d WHERE lesson_id = ?""",
                         [f"Tag release {n}", lesson_id])
        for name in ("insert", "update", "delete"):  # the state before 0010
            conn.execute(f"DROP TRIGGER lesson_search_on_lifecycle_{name}")
        conn.execute("INSERT INTO lesson_lifecycle (lesson_id, status, changed_at) VALUES ('gone', 'superseded', 'x')")
        conn.execute(f"DELETE FROM {migrate.MIGRATIONS_TABLE} WHERE name = '0010_search_active_only'")

    def indexed():
        return [r[0] for r in conn.execute("""SELECT d.lesson_id FROM lesson_search
                                               JOIN lesson_search_docs d ON d.id = lesson_search.rowid""")]
    assert indexed() == ["kept", "gone"]
    assert migrate.open_and_migrate(db).applied == ["0010_search_active_only"]
    assert indexed() == ["kept"]
    assert migrate.open_and_migrate(db).applied == [] and indexed() == ["kept"]


def test_the_kept_community_rows_give_way_to_one_state_and_the_next_run_is_full(db):
    """0019 drops `community_kept` (a cache of a row per lesson) and adds `community_kept_runs.lessons`,
    NULL in the row kept so far; running it again changes nothing."""
    migrate.open_and_migrate(db)
    conn = sqlite3.connect(db)
    with conn:  # the state before 0019, with what an earlier mgcp kept
        conn.execute("DROP TABLE community_kept_runs")
        conn.execute("CREATE TABLE community_kept_runs (id INTEGER PRIMARY KEY CHECK (id = 1), "
                     "settings TEXT NOT NULL, runs_since_full INTEGER NOT NULL)")
        conn.execute("INSERT INTO community_kept_runs VALUES (1, 'abc@1', 2)")
        conn.execute("CREATE TABLE community_kept (lesson_id TEXT PRIMARY KEY, content TEXT NOT NULL, "
                     "candidates TEXT NOT NULL, label INTEGER NOT NULL, edges TEXT NOT NULL) WITHOUT ROWID")
        conn.execute("INSERT INTO community_kept VALUES ('l1', 'c', '[]', 0, 'e')")
        conn.execute(f"DELETE FROM {migrate.MIGRATIONS_TABLE} WHERE name = '0019_community_kept_lessons'")
    conn.close()
    assert migrate.open_and_migrate(db).applied == ["0019_community_kept_lessons"]
    assert columns(db, "community_kept") == []
    assert sqlite3.connect(db).execute("SELECT * FROM community_kept_runs").fetchall() == [(1, "abc@1", 2, None)]
    before = dump(db)
    assert migrate.open_and_migrate(db).applied == [] and dump(db) == before
