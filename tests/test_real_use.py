"""The promises that broke when features met in a day of use: one test per defect, each failing on
the code before the fix (undo after a lookup, replay after a resume, review inside its project, one
answer applied once, the report's pending findings, stop-words, reads that create files, legacy
todo shapes, and the small day-one defects)."""

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timezone

import pytest

from clihelp import mgcp
from conftest import ROOT, dump
from mgcp import engine
from mgcp.config import OPERATIONS, SHARED_OPERATIONS, parse_config
from mgcp.errors import SettledError
from mgcp.persistence.store import Store
from planted import PROJECT, build

CONFIG = parse_config({}, "defaults")
OTHER = "/demo/other"


@pytest.fixture
def planted(db, run):
    build(db)
    run(db, lambda s: engine.run_cycle(s, CONFIG, PROJECT, list(OPERATIONS)))
    return db


def first(run, path, kind, project=PROJECT):
    return next(f for f in run(path, lambda s: engine.pending_findings(s, project)) if f.kind == kind)


def option_of(finding, action):
    return next(i for i, o in enumerate(finding.options, 1) if o.action == action)


def lesson(path, lesson_id):
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM lessons WHERE id = ?", [lesson_id]).fetchone())
    finally:
        conn.close()


# -- 1. undo after a lookup -----------------------------------------------------------------------

def sql_status(path, lesson_id):
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT status FROM lesson_lifecycle WHERE lesson_id = ?", [lesson_id]).fetchone()
        return row[0] if row else "active"
    finally:
        conn.close()


def merged(run, path):
    f = first(run, path, "duplicate_merge")
    run(path, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "merge")))
    return f


def test_undo_after_a_lookup_restores_content_and_keeps_the_counters(planted, run):
    f = merged(run, planted)
    before = lesson(planted, f.data["canonical"])
    code, out, _ = mgcp("lesson", "query", "fastapi dependency overrides tests", "--db", planted)
    assert code == 0 and f.data["canonical"] in out
    code, _, err = mgcp("rem", "undo", f.id, "--db", planted)
    assert code == 0, err
    after = lesson(planted, f.data["canonical"])
    assert after["version"] == before["version"] - 1
    assert after["usage_count"] == before["usage_count"] + 1  # the lookup stays counted


def test_undo_of_a_run_after_a_lookup(planted, run):
    f = merged(run, planted)
    mgcp("lesson", "query", "fastapi dependency overrides tests", "--db", planted)
    code, out, err = mgcp("rem", "undo", "--run", str(f.run_id), "--db", planted)
    assert code == 0 and "undid" in out, err


def test_undo_refuses_after_a_refine_and_force_yes_takes_back_what_the_action_changed(planted, run):
    f = first(run, planted, "duplicate_merge")
    f_canonical = f.data["canonical"]
    unmerged = lesson(planted, f_canonical)
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "merge")))
    assert (lesson(planted, f_canonical)["relationships"], lesson(planted, f_canonical)["tags"]) != (
        unmerged["relationships"], unmerged["tags"])  # the merge changed what the undo takes back
    run(planted, lambda s: s.lessons.refine(f.data["canonical"], "later", action="A later action."))
    before = dump(planted)
    code, _, err = mgcp("rem", "undo", f.id, "--db", planted)
    assert code == 1 and "changed since (action" in err and dump(planted) == before
    code, _, err = mgcp("rem", "undo", f.id, "--force", "--db", planted, stdin="n\n")
    assert code == 1 and "Overwrite them?" in err + _ and dump(planted) == before
    code, out, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0 and "lessons row" in err
    canonical = lesson(planted, f_canonical)
    assert canonical["action"] == "A later action."  # the merge never changed the action: the refine stays
    assert (json.loads(canonical["relationships"]), sorted(json.loads(canonical["tags"]))) == (
        json.loads(unmerged["relationships"]), sorted(json.loads(unmerged["tags"])))  # what the merge changed
    assert sql_status(planted, f.data["other"]) == "active"


