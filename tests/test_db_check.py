"""`mgcp db check`: a database built through the real store checks clean; each kind of damage planted
in a copy of it is found and named; `--repair` changes nothing without `--yes` and, with it, fixes
what can be fixed without loss."""

import asyncio
import json
import shutil
import sqlite3

import pytest

from clihelp import mgcp
from conftest import dump
from legacy import LESSONS, build_legacy
from mgcp import engine
from mgcp.config import OPERATIONS, parse_config
from mgcp.persistence.migrate import migration_names
from mgcp.persistence.migrate import open_and_migrate
from mgcp.persistence.store import Store
from planted import PROJECT, build

CONFIG = parse_config({}, "defaults")
LESSON = "check-retry-flaky-calls"  # added here and refined twice: versions 1..3


async def use(path) -> dict:
    """A day of use on top of the planted project: a lesson refined twice, two sessions that change
    the catalogue, a REM cycle, and findings applied, rejected, undone and gone stale. Returns the
    ids of those findings."""
    async with Store.open(path) as s:
        await s.lessons.add(LESSON, "calling a flaky service", "Retry", tags=["http"])
        await s.lessons.refine(LESSON, "retries need a limit", action="Retry with capped backoff")
        await s.lessons.refine(LESSON, "clients retry in lockstep", action="Retry with capped backoff and jitter",
                               tags=["http", "retry"])
        catalogue = dict((await s.context.get_project(PROJECT)).catalogue)
        await s.context.save(PROJECT, "check-session-1", notes="retries",
                             catalogue={**catalogue, "retries": {"max": 3}})
        await s.context.save(PROJECT, "check-session-2", catalogue={**catalogue, "retries": {"max": 5}})
        await engine.run_cycle(s, CONFIG, PROJECT, list(OPERATIONS))
        queue = {f.kind: f for f in await engine.pending_findings(s, PROJECT)}

        async def answer(kind, action):
            finding = queue[kind]
            option = next(i for i, o in enumerate(finding.options, 1) if o.action == action)
            await engine.resolve(s, CONFIG, finding.id, option)
            return finding.id

        ids = {"applied": await answer("duplicate_merge", "merge"),
               "rejected": await answer("duplicate_review", "keep_both"),
               "todo": await answer("stale_todo", "close_todo"),  # a save: a history row
               "undone": await answer("stale_unused", "archive")}
        await engine.undo_finding(s, ids["undone"])
        stale = queue["popular_unrefined"]
        await s.lessons.refine(next(iter(stale.subject)), "clearer", rationale="Pin with a lockfile.")
        await engine.pending_findings(s, PROJECT)  # marks it stale on the way
        ids["stale"] = stale.id
    return ids


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("check") / "clean.db"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MGCP_DATA_DIR", str(path.parent / "data"))
        env.setenv("HOME", str(path.parent / "home"))
        env.delenv("MGCP_DB", raising=False)
        env.delenv("MGCP_REM_CONFIG", raising=False)
        open_and_migrate(path)
        build(path)
        ids = asyncio.run(use(path))
    return path, ids


@pytest.fixture
def copy(built, tmp_path):
    path = tmp_path / "copy.db"
    shutil.copy(built[0], path)
    return path


@pytest.fixture
def ids(built):
    return built[1]


def sql(path, query, *params) -> list:
    conn = sqlite3.connect(path)
    try:
        with conn:
            return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def check(path, *flags):
    return mgcp("db", "check", "--db", path, *flags)


def problems(path, *flags) -> list[str]:
    """The problem lines of a check that must find something (exit 1, nothing on stderr)."""
    code, out, err = check(path, *flags)
    assert (code, err) == (1, ""), (code, out, err)
    lines = out.splitlines()
    assert lines[0] == f"database: {path}" and lines[-1].endswith("problem(s) found"), out
    return lines[1:-1]


def history(path) -> list[tuple]:
    return sql(path, "SELECT id, session_number, catalogue_delta FROM context_history ORDER BY id")


# -- a clean database ------------------------------------------------------------------------------

