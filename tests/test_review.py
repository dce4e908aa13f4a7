"""Applying findings: a scripted review through a pipe, resolve, undo and --auto on the planted base."""

import json
import sqlite3
import sys

import pytest

from clihelp import mgcp
from conftest import dump
from mgcp import engine
from mgcp.config import OPERATIONS, parse_config
from planted import PROJECT, STALE_TODO, build

CONFIG = parse_config({}, "defaults")


@pytest.fixture
def planted(db, run):
    build(db)
    run(db, lambda s: engine.run_cycle(s, CONFIG, PROJECT, list(OPERATIONS)))
    return db


def pending(run, path):
    return run(path, lambda s: engine.pending_findings(s, PROJECT))


def by_kind(findings, kind):
    return [f for f in findings if f.kind == kind]


def option_of(finding, action):
    return next(i for i, o in enumerate(finding.options, 1) if o.action == action)


def lesson_row(path, lesson_id):
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    row = conn.execute("""SELECT l.*, c.status, c.superseded_by FROM lessons l
                          LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id WHERE l.id = ?""", [lesson_id]).fetchone()
    return dict(row)


# -- a scripted review through a pipe -------------------------------------------------------------

PLAN = {  # kind -> answers for the 1st, 2nd, ... finding of that kind: (action, input line or None)
    "popular_unrefined": [("refine", "Pin with uv: add the package with uv add and commit uv.lock.")],
    "stale_unused": [("archive", None), ("delete", None)],
    "unmatched_trigger": [("update_trigger", "when docker builds miss the layer cache"), ("keep", None)],
    "duplicate_merge": [("merge", None)],
    "duplicate_review": [("keep_both", None)],
    "unlinked_cluster": [("link_subset", "1 2 3")],
    "orphan": [("link_suggested", None), ("link_subset", "1"), ("keep", None)],
    "theme": [("draft_lesson", "")],
    "uncaptured_decision": [("project_specific", None), ("draft_lesson", "Store UTC; convert only at the edges."), (None, None)],
    "stale_todo": [("close_todo", None)],
}


class Reviewer:
    """A person at the review prompt, reading from a pipe: answers each finding it is shown by the
    PLAN for its kind (then its input line), skips what the plan does not cover."""

    def __init__(self, findings):
        self.by_id = {f.id: f for f in findings}
        self.seen, self.expected, self.queue = {}, {}, []

    def readline(self) -> str:
        if not self.queue:
            shown = [line.split("finding ")[-1].strip() for line in sys.stdout.getvalue().splitlines()
                     if "  -  finding " in line]
            f = self.by_id[shown[-1]]
            n = self.seen.get(f.kind, 0)
            self.seen[f.kind] = n + 1
            answers = PLAN.get(f.kind, [])
            action, text = answers[n] if n < len(answers) else (None, None)
            if action is None:
                self.queue = ["s"]
            else:
                self.expected[f.id] = action
                self.queue = [str(option_of(f, action))] + ([text] if text is not None else [])
        return self.queue.pop(0) + "\n"


@pytest.fixture
def reviewed(planted, run):
    findings = pending(run, planted)
    reviewer = Reviewer(findings)
    code, out, err = mgcp("rem", "review", "--project", PROJECT, "--db", planted, stdin=reviewer)
    return planted, findings, reviewer.expected, code, out


def test_review_applies_every_kind_of_option(reviewed):
    path, findings, expected, code, out = reviewed
    assert code == 0 and "Review finished" in out
    assert set(expected.values()) >= {"refine", "archive", "delete", "update_trigger", "keep", "merge",
                                      "keep_both", "link_subset", "link_suggested", "draft_lesson",
                                      "project_specific", "close_todo"}
    conn = sqlite3.connect(path)
    status = dict(conn.execute("SELECT id, status FROM rem_findings").fetchall())
    for finding_id, action in expected.items():
        want = "rejected" if action in ("keep", "keep_both", "project_specific") else "applied"
        assert status[finding_id] in (want, "stale"), (finding_id, action)


def test_review_changed_the_lessons_as_answered(reviewed):
    path = reviewed[0]
    assert lesson_row(path, "pin-python-dependencies-lockfile")["version"] == 4
    assert lesson_row(path, "celery-acks-late-lost-tasks")["status"] == "archived"
    assert lesson_row(path, "react-admin-table-virtualization")["status"] == "deleted"
    assert lesson_row(path, "docker-layer-order-for-fast-rebuilds")["trigger"] == "when docker builds miss the layer cache"
    merged = lesson_row(path, "fastapi-override-dependencies-in-tests")
    assert (merged["status"], merged["superseded_by"]) == ("superseded", "fastapi-dependency-overrides-in-tests")
    cluster = lesson_row(path, "webhook-dead-letter-replay")
    assert {r["target"] for r in json.loads(cluster["relationships"])} >= {"webhook-delivery-retry-backoff"}