def test_a_forced_undo_of_a_drafted_lesson_takes_back_the_links_made_to_it_since(planted, run):
    f = first(run, planted, "theme")
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "draft_lesson")))
    drafted = f.data["draft"]["id"]
    other = run(planted, lambda s: s.lessons.search("fastapi dependency overrides tests", 1))[0].id
    assert mgcp("lesson", "link", other, drafted, "--db", planted)[0] == 0
    links_before = json.loads(lesson(planted, other)["relationships"])
    code, _, err = mgcp("rem", "undo", f.id, "--db", planted)  # the refusal names the lesson that links to it
    assert code == 1 and f"links from lesson {other}" in err, err
    code, _, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0, err
    assert json.loads(lesson(planted, other)["relationships"]) == [r for r in links_before if r["target"] != drafted]
    assert len(links_before) > len(json.loads(lesson(planted, other)["relationships"]))
    code, out, _ = mgcp("lesson", "show", drafted, "--db", planted, "--json")
    assert json.loads(out)["status"] == "deleted"
    assert mgcp("db", "check", "--db", planted)[0] == 0


def test_undo_of_a_drafted_lesson_given_an_outcome_since_refuses_and_force_keeps_the_outcome(planted, run):
    """Rows written since that refer to a lesson the answer created (an outcome) stop its undo,
    clearly, like a later change of content; forced, the lesson is marked deleted and they stay."""
    f = first(run, planted, "theme")
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "draft_lesson")))
    drafted = f.data["draft"]["id"]
    assert mgcp("lesson", "outcome", drafted, "--helped", "--db", planted)[0] == 0
    before = dump(planted)
    code, out, err = mgcp("rem", "undo", f.id, "--db", planted)
    assert code == 1 and "Traceback" not in err and drafted in err and "outcome" in err, err
    assert len(err.strip().splitlines()) == 1 and dump(planted) == before
    code, out, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0, err
    code, out, _ = mgcp("lesson", "show", drafted, "--db", planted, "--json")
    assert json.loads(out)["status"] == "deleted"
    conn = sqlite3.connect(planted)
    assert conn.execute("SELECT count(*) FROM lesson_outcomes WHERE lesson_id = ?", [drafted]).fetchone()[0] == 1
    assert mgcp("db", "check", "--db", planted)[0] == 0


@pytest.mark.parametrize("since", [["lesson", "archive", "{id}", "--reason", "not needed"],
                                   ["lesson", "refine", "{id}", "--action", "A later action.", "--reason", "later"]])
def test_undo_of_a_drafted_lesson_archived_or_refined_since_refuses_in_one_line(planted, run, since):
    f = first(run, planted, "theme")
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "draft_lesson")))
    drafted = f.data["draft"]["id"]
    assert mgcp(*[a.format(id=drafted) for a in since], "--db", planted)[0] == 0
    before = dump(planted)
    code, out, err = mgcp("rem", "undo", f.id, "--db", planted)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1 and drafted in err, err
    assert dump(planted) == before
    code, out, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0, err
    assert json.loads(mgcp("lesson", "show", drafted, "--db", planted, "--json")[1])["status"] == "deleted"
    assert mgcp("db", "check", "--db", planted)[0] == 0


def test_a_forced_undo_of_a_merge_keeps_the_history_of_a_lesson_changed_since(planted, run):
    """The merge's version of the canonical lesson stays in its history whole (its kind and
    confidence too) when a forced undo brings back the earlier content as a newer version."""
    f = merged(run, planted)
    canonical = f.data["canonical"]
    run(planted, lambda s: s.lessons.refine(canonical, "later", action="A later action."))
    code, out, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0 and "marked stale" in out, err  # its canonical lesson was brought back as a new version
    assert run(planted, lambda s: s.rem.get_finding(f.id)).status.value == "stale"
    code, out, err = mgcp("lesson", "history", canonical, "--db", planted, "--json")
    versions = json.loads(out)
    versions = versions.get("versions", versions) if isinstance(versions, dict) else versions
    assert [v["version"] for v in versions] == list(range(1, len(versions) + 1))
    assert all(v["kind"] is not None and v["confidence"] is not None for v in versions), versions
    assert mgcp("db", "check", "--db", planted)[0] == 0