def test_a_database_built_through_the_store_checks_clean(copy, ids):
    statuses = dict(sql(copy, "SELECT id, status FROM rem_findings"))
    assert [statuses[ids[k]] for k in ("applied", "rejected", "todo", "undone", "stale")] == [
        "applied", "rejected", "applied", "pending", "stale"]
    assert sql(copy, "SELECT count(*) FROM rem_actions WHERE undone_at IS NOT NULL") == [(1,)]
    code, out, err = check(copy)
    counts = {t: sql(copy, f"SELECT count(*) FROM {t}")[0][0]
              for t in ("lessons", "lesson_versions", "project_contexts", "context_history", "rem_findings")}
    assert (code, err) == (0, "")
    assert out == (f"database: {copy}\nok: {counts['lessons']} lessons, {counts['lesson_versions']} versions, "
                   f"{counts['project_contexts']} projects, {counts['context_history']} history rows, "
                   f"{counts['rem_findings']} findings checked\n")


def test_json_has_the_database_the_verdict_the_problems_and_the_counts(copy):
    sql(copy, "DELETE FROM lesson_versions WHERE lesson_id = ? AND version = 2", LESSON)
    code, out, err = check(copy, "--json")
    assert (code, err) == (1, "")
    document = json.loads(out)
    assert set(document) == {"database", "ok", "problems", "checked"}
    assert (document["database"], document["ok"]) == (str(copy), False)
    assert [(p["check"], p["subject"], p["repairable"]) for p in document["problems"]] == [
        ("lessons", f"lesson {LESSON}", False)]
    assert {"check", "subject", "message", "repairable"} <= set(document["problems"][0])
    assert document["checked"]["lessons"] == sql(copy, "SELECT count(*) FROM lessons")[0][0]
    assert set(document["checked"]) >= {"lessons", "versions", "projects", "history_rows", "findings"}


def test_a_legacy_database_is_clean_once_migrated(tmp_path):
    path = tmp_path / "legacy.db"
    build_legacy(path)
    assert check(path)[:2] == (0, f"database: {path}\nwarning: migrations: {len(migration_names())} migrations pending; run `mgcp db migrate`"
                                  f"\nok: {len(LESSONS)} lessons, 0 versions, 2 projects, 0 history rows, "
                                  "0 findings checked\n")
    open_and_migrate(path)
    code, out, err = check(path)
    assert (code, err) == (0, ""), out
    assert out.splitlines()[1].startswith(f"ok: {len(LESSONS)} lessons, 6 versions, ")


# -- one kind of damage per test -------------------------------------------------------------------

def test_a_gap_in_a_lessons_versions(copy):
    sql(copy, "DELETE FROM lesson_versions WHERE lesson_id = ? AND version = 2", LESSON)
    assert problems(copy) == [f"lesson {LESSON}: version 2 missing from lesson_versions (expected 1..3); "
                              "a lost version cannot be rebuilt: restore a backup to recover it"]


def test_a_missing_current_version_is_appended_whole_by_one_repair(copy):
    """Appended from the lessons row with the kind and confidence of the version before it, so the
    check after the repair finds nothing left to repair."""
    sql(copy, "DELETE FROM lesson_versions WHERE lesson_id = ? AND version = 3", LESSON)
    sql(copy, "DELETE FROM lesson_traits WHERE lesson_id = ? AND version = 3", LESSON)
    assert problems(copy) == [f"lesson {LESSON}: version 3, its current one, is missing from lesson_versions "
                              "(repairable)"]
    code, out, err = check(copy, "--repair", "--yes")
    assert (code, err) == (0, "") and "after repair:\nok: " in out, out
    assert sql(copy, "SELECT kind, confidence FROM lesson_traits WHERE lesson_id = ? AND version = 3", LESSON) == \
        sql(copy, "SELECT kind, confidence FROM lesson_traits WHERE lesson_id = ? AND version = 2", LESSON)


def test_refining_a_lesson_whose_history_has_a_gap_is_refused_and_the_check_still_says_so(copy):
    """Versions 4 and 5 lost (the row at 6, the history at 3): a refinement would rebuild them as
    placeholders and hide the gap, so it writes nothing and sends the user to the check."""
    sql(copy, "UPDATE lessons SET version = 6 WHERE id = ?", LESSON)
    before = dump(copy)
    code, _, err = mgcp("lesson", "refine", LESSON, "--reason", "sharper", "--action", "A sharper action text",
                        "--db", copy)
    assert code == 2 and f"lesson {LESSON}'s history is incomplete (version 4, 5 missing" in err, err
    assert dump(copy) == before
    assert problems(copy) == [f"lesson {LESSON}: version 4, 5, 6 missing from lesson_versions (expected 1..6); "
                              "a lost version cannot be rebuilt: restore a backup to recover it"]