def test_review_history_is_never_destroyed(reviewed):
    path = reviewed[0]
    conn = sqlite3.connect(path)
    deleted_versions = conn.execute("SELECT count(*) FROM lesson_versions WHERE lesson_id = 'react-admin-table-virtualization'").fetchone()[0]
    assert deleted_versions == 1
    assert conn.execute("SELECT count(*) FROM lessons").fetchone()[0] >= 40


def test_review_drafted_lessons_and_closed_the_todo(reviewed, run):
    path = reviewed[0]
    lessons = run(path, lambda s: s.lessons.list())
    assert any("UTC" in lesson.action and "edges" in lesson.action for lesson in lessons)
    assert len(lessons) >= 40 - 4 + 2
    project = run(path, lambda s: s.context.get_project(PROJECT))
    assert [t.status for t in project.todos if t.content == STALE_TODO] == ["completed"]


def test_review_quits_cleanly_on_q_and_on_end_of_input(planted):
    for stdin in ("q\n", ""):
        code, out, _ = mgcp("rem", "review", "--project", PROJECT, "--db", planted, stdin=stdin)
        assert code == 0 and "Stopped. 0 applied" in out


def test_a_digit_int_refuses_is_asked_again_or_refused_not_a_crash(planted, run):
    code, out, err = mgcp("rem", "review", "--project", PROJECT, "--db", planted, stdin="²\nq\n")
    assert (code, err) == (0, "") and "Please answer a number from 1 to" in out
    f = by_kind(pending(run, planted), "duplicate_merge")[0]
    delete = option_of(f, "delete_one")
    before = dump(planted, DATA_TABLES)
    code, out, err = mgcp("rem", "resolve", f.id, "--option", delete, "--input", "²", "--project", PROJECT,
                          "--db", planted)
    assert (code, out) == (2, "") and "name the lesson to delete" in err
    assert dump(planted, DATA_TABLES) == before


class TypingThenCtrlD:
    """A person at a terminal who types a line and ends it with Ctrl-D, not Enter."""

    def __init__(self, *lines):
        self.lines = list(lines)

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        return self.lines.pop(0) if self.lines else ""


def test_a_line_cut_short_by_ctrl_d_in_a_terminal_is_no_answer(planted, run):
    f = pending(run, planted)[0]
    refine = next((i for i, o in enumerate(f.options, 1) if o.needs_input), None)
    before = dump(planted, DATA_TABLES)
    stdin = TypingThenCtrlD(f"{refine}\n", "partial text") if refine else TypingThenCtrlD("1")
    code, out, err = mgcp("rem", "review", "--project", PROJECT, "--db", planted, stdin=stdin)
    assert (code, err) == (0, "") and "Stopped. 0 applied" in out
    assert dump(planted, DATA_TABLES) == before


def test_review_asks_no_text_for_a_finding_answered_meanwhile(planted, run):
    """Another surface answers the finding while it is shown: picking an option that needs text
    says so at once, instead of asking for text no answer would apply."""
    f = pending(run, planted)[0]
    needs = next(i for i, o in enumerate(f.options, 1) if o.needs_input or o.multi_select)
    other = next(i for i, o in enumerate(f.options, 1) if not (o.needs_input or o.multi_select)
                 and o.action != "skip")

    class Elsewhere:
        def __init__(self):
            self.lines = [f"{needs}\n", "q\n"]

        def readline(self):
            if len(self.lines) == 2:  # the finding is on screen: an agent answers it now
                run(planted, lambda s: engine.resolve(s, CONFIG, f.id, other))
            return self.lines.pop(0)

    code, out, err = mgcp("rem", "review", "--project", PROJECT, "--db", planted, stdin=Elsewhere())
    assert code == 0 and f"Not applied: finding {f.id} was answered meanwhile" in out, out
    assert "Stopped. 0 applied" in out


def test_rejected_finding_is_not_raised_again(planted, run):
    f = by_kind(pending(run, planted), "duplicate_review")[0]
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "keep_both")))
    again = run(planted, lambda s: engine.run_cycle(s, CONFIG, PROJECT, ["duplicate_detection"]))
    assert again.findings == []


def test_finding_on_a_refined_lesson_is_stale(planted, run):
    from mgcp.errors import ConflictError

    f = by_kind(pending(run, planted), "stale_unused")[0]
    run(planted, lambda s: s.lessons.refine(f.data["lesson"], "clarified", action="A clearer action."))
    with pytest.raises(ConflictError, match="stale"):
        run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "archive")))