def test_a_forced_undo_keeps_links_both_ways(planted, run):
    """A lesson brought back to its earlier content over a link made since loses that link on
    both sides, never on one only."""
    f = merged(run, planted)
    canonical = f.data["canonical"]
    other = next(lesson_id for lesson_id in (r[0] for r in sqlite3.connect(planted).execute(
        "SELECT id FROM lessons ORDER BY id")) if lesson_id not in (canonical, f.data["other"]))
    assert mgcp("lesson", "link", canonical, other, "--db", planted)[0] == 0
    code, out, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0, err
    links = {lesson_id: {r["target"] for r in json.loads(lesson(planted, lesson_id)["relationships"] or "[]")}
             for lesson_id in (canonical, other)}
    assert (other in links[canonical]) == (canonical in links[other]), links
    assert mgcp("db", "check", "--db", planted)[0] == 0


# -- 2. replay after a resumed session ------------------------------------------------------------

def save(db, session_id, notes):
    code, out, err = mgcp("context", "save", "--project", "/p/r", "--session-id", session_id, "--notes", notes,
                          "--db", db)
    assert code == 0, err


def at(db, session):
    return mgcp("context", "at", "--project", "/p/r", "--session", str(session), "--db", db, "--json")


def test_context_at_is_a_timeline_whatever_id_writes_again(db):
    for sid, notes in (("A", "a first"), ("B", "b"), ("C", "c"), ("A", "a resumed")):
        save(db, sid, notes)
    notes = {n: json.loads(at(db, n)[1])["snapshot"]["notes"] for n in (1, 2, 3)}
    assert notes == {1: "a first", 2: "b", 3: "a resumed"}


def test_context_at_before_the_first_save_and_past_the_current_session(db, run):
    run(db, lambda s: s.context.register_session("/p/r", "early"))
    save(db, "B", "b")
    code, out, err = at(db, 1)
    assert code == 2 and out == "" and "nothing was saved by then" in err
    code, out, err = at(db, 3)
    assert code == 2 and "which is 2" in err


def test_the_hooks_due_check_after_a_resume_uses_the_current_session(db, tmp_path):
    from test_hook import payload, run_hook

    config = tmp_path / "rem.yaml"
    config.write_text("rem:\n  staleness_scan: {strategy: linear, interval: 3}\n")
    env = {"MGCP_REM_CONFIG": str(config)}
    for sid in ("A", "B"):
        run_hook(payload(sid, cwd="/p/h"), db, **env)
    run_hook(payload("C", cwd="/p/h"), db, **env)
    resumed = run_hook(payload("A", source="resume", cwd="/p/h"), db, **env)
    assert "due at session 3" in resumed.stdout


# -- 3. review inside its project -----------------------------------------------------------------

def two_projects(db, run):
    """P (the planted project) and OTHER, each with context findings of its own."""
    build(db)
    for n in range(1, 7):
        run(db, lambda s: s.context.save(OTHER, f"o{n}", notes=f"Tuned the grpc retry budget again {n}",
                                         todos=[], decisions=[f"Pin grpc to 1.6{n}"]))
    for project in (PROJECT, OTHER):
        run(db, lambda s: engine.run_cycle(s, CONFIG, project, list(OPERATIONS)))


def test_a_projects_queue_never_shows_another_projects_findings(db, run):
    two_projects(db, run)
    for project in (PROJECT, OTHER):
        mine = run(db, lambda s: s.queue.project(project)).project_id
        queue = run(db, lambda s: engine.pending_findings(s, project))
        assert queue and all(f.project_id == mine or f.operation in
                             SHARED_OPERATIONS for f in queue)


def test_answering_the_last_finding_of_one_project_never_hands_over_another(db, run):
    two_projects(db, run)
    queue = run(db, lambda s: engine.pending_findings(s, OTHER))
    step = run(db, lambda s: engine.next_finding(s, OTHER, after=queue[-1].id))
    assert step.finding is None