def test_a_version_that_lost_its_kind_and_confidence_gets_those_of_the_version_before(copy):
    sql(copy, "UPDATE lesson_traits SET kind = 'constraint', confidence = 0.9 WHERE lesson_id = ? AND version = 2",
        LESSON)
    sql(copy, "DELETE FROM lesson_traits WHERE lesson_id = ? AND version = 3", LESSON)
    assert problems(copy) == [f"lesson {LESSON}: version 3 has no kind and confidence, though an earlier version "
                              "has them (repairable)"]
    code, out, err = check(copy, "--repair", "--yes")
    assert code == 0, (out, err)
    assert sql(copy, "SELECT kind, confidence FROM lesson_traits WHERE lesson_id = ? AND version = 3",
               LESSON) == [("constraint", 0.9)]
    assert check(copy)[0] == 0


def test_json_columns_that_hold_no_json_or_the_wrong_shape(copy, ids):
    """What the store and an import read as JSON: each bad value is named (not repairable: its
    content is lost), where before the check said ok and `rem show`, `rem undo` and a restore of an
    export failed."""
    sql(copy, "UPDATE lessons SET examples = 'nope' WHERE id = ?", LESSON)
    sql(copy, "UPDATE rem_findings SET data = '{broken' WHERE id = ?", ids["applied"])
    sql(copy, "UPDATE rem_actions SET changes = '{}' WHERE finding_id = ?", ids["applied"])
    action = sql(copy, "SELECT id FROM rem_actions WHERE finding_id = ?", ids["applied"])[0][0]
    tail = "an import of an export refuses it, and a command reading it may fail; restore a backup"
    assert problems(copy) == [
        f"lessons {LESSON}: its examples is not a JSON array ('nope'): {tail}",
        f"rem_actions {action}: its changes is not a JSON array ('{{}}'): {tail}",
        f"rem_findings {ids['applied']}: its data is not a JSON object ('{{broken'): {tail}"]
    code, out, err = mgcp("rem", "show", ids["applied"], "--db", copy)
    assert (code, out) == (1, "") and "the database holds a value that is not JSON" in err and err.count("\n") == 1