def test_resolve_cli_rejects_a_bad_option_number(planted, run):
    f = pending(run, planted)[0]
    code, out, err = mgcp("rem", "resolve", f.id, "--option", "9", "--db", planted)
    assert code == 2 and "has options 1 to" in err


def test_resolve_cli_says_a_finding_id_under_eight_characters_is_too_short(planted, run):
    f = pending(run, planted)[0]
    code, out, err = mgcp("rem", "resolve", f.id[:4], "--option", "1", "--db", planted)
    assert (code, out) == (2, "")
    assert err == f"Error: finding id {f.id[:4]!r} is too short: give at least 8 of its 16 characters\n"


@pytest.mark.parametrize("edits, message", [
    ('{"actoin": "Keep timestamps in UTC"}',
     "the draft edits name an unknown field 'actoin' (a draft has id, trigger, action, rationale and tags)"),
    ('{"tags": "time"}', 'a draft\'s tags must be a list of strings, e.g. ["testing"] (got "time")'),
    ('{"tags": ["time", 3]}', 'a draft\'s tags must be a list of strings, e.g. ["testing"] (got ["time", 3])'),
    ('{"id": ""}', "the draft edits give an empty id: name one, or leave id out to take the draft's"),
    ('{"id": "  "}', "the draft edits give an empty id: name one, or leave id out to take the draft's"),
    ('{"id": 7}', "a draft's id must be a string (got 7)"),
    ('{"action": null}', "a draft's action must be a string (got null)"),
    ('{"trigger": ["when"]}', 'a draft\'s trigger must be a string (got ["when"])'),
])
def test_resolve_cli_refuses_draft_edits_it_cannot_apply_and_writes_nothing(planted, run, edits, message):
    f = by_kind(pending(run, planted), "uncaptured_decision")[0]
    before = dump(planted)
    code, out, err = mgcp("rem", "resolve", f.id, "--option", option_of(f, "draft_lesson"), "--input", edits,
                          "--project", PROJECT, "--db", planted)
    assert (code, out, err) == (2, "", f"Error: {message}\n")
    assert dump(planted) == before


# -- undo -----------------------------------------------------------------------------------------

UNDO_CASES = [  # (kind, action, input)
    ("stale_unused", "archive", None),
    ("stale_unused", "delete", None),
    ("popular_unrefined", "refine", "A better action."),
    ("unmatched_trigger", "update_trigger", "when docker caches miss"),
    ("duplicate_merge", "merge", None),
    ("duplicate_review", "delete_one", "1"),
    ("unlinked_cluster", "link_all", None),
    ("unlinked_cluster", "link_subset", "1,2"),
    ("orphan", "link_suggested", None),
    ("theme", "draft_lesson", None),
    ("stale_todo", "close_todo", None),
    ("stale_todo", "drop_todo", None),
]
DATA_TABLES = ["lessons", "lesson_versions", "lesson_lifecycle", "project_contexts", "context_history",
               "project_sessions", "lesson_search_docs"]


def content(path):
    """Every data row with retrieval counters and access times left out (undo keeps those as they are)."""
    from mgcp.persistence.database import COUNTERS

    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    result = {}
    for table in DATA_TABLES:
        rows = [{k: r[k] for k in r.keys() if k not in COUNTERS.get(table, ())}
                for r in conn.execute(f"SELECT * FROM {table}")]
        result[table] = sorted(rows, key=repr)
    conn.close()
    return result


@pytest.mark.parametrize("kind, action, text", UNDO_CASES, ids=[f"{k}-{a}" for k, a, _ in UNDO_CASES])
def test_undo_restores_exactly_what_the_action_changed(planted, run, kind, action, text):
    f = by_kind(pending(run, planted), kind)[0]
    before = content(planted)
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, action), text))
    assert content(planted) != before
    code, out, err = mgcp("rem", "undo", f.id, "--db", planted)
    assert code == 0, err
    assert content(planted) == before
    assert [x.id for x in pending(run, planted) if x.id == f.id] == [f.id]


def test_undo_refuses_to_overwrite_a_later_change(planted, run):
    f = by_kind(pending(run, planted), "stale_unused")[0]
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "update_trigger"), "when celery loses tasks"))
    run(planted, lambda s: s.lessons.refine(f.data["lesson"], "later edit", action="Later action."))
    before = dump(planted, DATA_TABLES)
    code, _, err = mgcp("rem", "undo", f.id, "--db", planted)
    assert code == 1 and "lessons row celery-acks-late-lost-tasks changed since (action" in err
    assert dump(planted, DATA_TABLES) == before