def test_resolving_another_projects_finding_is_refused(db, run):
    two_projects(db, run)
    theirs = next(f for f in run(db, lambda s: engine.pending_findings(s, PROJECT))
                  if f.operation == "knowledge_extraction")
    code, _, err = mgcp("rem", "resolve", theirs.id, "--option", "1", "--project", OTHER, "--db", db)
    assert code == 2 and f"belongs to project {PROJECT}" in err and f"--project {PROJECT}" in err, err


def test_undoing_another_projects_answer_or_run_with_project_is_refused(db, run):
    two_projects(db, run)
    theirs = next(f for f in run(db, lambda s: engine.pending_findings(s, PROJECT))
                  if f.operation == "knowledge_extraction")
    answer = next(n for n, o in enumerate(theirs.options, 1)
                  if o.action != "skip" and not o.needs_input and not o.multi_select)
    assert mgcp("rem", "resolve", theirs.id, "--option", answer, "--project", PROJECT, "--db", db)[0] == 0
    before = sqlite3.connect(db).execute("SELECT count(*) FROM rem_actions WHERE undone_at IS NULL").fetchone()
    for target in ([theirs.id], ["--run", theirs.run_id]):
        code, _, err = mgcp("rem", "undo", *target, "--project", OTHER, "--db", db)
        assert code == 2 and f"belongs to project {PROJECT}" in err and f"--project {PROJECT}" in err, err
    assert sqlite3.connect(db).execute("SELECT count(*) FROM rem_actions WHERE undone_at IS NULL").fetchone() == before
    code, out, err = mgcp("rem", "undo", theirs.id, "--project", PROJECT, "--db", db)
    assert code == 0 and "undid" in out, err


# -- 4. one answer applied once -------------------------------------------------------------------

def test_two_concurrent_answers_apply_a_finding_once(planted, run):
    f = first(run, planted, "theme")

    async def answer():
        async with Store.open(planted) as store:
            return await engine.resolve(store, CONFIG, f.id, option_of(f, "draft_lesson"))

    async def both():
        return await asyncio.gather(answer(), answer(), return_exceptions=True)

    results = asyncio.run(both())
    assert sorted(type(r).__name__ for r in results) == ["Outcome", "SettledError"]
    conn = sqlite3.connect(planted)
    assert conn.execute("SELECT count(*) FROM rem_actions WHERE finding_id = ?", [f.id]).fetchone()[0] == 1


def test_a_second_answer_gets_a_clear_message(planted, run):
    f = first(run, planted, "duplicate_review")
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "keep_both")))
    with pytest.raises(SettledError, match="already rejected"):
        run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "keep_both")))


def test_finding_ids_are_64_bits_and_a_prefix_finds_one(planted, run):
    f = first(run, planted, "orphan")
    assert len(f.id) == 16
    code, out, _ = mgcp("rem", "resolve", f.id[:8], "--option", "1", "--db", planted, "--json")
    assert code == 0 and json.loads(out)["finding_id"] == f.id


# -- 5. the report shows what waits ---------------------------------------------------------------

def test_an_empty_run_does_not_hide_pending_findings(planted, run):
    code, _, _ = mgcp("rem", "run", "--project", PROJECT, "--db", planted)  # nothing is due
    report = json.loads(mgcp("rem", "report", "--project", PROJECT, "--db", planted, "--json")[1])
    status = json.loads(mgcp("rem", "status", "--project", PROJECT, "--db", planted, "--json")[1])
    assert report["last_run"]["operations"] == []
    assert len(report["pending"]) == status["pending_findings"] > 0


# -- 6. stop-words ---------------------------------------------------------------------------------

def test_a_stop_word_alone_matches_nothing_and_counts_nothing(planted):
    before = dump(planted, ["lessons"])
    code, out, err = mgcp("lesson", "query", "a", "--db", planted)
    assert code == 2 and "common words" in err and dump(planted, ["lessons"]) == before