def test_a_legacy_catalogue_holding_nan_upgrades_to_a_database_the_check_finds_sound(tmp_path):
    """Python's json wrote NaN and Infinity into an older catalogue; the upgrade's history carries
    them, mgcp reads them back, and an export imports: the check names no problem."""
    path = tmp_path / "legacy.db"
    build_legacy(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE project_contexts SET catalogue = '{\"retries\": NaN, \"limit\": Infinity}'")
    open_and_migrate(path)
    code, out, err = mgcp("db", "check", "--db", path)
    assert (code, err) == (0, ""), out
    code, out, err = mgcp("export", "jsonl", "--out", tmp_path / "x.jsonl", "--db", path)
    assert code == 0, err


def test_a_lessons_row_that_differs_from_its_last_version(copy):
    sql(copy, "UPDATE lessons SET action = 'Never retry' WHERE id = ?", LESSON)
    line, search = problems(copy)
    assert line.startswith(f"lesson {LESSON}: its lessons row differs from its version 3 in action;")
    assert search == f"lesson {LESSON}: has other text in the search index than its current version " \
                     "(queries read the index) (repairable)"


def test_a_lessons_row_whose_version_is_not_a_number(copy):
    sql(copy, "UPDATE lessons SET version = 'three' WHERE id = ?", LESSON)
    assert problems(copy) == [f"lesson {LESSON}: its row has version 'three', not a whole number from 1"]


def test_tags_in_another_order_are_the_same_tags(copy):
    sql(copy, """UPDATE lessons SET tags = '["retry","http"]' WHERE id = ?""", LESSON)
    assert check(copy)[0] == 0


def test_a_tampered_catalogue_delta_fails_its_hash(copy):
    row_id, _, delta = next(r for r in history(copy) if "retries" in r[2] and '"max": 5' in r[2])
    tampered = delta.replace('"max": 5', '"max": 50')
    sql(copy, "UPDATE context_history SET catalogue_delta = ? WHERE id = ?", tampered, row_id)
    [line] = problems(copy)
    assert line.startswith(f"context_history row {row_id} of {PROJECT}: session ")
    assert "does not match the recorded hash" in line


def test_a_session_number_going_backwards(copy):
    (row_id, number, _), (previous_id, previous, _) = history(copy)[-1], history(copy)[-2]
    sql(copy, "UPDATE context_history SET session_number = 1 WHERE id = ?", row_id)
    assert problems(copy) == [f"context_history row {row_id} of {PROJECT}: is session 1 but comes after row "
                              f"{previous_id} of session {previous}: session numbers must not go backwards"]


def test_a_session_number_used_twice(copy):
    [(first,)] = sql(copy, "SELECT session_id FROM project_sessions WHERE session_number = 1")
    [(last,)] = sql(copy, "SELECT session_id FROM project_sessions ORDER BY session_number DESC LIMIT 1")
    sql(copy, "UPDATE project_sessions SET session_number = 1 WHERE session_id = ?", last)
    assert problems(copy) == [f"session {last} of {PROJECT}: has number 1, as session {first} does"]


def test_a_live_action_whose_finding_is_pending(copy, ids):
    sql(copy, "UPDATE rem_findings SET status = 'pending' WHERE id = ?", ids["applied"])
    [line] = problems(copy)
    assert line.startswith(f"finding {ids['applied']}: is pending but its action #")
    assert line.endswith(f"(merge) is live; `mgcp rem undo {ids['applied']}` takes the action back")


def test_an_applied_finding_without_a_live_action(copy, ids):
    sql(copy, "UPDATE rem_actions SET undone_at = '2025-01-01' WHERE finding_id = ?", ids["applied"])
    assert problems(copy) == [f"finding {ids['applied']}: is applied but has no live action record (it was "
                              "undone or never recorded), so `mgcp rem undo` cannot take it back"]


def test_a_finding_both_applied_and_stale(copy, ids):
    sql(copy, "UPDATE rem_findings SET status = 'stale' WHERE id = ?", ids["applied"])
    [line] = problems(copy)
    assert line.startswith(f"finding {ids['applied']}: is both applied and stale")
    assert line.endswith("(merge) is live (repairable)")


def test_an_unknown_migration(copy):
    sql(copy, "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('mgcp', '9999_future', 'now')")
    assert problems(copy) == ["migration 9999_future: is not known to this mgcp (a newer mgcp applied it); "
                              "upgrade mgcp to use this database"]


def test_a_missing_table(copy):
    sql(copy, "DROP TABLE community_runs")
    assert problems(copy) == ["table community_runs: is missing, though 0003_rem_tables that creates it is "
                              "applied; restore a backup"]


def test_a_pending_migration_is_a_warning(copy):
    sql(copy, "DELETE FROM _sqlite_migrations WHERE name = '0006_lesson_search'")
    code, out, err = check(copy)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == ["warning: migrations: 1 migration pending; run `mgcp db migrate`",
                                    out.splitlines()[-1]]
    assert out.splitlines()[-1].startswith("ok: ")


def test_a_foreign_key_violation(copy):
    sql(copy, "INSERT INTO lesson_usage (lesson_id) VALUES ('no-such-lesson')")
    [line] = problems(copy)
    assert line.startswith("lesson_usage row ")
    assert line.endswith(": lesson_id 'no-such-lesson' refers to no lessons row")


def damage(path):
    """Fill the database with enough rows that its middle is table pages, then overwrite a page there."""
    sql(path, "CREATE TABLE filler (text TEXT)")
    sql(path, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
              "INSERT INTO filler SELECT i || printf('%.300c', 'x') FROM n")
    assert "database file" not in check(path)[1]  # the file is sound before the damage
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2 // 4096 * 4096)
        fh.write(bytes(range(256)) * 16)


def test_a_damaged_page(copy):
    damage(copy)
    lines = problems(copy)
    assert lines and all(line.startswith("database file: ") for line in lines), lines
    assert "(the file is damaged; restore a backup)" in lines[0]


def test_a_damaged_schema_page_is_reported_rather_than_refused(copy):
    with open(copy, "r+b") as fh:
        fh.seek(100)  # page 1 after the file header: the root of sqlite_master
        fh.write(b"\xff" * 3000)
    assert problems(copy)[0] == ("database file: database disk image is malformed "
                                 "(the file is damaged; restore a backup)")


# -- repairs ---------------------------------------------------------------------------------------

def plant_repairable(path, ids):
    sql(path, "UPDATE rem_findings SET status = 'stale' WHERE id = ?", ids["applied"])
    sql(path, "DELETE FROM lesson_versions WHERE lesson_id = ? AND version = 3", LESSON)


def test_a_search_index_out_of_step_is_indexed_again(copy):
    """An archived lesson still in the index, an active one missing from it: both reported, and the
    repair makes the index hold exactly the active lessons again."""
    def indexed():
        return sql(copy, "SELECT d.lesson_id FROM lesson_search s JOIN lesson_search_docs d ON d.id = s.rowid ORDER BY 1")
    before = indexed()
    archived, missing = before[0][0], before[1][0]
    for name in ("insert", "update", "delete"):  # as if something wrote around the triggers
        sql(copy, f"DROP TRIGGER lesson_search_on_lifecycle_{name}")
    sql(copy, "INSERT INTO lesson_lifecycle (lesson_id, status, changed_at) VALUES (?, 'archived', 'x')", archived)
    sql(copy, "DELETE FROM lesson_search WHERE rowid = (SELECT id FROM lesson_search_docs WHERE lesson_id = ?)", missing)
    assert problems(copy) == [
        "search index: the triggers that keep it to active lessons are missing, so an archived or restored "
        "lesson would not leave or rejoin it (repairable)",
        f"lesson {archived}: is archived but still in the search index (queries read the index) (repairable)",
        f"lesson {missing}: is active but missing from the search index (queries read the index) (repairable)"]
    code, out, err = check(copy, "--repair", "--yes")
    assert (code, err) == (0, ""), out
    assert indexed() == [row for row in before if row[0] != archived]
    sql(copy, "DELETE FROM lesson_lifecycle WHERE lesson_id = ?", archived)  # the triggers work again
    assert indexed() == before


def test_an_index_entry_that_belongs_to_no_lesson_is_taken_out(copy):
    """Its docs row gone, a lesson's old entry would stay behind (taking a place among a query's best
    matches) while the lesson is indexed again under a new one."""
    lesson = sql(copy, "SELECT lesson_id FROM lesson_search_docs ORDER BY lesson_id")[-1][0]
    sql(copy, "DELETE FROM lesson_search_docs WHERE lesson_id = ?", lesson)
    assert problems(copy) == [
        f"lesson {lesson}: is active but missing from the search index (queries read the index) (repairable)",
        "search index: 1 entry belongs to no lesson (they take places among a query's best matches) (repairable)"]
    code, out, err = check(copy, "--repair", "--yes")
    assert (code, err) == (0, ""), out
    assert sql(copy, "SELECT count(*) FROM lesson_search")[0][0] == sql(
        copy, "SELECT count(*) FROM lesson_search_docs d JOIN lesson_search s ON s.rowid = d.id")[0][0]


def test_before_migration_0010_an_inactive_lesson_in_the_index_is_no_fault(copy):
    archived = sql(copy, "SELECT lesson_id FROM lesson_search_docs ORDER BY lesson_id")[0][0]
    for name in ("insert", "update", "delete"):
        sql(copy, f"DROP TRIGGER lesson_search_on_lifecycle_{name}")
    sql(copy, "DELETE FROM _sqlite_migrations WHERE name = '0010_search_active_only'")
    sql(copy, "INSERT INTO lesson_lifecycle (lesson_id, status, changed_at) VALUES (?, 'archived', 'x')", archived)
    code, out, err = check(copy)
    assert (code, err) == (0, "") and "0010_search_active_only" not in out.splitlines()[-1], out


def test_repair_without_yes_shows_the_repairs_and_changes_nothing(copy, ids):
    plant_repairable(copy, ids)
    before, rows = copy.read_bytes(), dump(copy)
    code, out, err = check(copy, "--repair")
    assert (code, err) == (1, "")
    assert out.splitlines()[-3:] == ["would repair (run again with --repair --yes to do it):",
                                     f"  lesson {LESSON}: append version 3 from the lessons row",
                                     f"  finding {ids['applied']}: mark it applied again "
                                     "(its action stays live and undoable)"]
    assert (copy.read_bytes(), dump(copy)) == (before, rows)


def test_repair_yes_fixes_and_checks_again(copy, ids):
    plant_repairable(copy, ids)
    code, out, err = check(copy, "--repair", "--yes")
    assert (code, err) == (0, ""), out
    assert "repaired:" in out.splitlines() and out.splitlines()[-2] == "after repair:"
    assert out.splitlines()[-1].startswith("ok: ")
    assert sql(copy, "SELECT status FROM rem_findings WHERE id = ?", ids["applied"]) == [("applied",)]
    assert sql(copy, "SELECT trigger, action, rationale, tags FROM lesson_versions WHERE lesson_id = ? AND version = 3",
               LESSON) == sql(copy, "SELECT trigger, action, rationale, tags FROM lessons WHERE id = ?", LESSON)
    assert check(copy)[0] == 0


def test_a_lesson_with_no_versions_is_backfilled(copy):
    sql(copy, "DELETE FROM lesson_versions WHERE lesson_id = ?", LESSON)
    code, out, err = mgcp("lesson", "history", LESSON, "--db", copy)
    assert (code, out) == (0, "") and "has no versions recorded; `mgcp db check`" in err  # not silence
    code, out, err = check(copy, "--repair", "--yes", "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert (document["ok"], document["repaired"], [p["subject"] for p in document["repairs"]]) == (
        True, True, [f"lesson {LESSON}"])
    assert sql(copy, "SELECT version, reconstructed FROM lesson_versions WHERE lesson_id = ? ORDER BY version",
               LESSON) == [(1, 1), (2, 1), (3, 0)]


def test_a_damaged_file_is_never_repaired(copy, ids):
    plant_repairable(copy, ids)
    damage(copy)
    before = copy.read_bytes()
    lines = problems(copy, "--repair", "--yes")
    assert not any("(repairable)" in line or "repair" in line for line in lines), lines
    assert copy.read_bytes() == before


def test_repair_leaves_what_it_cannot_fix_alone(copy):
    sql(copy, "DELETE FROM lesson_versions WHERE lesson_id = ? AND version = 2", LESSON)
    rows = dump(copy)
    assert len(problems(copy, "--repair", "--yes")) == 1
    assert dump(copy) == rows


# -- files that are not mgcp databases -------------------------------------------------------------

def foreign_sqlite(path):
    sql(path, "CREATE TABLE invoices (id INTEGER)")


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no database at"),
    (lambda p: p.mkdir(), "is a directory, not a database file"),
    (lambda p: p.write_bytes(b""), "is an empty file (0 bytes)"),
    (lambda p: p.write_text("just some text, long enough to look like a file\n"), "is not an SQLite database"),
    (foreign_sqlite, "belongs to another application"),
], ids=["missing", "directory", "empty", "text", "another-app"])
def test_a_file_that_is_not_an_mgcp_database_is_refused(tmp_path, make, message):
    path = tmp_path / "x.db"
    make(path)
    before = sorted(tmp_path.iterdir())
    code, out, err = check(path)
    assert (code, out) == (2, "")
    assert err.startswith("Error: ") and message in err and err.count("\n") == 1, err
    assert sorted(tmp_path.iterdir()) == before