def test_a_forced_undo_refuses_what_changed_after_the_overwrite_was_confirmed(planted, run):
    """The person agreed to overwrite the changes listed; one made while they read the list is not
    among them."""
    from mgcp.errors import ConflictError

    f = by_kind(pending(run, planted), "stale_unused")[0]
    lesson = f.data["lesson"]
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "update_trigger"), "when celery loses tasks"))
    run(planted, lambda s: s.lessons.refine(lesson, "later edit", action="Later action."))
    with pytest.raises(ConflictError) as shown:
        run(planted, lambda s: engine.undo_finding(s, f.id))
    run(planted, lambda s: s.lessons.refine(lesson, "edited meanwhile", trigger="when celery drops tasks"))
    before = dump(planted, DATA_TABLES)
    with pytest.raises(ConflictError, match="more changed since the overwrite was confirmed: lessons row"):
        run(planted, lambda s: engine.undo_finding(s, f.id, True, shown.value.details))
    assert dump(planted, DATA_TABLES) == before
    with pytest.raises(ConflictError) as now:
        run(planted, lambda s: engine.undo_finding(s, f.id))
    assert "undid update_trigger" in run(planted, lambda s: engine.undo_finding(s, f.id, True, now.value.details))


def test_review_counts_what_is_still_pending_after_an_answer_made_a_skipped_finding_stale(tmp_path):
    """Skip a pair, merge another that shares a lesson with it, quit: the skipped one is stale now
    (its lesson was merged), and the count says what `rem status` says."""
    db = tmp_path / "kb.db"
    for lesson_id, trigger, action, tag in (
            ("verify-api", "calling an unfamiliar API", "Read the signature and one real call site", "api"),
            ("check-call-sites", "calling an unfamiliar API for the first time", "Read the signature and one real call site", "api"),
            ("check-call-sites2", "using an unfamiliar API", "Read the signature and a real call site", "api"),
            ("o1", "writing database migrations", "Make each migration reversible and test it", "db")):
        assert mgcp("lesson", "add", lesson_id, "--trigger", trigger, "--action", action, "--tag", tag, "--db", db)[0] == 0
    assert mgcp("rem", "run", "--project", "/p/a", "--op", "duplicate_detection", "--op", "community_detection",
                "--db", db)[0] == 0
    code, out, err = mgcp("rem", "review", "--project", "/p/a", "--db", db, stdin="s\n1\nq\n")
    assert code == 0, err
    status = json.loads(mgcp("rem", "status", "--project", "/p/a", "--db", db, "--json")[1])
    assert f"{status['pending_findings']} finding(s) still pending." in out.splitlines()[-1], out
    assert status["pending_findings"] == 1


def context_of(path):
    code, out, err = mgcp("context", "show", "--project", PROJECT, "--db", path, "--json")
    assert code == 0, err
    return json.loads(out)


def todo_status(context, todo):
    return next(t["status"] for t in context["todos"] if t["content"] == todo)


def test_undo_of_a_closed_todo_refuses_once_the_context_was_saved_since_even_saved_back(planted, run):
    """Saves away and back leave the context as the action left it, but its history goes on from
    the close: an undo deleting that save would leave history and context disagreeing."""
    f = by_kind(pending(run, planted), "stale_todo")[0]
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "close_todo"), None))
    notes = context_of(planted)["notes"]
    for text in ("a passing note", notes):
        assert mgcp("context", "save", "--project", PROJECT, "--notes", text, "--db", planted)[0] == 0
    before = dump(planted, DATA_TABLES)
    code, _, err = mgcp("rem", "undo", f.id, "--db", planted)
    assert code == 1 and f"the context of {PROJECT} was saved 2 times since" in err, err
    assert dump(planted, DATA_TABLES) == before


def test_a_forced_undo_puts_back_a_todo_an_older_writer_left_twice(planted, run):
    """A todo held twice (an older writer's list) dropped by REM, a save since: forced, the undo
    saves the earlier list back as it was, the todo twice, though a person may not give one twice."""
    f = by_kind(pending(run, planted), "stale_todo")[0]
    todo = f.data["todo"]
    conn = sqlite3.connect(planted)
    with conn:
        [(todos,)] = conn.execute("SELECT todos FROM project_contexts WHERE project_path = ?", [PROJECT]).fetchall()
        listed = json.loads(todos)
        listed.append(next(t for t in listed if t["content"] == todo))
        conn.execute("UPDATE project_contexts SET todos = ? WHERE project_path = ?", [json.dumps(listed), PROJECT])
    conn.close()
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "drop_todo"), None))
    assert mgcp("context", "save", "--project", PROJECT, "--notes", "later notes", "--db", planted)[0] == 0
    code, _, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0, err
    assert [t["content"] for t in context_of(planted)["todos"]].count(todo) == 2