def test_stop_words_never_rank_a_lesson_and_text_shows_scores(planted):
    code, out, _ = mgcp("lesson", "query", "how do I test a TUI", "--db", planted, "--json")
    for hit in json.loads(out):
        text = " ".join([hit["trigger"], hit["action"], hit["rationale"] or "", " ".join(hit["tags"])]).lower()
        assert "test" in text or "tui" in text
    code, out, _ = mgcp("lesson", "query", "celery tasks", "--db", planted)
    assert out.startswith("score ")


# -- 7. reading creates nothing --------------------------------------------------------------------

READERS = [["lesson", "list"], ["lesson", "show", "x"], ["lesson", "history", "x"], ["lesson", "query", "pool"],
           ["context", "show"], ["context", "history"], ["context", "at", "--session", "1"],
           ["rem", "status"], ["rem", "report"], ["rem", "review"], ["db", "status"], ["export", "dpo"]]


@pytest.mark.parametrize("args", READERS, ids=[" ".join(a[:2]) for a in READERS])
def test_a_read_of_a_missing_database_is_an_error_and_creates_nothing(tmp_path, args):
    target = tmp_path / "typo" / "x.db"
    code, out, err = mgcp(*args, "--db", target)
    assert code == 2 and "no database at" in err and not (tmp_path / "typo").exists()


def test_mgcp_db_naming_a_missing_file_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MGCP_DB", str(tmp_path / "typo.db"))
    code, _, err = mgcp("lesson", "list")
    assert code == 2 and not (tmp_path / "typo.db").exists()


# -- 8. legacy todo shapes --------------------------------------------------------------------------

LEGACY_TODOS = [{"content": "integer priority", "status": "pending", "priority": 5},
                "a plain string todo",
                {"content": "no status"},
                {"content": "extra keys", "status": "pending", "owner": "ana", "estimate": 3}]


@pytest.fixture
def legacy_shapes(tmp_path):
    from legacy import build_legacy

    path = tmp_path / "legacy.db"
    build_legacy(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE project_contexts SET todos = ? WHERE project_path = '/home/dev/alpha'",
                 [json.dumps(LEGACY_TODOS)])
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("args", [["context", "show", "--json"], ["context", "at", "--session", "0", "--json"],
                                  ["rem", "run", "--op", "knowledge_extraction", "--op", "context_summary"]])
def test_every_legacy_todo_shape_is_read(legacy_shapes, args):
    code, out, err = mgcp(*args, "--project", "/home/dev/alpha", "--db", legacy_shapes)
    assert code == 0, err
    if args[0] == "context" and args[1] == "show":
        todos = json.loads(out)["todos"]
        assert [t["content"] for t in todos] == ["integer priority", "a plain string todo", "no status", "extra keys"]
        assert todos[0]["priority"] == 5 and todos[3]["owner"] == "ana"


def test_the_legacy_rows_are_left_as_they_were(legacy_shapes):
    before = dump(legacy_shapes, ["project_contexts"])
    mgcp("context", "show", "--project", "/home/dev/alpha", "--db", legacy_shapes)
    assert dump(legacy_shapes, ["project_contexts"]) == before