def test_yes_without_repair_is_refused(copy):
    assert check(copy, "--yes") == (2, "", "Error: --yes goes with --repair\n")


# -- what an independent review of the check found ------------------------------------------------

def test_a_finding_applied_twice(copy, ids):
    sql(copy, """INSERT INTO rem_actions (finding_id, run_id, action, changes, applied_at, auto)
                 SELECT finding_id, run_id, action, changes, applied_at, auto FROM rem_actions
                 WHERE finding_id = ? AND undone_at IS NULL""", ids["applied"])
    assert any(line.startswith(f"finding {ids['applied']}: has 2 live actions") for line in problems(copy))


def test_tags_that_are_not_a_json_list(copy):
    sql(copy, "UPDATE lessons SET tags = '[\"api\", ' WHERE id = ?", LESSON)
    assert any(line.startswith(f"lesson {LESSON}: its tags '[\"api\", ' are not a JSON list") for line in problems(copy))
    sql(copy, "UPDATE lessons SET tags = '[\"api\", null]' WHERE id = ?", LESSON)
    assert any(line.startswith(f"lesson {LESSON}: its tags '[\"api\", null]' hold a value that is not text")
               for line in problems(copy))
    sql(copy, "UPDATE lesson_versions SET tags = '[\"api\"' WHERE lesson_id = ? AND version = 2", LESSON)
    assert any(line.startswith("lesson_versions ") and "its tags is not a JSON array ('[\"api\"')" in line
               for line in problems(copy))