def test_a_forced_undo_of_a_closed_todo_saves_it_open_again_and_keeps_the_history(planted, run):
    f = by_kind(pending(run, planted), "stale_todo")[0]
    todo = f.data["todo"]
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "close_todo"), None))
    assert mgcp("context", "save", "--project", PROJECT, "--notes", "later notes", "--db", planted)[0] == 0
    history = dump(planted, ["context_history"])["context_history"]
    code, out, err = mgcp("rem", "undo", f.id, "--force", "--db", planted, stdin="y\n")
    assert code == 0, err
    now = context_of(planted)
    assert todo_status(now, todo) == "pending" and now["notes"] == "later notes"
    rows = dump(planted, ["context_history"])["context_history"]
    assert set(history) < set(rows) and len(rows) == len(history) + 1  # nothing deleted, one save added
    code, out, _ = mgcp("context", "at", "--project", PROJECT, "--session", str(now["session_count"]),
                        "--db", planted, "--json")
    assert code == 0 and todo_status(json.loads(out)["snapshot"], todo) == "pending"


def test_a_forced_undo_of_a_closed_todo_keeps_what_later_saves_added(planted, run):
    """The undo takes back the close, not the todos, files and catalogue keys saved since (a save
    naming its todos names the closed one again, as it stands)."""
    f = by_kind(pending(run, planted), "stale_todo")[0]
    todo = f.data["todo"]
    run(planted, lambda s: engine.resolve(s, CONFIG, f.id, option_of(f, "close_todo"), None))
    catalogue = {**context_of(planted)["catalogue"], "added": "later"}
    code, _, err = mgcp("context", "save", "--project", PROJECT, "--todo", todo, "--todo", "ship the release",
                        "--active-file",
                        "src/new.py", "--catalogue", "-", "--db", planted, stdin=json.dumps(catalogue))
    assert code == 0, err
    later = context_of(planted)
    assert later["catalogue"] == catalogue
    code, out, err = mgcp("rem", "undo", f.id, "--force", "--yes", "--db", planted)
    assert code == 0, err
    now = context_of(planted)
    assert todo_status(now, todo) == "pending" and todo_status(now, "ship the release") == "pending"
    assert [t for t in now["todos"] if t["content"] != todo] == [t for t in later["todos"] if t["content"] != todo]
    assert (now["active_files"], now["catalogue"]) == (later["active_files"], later["catalogue"])


# -- --auto ---------------------------------------------------------------------------------------

@pytest.fixture
def fresh(db):
    build(db)
    return db