def test_comma_separated_tags_an_older_writer_left_are_tags_everywhere(tmp_path):
    """Such a row is filtered by tag, exported, imported back as it was, and checks clean; the
    lessons around it (JSON tags) are unaffected, and no legacy row changes."""
    from legacy import build_legacy

    path = tmp_path / "legacy.db"
    build_legacy(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE lessons SET tags = 'testing, Flaky' WHERE id = 'three-versions'")
    conn.close()
    before = dump(path, ["lessons"])

    def listed(db, tag):
        code, out, err = mgcp("lesson", "list", "--tag", tag, "--json", "--db", db)
        assert code == 0, err
        return [lesson["id"] for lesson in json.loads(out)]

    assert listed(path, "flaky") == ["three-versions"] and listed(path, "api") == ["plain-v1"]
    assert mgcp("db", "check", "--db", path)[0] == 0
    assert mgcp("export", "jsonl", "--out", tmp_path / "all.jsonl", "--db", path)[0] == 0
    assert mgcp("import", "jsonl", tmp_path / "all.jsonl", "--db", tmp_path / "copy.db")[0] == 0
    assert dump(tmp_path / "copy.db", ["lessons"]) == dump(path, ["lessons"]) == before
    assert listed(tmp_path / "copy.db", "FLAKY") == ["three-versions"]


@pytest.mark.parametrize("stored", ["/home/dev/alpha/", "~/alpha"])
def test_a_legacy_project_stored_as_an_older_writer_gave_its_path_is_found(tmp_path, monkeypatch, stored):
    """A project row whose path has a trailing slash, or starts with "~", is the project of its
    normalized path: its context shows, a save continues it (no second project), the hook's
    session goes to it, and the legacy row is otherwise left as it was."""
    from legacy import build_legacy

    monkeypatch.setenv("HOME", "/home/dev")
    path = tmp_path / "legacy.db"
    build_legacy(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE project_contexts SET project_path = ? WHERE project_path = '/home/dev/alpha'", [stored])
    conn.close()
    code, out, err = mgcp("context", "show", "--project", "/home/dev/alpha", "--json", "--db", path)
    assert code == 0 and json.loads(out)["notes"] == "legacy notes", err
    assert mgcp("context", "save", "--project", "/home/dev/alpha/", "--session-id", "s-new", "--notes", "on",
                "--db", path)[0] == 0
    from legacy import pid
    from mgcp.persistence import sessions

    conn = sqlite3.connect(path, isolation_level=None)  # as the SessionStart hook registers one
    assert sessions.register_session(conn, "/home/dev/alpha", "s-hook", "startup", "2026-03-01T00:00:00+00:00") == (
        pid("/home/dev/alpha"), 59, True)
    rows = conn.execute("SELECT project_path, session_count FROM project_contexts").fetchall()
    conn.close()
    assert sorted(rows) == sorted([(stored, 59), ("/home/dev/beta", 3)])


# -- 9. day-one defects ----------------------------------------------------------------------------

def test_a_repeated_identical_save_writes_nothing(db):
    args = ["context", "save", "--project", "/p/s", "--session-id", "S", "--notes", "n", "--decision", "Use WAL",
            "--db", db]
    assert mgcp(*args)[0] == 0
    code, out, _ = mgcp(*args)
    assert code == 0 and "nothing changed" in out
    ctx = json.loads(mgcp("context", "show", "--project", "/p/s", "--db", db, "--json")[1])
    assert ctx["recent_decisions"] == ["Use WAL"]


def test_a_symlink_to_a_project_is_the_same_project(db, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    mgcp("context", "save", "--project", real, "--notes", "one", "--db", db)
    code, out, _ = mgcp("context", "show", "--project", tmp_path / "link", "--db", db, "--json")
    assert code == 0 and json.loads(out)["notes"] == "one"


def test_db_migrate_json_on_an_up_to_date_database_applies_nothing(db):
    code, out, _ = mgcp("db", "migrate", "--db", db, "--json")
    result = json.loads(out)
    assert code == 0 and result["applied_now"] == [] and result["pending"] == []


def test_errors_under_json_are_json_on_stderr(db):
    code, out, err = mgcp("lesson", "show", "nope", "--db", db, "--json")
    assert code == 2 and out == "" and json.loads(err)["error"] == "no lesson with id 'nope'"


def test_python_m_cli_runs_rem_status(db):
    result = subprocess.run([sys.executable, "-m", "mgcp.surfaces.cli", "rem", "status", "--db", str(db),
                             "--project", "/p/m"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "staleness_scan" in result.stdout


def asked(path):
    """A query logged since the planted cycle: the staleness scan has something new to read, so it
    analyses rather than being skipped as unchanged."""
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO query_log (query, project_id, result_ids, created_at) VALUES (?, NULL, '[]', ?)",
                 ["webhook retries", datetime.now(timezone.utc).isoformat()])
    conn.commit()
    conn.close()


def test_a_dry_run_leaves_the_write_lock_free_while_it_analyses(planted, monkeypatch):
    from mgcp.operations import staleness_scan

    real, free = staleness_scan.scan, []

    def watching(*args, **kwargs):
        conn = sqlite3.connect(planted, timeout=0)
        try:
            conn.execute("BEGIN IMMEDIATE")  # what the hook does to register a session
            conn.execute("ROLLBACK")
            free.append(True)
        finally:
            conn.close()
        return real(*args, **kwargs)

    monkeypatch.setattr(staleness_scan, "scan", watching)
    asked(planted)
    before = dump(planted)
    code, _, err = mgcp("rem", "run", "--auto", "--dry-run", "--op", "staleness_scan", "--project", PROJECT,
                        "--db", planted)
    assert code == 0, err
    assert free == [True] and dump(planted) == before


def test_the_event_loop_answers_while_an_operation_runs(planted, monkeypatch):
    from mgcp.operations import staleness_scan

    real = staleness_scan.scan

    def slow(*args, **kwargs):
        time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(staleness_scan, "scan", slow)
    asked(planted)

    async def both():
        async with Store.open(planted) as one, Store.open(planted) as two:
            cycle = asyncio.create_task(engine.run_cycle(one, CONFIG, PROJECT, ["staleness_scan"]))
            await asyncio.sleep(0.2)
            t0 = time.perf_counter()
            await engine.status(two, CONFIG, PROJECT)
            waited = time.perf_counter() - t0
            await cycle
            return waited, cycle.done()

    waited, finished = asyncio.run(both())
    assert finished and waited < 1.0


def interrupt_after_prompt(args, prompt: str) -> subprocess.CompletedProcess:
    """Start mgcp, wait for `prompt` on its output, then Ctrl-C (SIGINT) it; the process must end
    within seconds."""
    proc = subprocess.Popen([sys.executable, "-m", "mgcp", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen, deadline = "", time.monotonic() + 30
    while prompt not in seen and time.monotonic() < deadline:
        seen += os.read(proc.stdout.fileno(), 4096).decode()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    return subprocess.CompletedProcess(args, proc.returncode, seen + out, err)


def test_ctrl_c_in_review_stops_at_once_and_applies_nothing(planted):
    before = dump(planted)
    result = interrupt_after_prompt(["rem", "review", "--project", PROJECT, "--db", str(planted)], "Choose 1-")
    assert result.returncode == 130 and dump(planted) == before


def test_ctrl_c_stops_the_mcp_server(db):
    proc = subprocess.Popen([sys.executable, "-m", "mgcp", "serve", "--db", str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    deadline = time.monotonic() + 30
    while b"MCP server on stdio" not in proc.stderr.readline() and time.monotonic() < deadline:
        pass
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 130


def test_a_forced_undo_of_a_merge_puts_back_the_type_of_a_link_it_re_pointed(db, run):
    """t linked the merged-away lesson as a prerequisite and the kept one as related; the merge made
    t's link to the kept one a prerequisite. Forced (t was refined since), the undo puts that link
    back as it was, at both ends."""
    from types import SimpleNamespace

    from mgcp.engine import actions

    async def scenario(s):
        await s.lessons.add("c", "deploying on friday", "Do not deploy on Friday afternoons.", tags=["deploy"])
        await s.lessons.add("o", "deploying on a friday", "Never deploy on Friday afternoon.", tags=["release"])
        await s.lessons.add("t", "writing release notes", "Write release notes for every deploy.")
        await s.lessons.link("t", "o", "prerequisite", 0.9)
        await s.lessons.link("t", "c", "related", 0.5)
        async with s.recording() as changes:
            await actions._merge(s, None, SimpleNamespace(data={"canonical": "c", "other": "o"}), None, None)
        await s.lessons.refine("t", "later", action="Write release notes for every production deploy.")
        await s.restore(list(changes), force=True, reason="forced undo")
        t, c = await s.lessons.get("t"), await s.lessons.get("c")
        return ({r.target: (r.type, r.weight) for r in t.relationships},
                {r.target: (r.type, r.weight) for r in c.relationships}, t.action)

    t_links, c_links, action = run(db, scenario)
    assert t_links == {"c": ("related", 0.5), "o": ("prerequisite", 0.9)} and c_links["t"] == ("related", 0.5)
    assert action == "Write release notes for every production deploy."  # the later refine stays