def test_tags_that_are_not_text_are_named_and_read_as_none(copy):
    sql(copy, "UPDATE lessons SET tags = 5 WHERE id = ?", LESSON)
    assert any(line.startswith(f"lesson {LESSON}: its tags 5 are not a JSON list") for line in problems(copy))
    code, out, err = mgcp("lesson", "show", LESSON, "--json", "--db", copy)
    assert code == 0 and json.loads(out)["tags"] == [], err


def test_comma_separated_tags_an_older_writer_left_check_clean(copy):
    """Comma-separated words in a tags column are tags mgcp reads (as `lesson show`, `lesson list
    --tag`, export and import do): not a problem."""
    sql(copy, "UPDATE lessons SET tags = 'retry,http' WHERE id = ?", LESSON)
    sql(copy, "UPDATE lesson_versions SET tags = 'http, retry' WHERE lesson_id = ? AND version = 3", LESSON)
    code, out, err = check(copy)
    assert (code, err) == (0, ""), out
    code, out, err = mgcp("lesson", "show", LESSON, "--db", copy)
    assert code == 0 and "retry, http" in out, (out, err)


def test_repair_refuses_a_database_from_a_newer_mgcp(copy, ids):
    plant_repairable(copy, ids)
    sql(copy, "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('mgcp', '9999_future', 'x')")
    before = copy.read_bytes()
    code, out, err = check(copy, "--repair", "--yes")
    assert code == 2 and "newer mgcp" in err and copy.read_bytes() == before