def auto_run(path, *extra):
    code, out, err = mgcp("rem", "run", "--auto", "--op", "duplicate_detection", "--op", "community_detection",
                          "--op", "staleness_scan", "--op", "knowledge_extraction", "--project", PROJECT,
                          "--db", path, "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_auto_applies_only_what_policy_allows(fresh):
    result = auto_run(fresh)
    applied_kinds = sorted({a["kind"] for a in result["applied"]})
    assert applied_kinds == ["duplicate_merge", "orphan", "unlinked_cluster"]
    assert {a["kind"] for a in result["left_pending"]} >= {"stale_unused", "duplicate_review", "theme", "stale_todo"}
    conn = sqlite3.connect(fresh)
    assert conn.execute("SELECT count(*) FROM lesson_lifecycle WHERE status = 'deleted'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM lessons").fetchone()[0] == 42  # the demo's lessons, all kept


def test_auto_twice_applies_nothing_new(fresh):
    auto_run(fresh)
    assert auto_run(fresh)["applied"] == []


def test_auto_dry_run_writes_nothing(fresh):
    before = dump(fresh)
    result = auto_run(fresh, "--dry-run")
    assert result["applied"] and dump(fresh) == before


def test_undo_of_a_whole_auto_run(fresh):
    before = dump(fresh, DATA_TABLES + ["community_summaries"])
    result = auto_run(fresh)
    code, out, err = mgcp("rem", "undo", "--run", result["report"]["run_id"], "--db", fresh)
    assert code == 0, err
    assert dump(fresh, DATA_TABLES + ["community_summaries"]) == before


def test_the_queue_count_and_next_finding_agree_with_the_queue_read_whole(planted, run, tmp_path):
    """`rem status` counts the queue and the review takes its next finding from each finding's
    `FindingMark` alone; both agree with the queue read whole, stale findings included: a refined
    subject, an orphan linked since, an archived subject, and a draft some lesson now says."""
    import shutil

    from mgcp.models import FindingMark, LessonStatus

    findings = pending(run, planted)
    refined = by_kind(findings, "stale_unused")[0]
    orphan = by_kind(findings, "orphan")[0]
    duplicate = by_kind(findings, "duplicate_review")[0]
    drafted = next(f for f in findings if f.data.get("draft"))
    run(planted, lambda s: s.lessons.refine(refined.data["lesson"], "clarified", action="A clearer action."))
    other = next(lesson.id for lesson in run(planted, lambda s: s.lessons.list()) if lesson.id != orphan.data["lesson"])
    run(planted, lambda s: s.lessons.link(orphan.data["lesson"], other))
    run(planted, lambda s: s.lessons.set_lifecycle(duplicate.data["other"], LessonStatus.archived, "gone"))
    draft = drafted.data["draft"]
    run(planted, lambda s: s.lessons.add("says-the-draft", "  " + draft["trigger"].upper() + "!", draft["action"]))
    # odd data written by hand: a draft that is not a draft is no draft
    conn = sqlite3.connect(planted)
    conn.execute("UPDATE rem_findings SET data = json_set(data, '$.draft', json('{\"trigger\": 1, \"action\": \"x\"}'))"
                 " WHERE id = ?", [findings[-1].id])
    conn.commit()
    conn.close()

    whole, marked = tmp_path / "whole.db", tmp_path / "marked.db"
    shutil.copy(planted, whole)
    shutil.copy(planted, marked)
    queue = pending(run, whole)
    count = run(marked, lambda s: engine.status(s, CONFIG, PROJECT)).pending_findings
    step = run(marked, lambda s: engine.next_finding(s, PROJECT))
    assert count == len(queue) == step.remaining + 1 and step.finding.id == queue[0].id
    left = {f.id for f in queue}
    assert {refined.id, orphan.id, duplicate.id, drafted.id}.isdisjoint(left)

    def stale(path):
        conn = sqlite3.connect(path)
        try:
            return conn.execute("SELECT id FROM rem_findings WHERE status = 'stale' ORDER BY id").fetchall()
        finally:
            conn.close()

    assert len(stale(whole)) >= 4 and stale(whole) == stale(marked)
    every = run(whole, lambda s: s.rem.findings(None, None))
    assert run(whole, lambda s: s.rem.marks(None, None)) == [FindingMark.of(f) for f in every]


def test_auto_leaves_to_a_person_what_an_undo_took_back(fresh):
    """An undone answer of --auto is a person's decision: the next --auto (and its dry run) leaves
    those findings pending with why, instead of applying them again; a person can still answer."""
    first = auto_run(fresh)
    merged = [a for a in first["applied"] if a["kind"] == "duplicate_merge"]
    assert merged
    code, out, err = mgcp("rem", "undo", "--run", first["report"]["run_id"], "--db", fresh)
    assert code == 0, err
    for extra in (("--dry-run",), ()):
        again = auto_run(fresh, *extra)
        assert again["applied"] == []
        left = {a["id"]: a for a in again["left_pending"]}
        for applied in first["applied"]:
            assert "undone" in left[applied["id"]]["result"]
    code, out, err = mgcp("rem", "run", "--auto", "--op", "staleness_scan", "--project", PROJECT, "--db", fresh)
    assert code == 0 and f"left: {merged[0]['id']}" in out and "undone" in out, out + err
    code, out, err = mgcp("rem", "resolve", merged[0]["id"], "--option", "1", "--db", fresh, "--project", PROJECT)
    assert code == 0, err


def test_auto_leaves_a_pair_it_merged_and_a_person_took_apart_even_once_a_lesson_of_it_changed(fresh):
    """The undone merge's pair asked again under new versions (a lesson refined since the undo) is
    still the pair the person took apart: --auto leaves it to them."""
    first = auto_run(fresh)
    merge = next(a for a in first["applied"] if a["kind"] == "duplicate_merge")
    [(data,)] = sqlite3.connect(fresh).execute("SELECT data FROM rem_findings WHERE id = ?", [merge["id"]]).fetchall()
    other = json.loads(data)["other"]
    assert mgcp("rem", "undo", "--run", first["report"]["run_id"], "--db", fresh)[0] == 0
    code, _, err = mgcp("lesson", "refine", other, "--rationale", "Kept apart on purpose.", "--reason", "why",
                        "--db", fresh)
    assert code == 0, err
    again = auto_run(fresh)
    assert not [a for a in again["applied"] if a["kind"] == "duplicate_merge" and other in a["title"] + str(a)]
    asked = sqlite3.connect(fresh).execute(
        "SELECT id FROM rem_findings WHERE status = 'pending' AND kind = 'duplicate_merge' AND subject LIKE ?",
        [f'%"{other}"%']).fetchall()
    assert asked and all("undone" in next(a["result"] for a in again["left_pending"] if a["id"] == fid)
                         for (fid,) in asked)


def test_undo_of_a_run_names_only_the_changes_made_since(fresh):
    """Several actions of a run change one lesson (links, then a merge): a link made after the run
    is the one conflict named, not what the run's own later actions changed."""
    result = auto_run(fresh)
    merge = next(a for a in result["applied"] if a["kind"] == "duplicate_merge")
    [(data,)] = sqlite3.connect(fresh).execute("SELECT data FROM rem_findings WHERE id = ?", [merge["id"]]).fetchall()
    canonical = json.loads(data)["canonical"]
    other = next(r[0] for r in sqlite3.connect(fresh).execute("SELECT id FROM lessons ORDER BY id DESC")
                 if r[0] != canonical)
    assert mgcp("lesson", "link", canonical, other, "--db", fresh)[0] == 0
    code, out, err = mgcp("rem", "undo", "--run", result["report"]["run_id"], "--db", fresh)
    named = err.split("later changes: ")[1].split(". Nothing")[0].split("; ")
    assert code == 1 and f"lessons row {canonical} changed since (relationships)" in named, err
    assert all(n.endswith("changed since (relationships)") for n in named) and len(set(named)) == len(named), err


def test_auto_never_merges_the_same_words_ordered_the_other_way_round(tmp_path):
    db = str(tmp_path / "order.db")
    for lesson_id, action in (("mig-first", "Run the database migrations before restarting the app servers"),
                              ("app-first", "Restart the app servers before running the database migrations"),
                              ("spaces", "Prefer spaces over tabs for indentation"),
                              ("tabs", "Prefer tabs over spaces for indentation")):
        code, out, err = mgcp("lesson", "add", lesson_id, "--trigger", "deploying or formatting code", "--action", action,
                              "--db", db)
        assert code == 0, err
    assert "may say the opposite" in out + err  # said when the second of a pair is added
    code, out, err = mgcp("rem", "run", "--auto", "--op", "duplicate_detection", "--project", "/p", "--db", db, "--json")
    result = json.loads(out)
    assert result["applied"] == [] and len(result["left_pending"]) >= 2, out
    assert {a["result"] for a in result["left_pending"]} == {"its actions may say opposite things: a person decides"}


def test_three_copies_are_merged_whole_by_one_auto_run_and_nothing_is_left_pending(tmp_path):
    """Three copies, raised as two pairs with the first: merging one pair refines the lesson the
    other pair holds. --auto reads that pair as its own merges left it and merges it too, leaving
    nothing pending (which --fail-on-pending would take for work left to a person)."""
    db = str(tmp_path / "copies.db")
    for n in range(3):
        code, out, err = mgcp("lesson", "add", f"c-{n}", "--trigger", f"deploying the web service {n}", "--action",
                              "Run the smoke tests against staging before you promote the build", "--db", db)
        assert code == 0, err
    code, out, err = mgcp("rem", "run", "--auto", "--op", "duplicate_detection", "--project", "/p", "--db", db,
                          "--json", "--fail-on-pending")
    result = json.loads(out)
    assert code == 0 and len(result["applied"]) == 2 and result["left_pending"] == [], (out, err)
    assert len(json.loads(mgcp("lesson", "list", "--db", db, "--json")[1])) == 1
    code, out, _ = mgcp("rem", "status", "--project", "/p", "--db", db)
    assert "0 finding(s) pending review" in out


def test_auto_links_a_small_cluster_and_leaves_a_larger_one_to_a_person():
    from mgcp.config import parse_config
    from mgcp.engine.actions import AUTO_CLUSTER, auto_decision
    from mgcp.models import FindingOption, RemFinding

    def cluster(size: int) -> RemFinding:
        members = [f"l{i}" for i in range(size)]
        return RemFinding(operation="community_detection", kind="unlinked_cluster", title="t", description="d",
                          options=[FindingOption(label="Link them all", action="link_all", description="d")],
                          recommended=1, data={"members": members}, subject={m: 1 for m in members},
                          fingerprint=f"f{size}")

    config = parse_config({}, "test")
    assert auto_decision(cluster(AUTO_CLUSTER), config, "/p") == f"links are additive ({AUTO_CLUSTER} lessons)"
    assert auto_decision(cluster(AUTO_CLUSTER + 1), config, "/p") is None  # 10 links or more: a person decides
    unlisted = cluster(AUTO_CLUSTER + 1)
    unlisted.data = {}  # no members listed: "link them all" links the subject's lessons, as many
    assert auto_decision(unlisted, config, "/p") is None


# -- a drafted lesson the gate refuses; an id that is taken ---------------------------------------

DRAFT = {"id": "mgcp-overrides-defaults", "trigger": "When working on the write-ahead log", "action": "use WAL",
         "rationale": "Came up in the notes of 3 sessions.", "tags": ["wal"]}
GOOD_ACTION = "Use WAL mode so that readers never block the writer"


@pytest.fixture
def drafted(db, run):
    """A theme finding of /p/x whose draft's action is under the gate's 10 characters."""
    from mgcp.models import RemFinding
    from mgcp.operations import draft_options

    assert mgcp("context", "save", "--project", "/p/x", "--notes", "WAL again", "--db", db)[0] == 0

    async def insert(store):
        project = await store.context.find_project("/p/x")
        await store.rem.insert_finding(RemFinding(
            id="a1b2c3d4e5f60718", operation="knowledge_extraction", kind="theme", title='Recurring theme "wal"',
            description="Your notes mention WAL.", options=draft_options(DRAFT["id"]), data={"draft": DRAFT},
            fingerprint="theme-wal", project_id=project.project_id))
    run(db, insert)
    return db


def resolve_draft(path, *edits):
    return mgcp("rem", "resolve", "a1b2c3d4e5f60718", "--option", "1", *(["--input", *edits] if edits else []),
                "--project", "/p/x", "--db", path)


def test_a_draft_the_gate_refuses_says_how_to_edit_it_and_writes_nothing(drafted):
    before = dump(drafted)
    code, out, err = resolve_draft(drafted)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "the drafted lesson as it is cannot be added: the action is under 10 characters" in err
    assert '{"action": "..."}' in err and "`--input` of `mgcp rem resolve`" in err and "rem_answer" in err
    assert dump(drafted) == before


def test_a_draft_refused_as_it_is_is_added_with_the_edit_the_message_names(drafted, run):
    code, out, err = resolve_draft(drafted, json.dumps({"action": GOOD_ACTION}))
    assert (code, out, err) == (0, "added lesson mgcp-overrides-defaults\n", "")
    assert run(drafted, lambda s: s.lessons.get("mgcp-overrides-defaults")).action == GOOD_ACTION


def test_a_draft_edit_the_gate_refuses_is_named_as_the_edit(drafted):
    code, out, err = resolve_draft(drafted, "too short")
    assert code == 2 and "the drafted lesson with these edits cannot be added: the action is under 10" in err


def test_a_draft_edit_holding_a_nul_is_refused(drafted):
    code, out, err = resolve_draft(drafted, '{"action": "Use WAL mode\\u0000 for every database"}')
    assert code == 2 and "action holds a NUL character (\\x00) at character 13" in err


def add_taken(path):
    assert mgcp("lesson", "add", DRAFT["id"], "--trigger", "when a setting is given twice",
                "--action", "The command line overrides the config file", "--db", path)[0] == 0


def test_an_id_the_user_names_that_is_taken_is_refused_not_renamed(drafted):
    add_taken(drafted)
    before = dump(drafted)
    code, out, err = resolve_draft(drafted, json.dumps({"id": DRAFT["id"], "action": GOOD_ACTION}))
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: lesson id {DRAFT['id']!r} is taken") and "name another id" in err
    assert dump(drafted) == before


def test_the_drafts_own_id_when_taken_is_numbered_and_the_message_says_so(drafted):
    add_taken(drafted)
    code, out, err = resolve_draft(drafted, json.dumps({"action": GOOD_ACTION}))
    assert (code, out) == (0, f"added lesson {DRAFT['id']}-2 (the draft's id {DRAFT['id']!r} is taken)\n")


# -- the reason a staleness answer records ---------------------------------------------------------

@pytest.mark.parametrize("uses, reason", [
    (0, "REM staleness scan: never retrieved in the "),
    (12, "REM staleness scan: retrieved 12 times but not refined for "),
])
def test_a_new_trigger_records_the_reason_of_the_findings_kind(db, run, uses, reason):
    assert mgcp("lesson", "add", "old-one", "--trigger", "when deploying the billing service",
                "--action", "Drain the queue before stopping the workers", "--db", db)[0] == 0
    conn = sqlite3.connect(db)
    conn.execute("UPDATE lessons SET created_at = '2020-01-01T00:00:00+00:00', "
                 "last_refined = '2020-01-01T00:00:00+00:00', usage_count = ?", [uses])
    conn.commit()
    assert mgcp("rem", "run", "--op", "staleness_scan", "--project", "/p/x", "--db", db)[0] == 0
    [f] = run(db, lambda s: engine.pending_findings(s, "/p/x"))
    code, out, err = mgcp("rem", "resolve", f.id, "--option", option_of(f, "update_trigger"),
                          "--input", "when the billing workers are redeployed", "--project", "/p/x", "--db", db)
    assert code == 0, err
    first = run(db, lambda s: s.lessons.versions("old-one"))[0]
    assert first.refinement_reason.startswith(reason) and "query" not in first.refinement_reason