def test_a_damaged_migrations_page_is_reported_rather_than_refused(copy):
    page = sql(copy, "SELECT rootpage FROM sqlite_master WHERE name = '_sqlite_migrations'")[0][0]
    with open(copy, "r+b") as fh:
        fh.seek((page - 1) * 4096)
        fh.write(b"\xff" * 4096)
    assert any("the file is damaged" in line for line in problems(copy))


def test_a_database_being_written_checks_clean(copy):
    """Every check reads one snapshot: a writer refining and saving meanwhile is never a problem."""
    import subprocess
    import sys

    writer = subprocess.Popen([sys.executable, "-c", f"""
import asyncio
from mgcp.persistence.store import Store
async def main():
    async with Store.open({str(copy)!r}) as s:
        for i in range(3000):
            await s.lessons.refine({LESSON!r}, f"round {{i}}", action=f"Retry, round {{i}}")
            await s.context.save({PROJECT!r}, f"live-{{i}}", notes=f"note {{i}}")
asyncio.run(main())
"""])
    import time

    deadline = time.time() + 60
    while sql(copy, "SELECT version FROM lessons WHERE id = ?", LESSON)[0][0] <= 3 and time.time() < deadline:
        time.sleep(0.05)  # until the writer is writing
    try:
        results = [check(copy) for _ in range(30)]
        assert writer.poll() is None, "the writer finished before the checks: they proved nothing"
    finally:
        writer.kill()
        writer.wait(timeout=120)
    assert [code for code, _, _ in results] == [0] * 30, [out for _, out, _ in results if "problem" in out]


def test_a_lesson_with_no_versions_and_tags_an_older_tool_wrote_is_rebuilt_with_the_tags_it_shows(copy):
    sql(copy, "DELETE FROM lesson_versions WHERE lesson_id = ?", LESSON)
    sql(copy, "UPDATE lessons SET tags = 'retry, network' WHERE id = ?", LESSON)  # comma-separated words
    (versions,) = [line for line in problems(copy) if "no versions" in line]
    assert versions.endswith("(repairable)"), versions
    code, out, err = check(copy, "--repair", "--yes")
    assert (code, err) == (0, "") and "repaired:" in out.splitlines(), out
    assert sql(copy, "SELECT version, reconstructed, tags FROM lesson_versions WHERE lesson_id = ? ORDER BY version",
               LESSON) == [(1, 1, '["retry", "network"]'), (2, 1, '["retry", "network"]'), (3, 0, '["retry", "network"]')]
    code, out, err = mgcp("lesson", "history", LESSON, "--db", copy, "--json")
    assert code == 0 and [v["tags"] for v in json.loads(out)][-1] == ["retry", "network"], (out, err)
    assert check(copy)[0] == 0


@pytest.mark.parametrize("odd, read", [
    ({"context": "an older writer's note"}, {"context": ["an older writer's note"]}),
    ({"weight": None, "context": None}, {"weight": 0.5, "context": []}),
    ({"weight": "heavy", "type": None, "bidirectional": "yes"}, {"weight": 0.5, "type": "related", "bidirectional": True}),
    ({"context": [1, "x"]}, {"context": ["1", "x"]}),
    ({"weight": "0.7", "bidirectional": 0}, {"weight": 0.7, "bidirectional": False}),
    ({"bidirectional": "no"}, {"bidirectional": False}),
])
def test_a_link_an_older_writer_left_odd_is_read_as_it_meant_it(copy, odd, read):
    """One odd link failed every command that lists lessons, and no command could clear it."""
    (other,) = sql(copy, "SELECT id FROM lessons WHERE id != ? ORDER BY id LIMIT 1", LESSON)[0]
    link = {"target": other, "type": "related", "weight": 0.7, "context": [], "bidirectional": False}
    sql(copy, "UPDATE lessons SET relationships = ? WHERE id = ?", json.dumps([{**link, **odd}]), LESSON)
    code, out, err = mgcp("lesson", "show", LESSON, "--json", "--db", copy)
    assert code == 0 and json.loads(out)["relationships"] == [{**link, **read}], err
    assert mgcp("lesson", "list", "--db", copy)[0] == 0
    code, out, err = check(copy)
    assert (code, err) == (0, ""), out


def test_a_link_whose_target_is_not_text_is_named(copy):
    sql(copy, "UPDATE lessons SET relationships = ? WHERE id = ?", json.dumps([{"target": 7}]), LESSON)
    assert [line for line in problems(copy) if "names no lesson" in line] == [
        f"lesson {LESSON}: its link 0 names no lesson mgcp can read (its target is not text): commands leave it "
        "out, and the next change of the lesson's links drops it"]


def test_a_kind_or_confidence_lesson_add_would_refuse_is_named(copy, tmp_path):
    """An import refuses such a row, so an export is not written, and says `db check` names it."""
    sql(copy, "UPDATE lesson_traits SET kind = 'gotcha', confidence = 1.5 WHERE lesson_id = ?", LESSON)
    assert any(line.startswith(f"lesson {LESSON}: version ") and "kind 'gotcha' and confidence 1.5" in line
               for line in problems(copy))
    code, out, err = mgcp("export", "jsonl", "--out", tmp_path / "x.jsonl", "--db", copy)
    assert code == 1 and "unknown kind 'gotcha'" in err and "`mgcp db check` finds such rows" in err


def test_a_link_to_a_lesson_that_does_not_exist_is_named(copy):
    (related,) = sql(copy, "SELECT relationships FROM lessons WHERE id = ?", LESSON)[0]
    links = json.loads(related) + [{"target": "ghost", "type": "related", "weight": 1.0, "context": [],
                                    "bidirectional": False}]
    sql(copy, "UPDATE lessons SET relationships = ? WHERE id = ?", json.dumps(links), LESSON)
    assert [line for line in problems(copy) if "ghost" in line] == [
        f"lesson {LESSON}: links to ghost, not a lesson here; `mgcp lesson show {LESSON}` lists its links"]


def test_a_file_with_migrations_pending_is_sent_to_migrate_not_repaired(tmp_path):
    """An upgrade stopped half-way (killed after its first migrations) holds lessons without their
    versions, which the rest of the upgrade makes: the check says to migrate, and offers no
    repair (it reported a problem per lesson and offered to rebuild each)."""
    path = tmp_path / "legacy.db"
    build_legacy(path)
    open_and_migrate(path)
    with sqlite3.connect(path) as conn:  # as if stopped before the migrations that make the versions
        conn.execute("DELETE FROM lesson_versions")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = ?", [migration_names()[-1]])
    code, out, _ = mgcp("db", "check", "--db", path)
    assert code == 0 and "1 migration pending; run `mgcp db migrate`" in out and "problem" not in out, out
    before = dump(path)
    assert mgcp("db", "check", "--repair", "--yes", "--db", path)[0] == 0
    assert dump(path) == before
