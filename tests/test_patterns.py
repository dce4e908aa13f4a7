"""Pattern reinforcement, the ranking boost and the contradiction scan as a user meets them: the CLI
(`rem run`, `patterns list|explain`, `lesson query --explain`, `rem resolve`, `rem undo`)."""

import json
import sqlite3
import subprocess
import sys

import pytest

from clihelp import mgcp
from conftest import dump

PROJECT = "/p/monorepo"
DECISION = "Use pnpm workspaces for the monorepo"
TRIGGER = "When deciding about pnpm workspaces monorepo"


@pytest.fixture
def dbp(db):
    return str(db)


@pytest.fixture
def on(tmp_path):
    path = tmp_path / "on.yaml"
    path.write_text("rem:\n  pattern_reinforcement:\n    enabled: true\nreinforcement:\n  boost: true\n")
    return str(path)


def seed_sessions(run, db, n=30, decision=DECISION):
    async def seed(store):
        for i in range(1, n + 1):
            await store.context.save(PROJECT, session_id=f"s{i}", decisions=[decision],
                                     notes=f"Session {i}: wired up package {i}.")
    run(db, seed)


def seed_copies(run, db, n=30):
    async def seed(store):
        for i in range(1, n + 1):
            await store.lessons.add(f"pin-{i:02d}", "adding a dependency", "Pin exact  versions of dependencies.")
    run(db, seed)


def cli_json(*args):
    code, out, err = mgcp(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def reinforce(dbp, *extra):
    return cli_json("rem", "run", "--project", PROJECT, "--op", "pattern_reinforcement", "--db", dbp, *extra)


def test_thirty_sessions_of_one_decision_make_one_pattern_of_thirty_traced_to_its_sources(db, dbp, run):
    seed_sessions(run, db)
    run1 = subprocess.run([sys.executable, "-m", "mgcp", "rem", "run", "--project", PROJECT, "--op",
                           "pattern_reinforcement", "--db", dbp, "--json"], capture_output=True, text=True)
    assert run1.returncode == 0, run1.stderr
    [pattern] = cli_json("patterns", "list", "--db", dbp)
    assert (pattern["category"], pattern["reinforcement_count"], pattern["text"]) == ("decision", 30, DECISION)
    explained = cli_json("patterns", "explain", pattern["id"], "--db", dbp)
    assert [s["session"] for s in explained["sources"]] == list(range(1, 31))
    assert {s["project"] for s in explained["sources"]} == {PROJECT}
    assert explained["pattern"]["derived_via"] == "pattern-reinforcement"
    code, out, _ = mgcp("patterns", "explain", pattern["id"], "--db", dbp)
    assert code == 0 and "count:     30" in out and "Derived from (30):" in out and DECISION in out


def test_a_second_run_changes_no_count_and_writes_no_pattern(db, dbp, run):
    seed_sessions(run, db)
    reinforce(dbp)
    before = dump(db, ["reinforced_patterns"])
    second = reinforce(dbp)["report"]["operations"][0]["summary"]
    assert second["skipped"]  # nothing it reads changed: not even run
    with sqlite3.connect(db) as conn:  # without the kept digest it runs, and finds nothing to write
        conn.execute("UPDATE rem_state SET last_run_result = NULL")
    third = reinforce(dbp)["report"]["operations"][0]["summary"]
    assert (third["written"], third["unchanged"]) == (0, 1)
    assert dump(db, ["reinforced_patterns"]) == before


def test_a_recurring_decision_no_lesson_holds_is_a_draft_finding(db, dbp, run):
    seed_sessions(run, db, n=4)
    [finding] = reinforce(dbp)["report"]["findings"]
    assert finding["kind"] == "reinforced_draft" and finding["data"]["count"] == 4
    assert "sessions 1, 2, 3, 4" in finding["description"]
    code, out, _ = mgcp("rem", "resolve", finding["id"], "--option", "1", "--project", PROJECT, "--db", dbp)
    assert code == 0 and "added lesson" in out
    reinforce(dbp)
    [pattern] = cli_json("patterns", "list", "--db", dbp)
    assert pattern["lesson_id"] == finding["data"]["draft"]["id"]


def test_a_decision_drafted_by_two_operations_is_one_lesson_whatever_trigger_the_first_was_given(db, dbp, run):
    seed_sessions(run, db, n=4)
    report = cli_json("rem", "run", "--project", PROJECT, "--op", "pattern_reinforcement", "--op",
                      "knowledge_extraction", "--db", dbp)["report"]
    drafts = {f["kind"]: f for f in report["findings"] if f["kind"] in ("reinforced_draft", "uncaptured_decision")}
    assert set(drafts) == {"reinforced_draft", "uncaptured_decision"}
    code, out, err = mgcp("rem", "resolve", drafts["reinforced_draft"]["id"], "--option", "1", "--project", PROJECT,
                          "--input", '{"trigger": "choosing a package manager"}', "--db", dbp)
    assert code == 0 and "added lesson" in out, err
    pending = cli_json("rem", "report", "--project", PROJECT, "--db", dbp)["pending"]
    assert drafts["uncaptured_decision"]["id"] not in [f["id"] for f in pending]  # stale: a lesson says it
    code, out, err = mgcp("rem", "resolve", drafts["uncaptured_decision"]["id"], "--option", "1", "--project",
                          PROJECT, "--db", dbp)
    assert code == 1 and "is already stale; nothing was applied" in err
    assert len(cli_json("lesson", "list", "--db", dbp)) == 1


def test_lessons_added_again_are_superseded_by_the_newest_under_auto_and_undone_in_one_step(db, dbp, run):
    seed_copies(run, db)
    result = reinforce(dbp, "--auto")
    [applied] = result["applied"]
    assert applied["kind"] == "reinforced_duplicates" and "equal once normalized" in applied["why"]
    explained = cli_json("patterns", "explain", "pin-30", "--db", dbp)
    assert explained["pattern"]["reinforcement_count"] == 30 and explained["lesson_status"] == "active"
    assert [m["id"] for m in explained["members"]] == [f"pin-{i:02d}" for i in range(1, 30)]
    assert len(cli_json("lesson", "list", "--db", dbp)) == 1
    again = reinforce(dbp)["report"]
    assert again["findings"] == [] and again["operations"][0]["summary"]["written"] == 0
    assert mgcp("rem", "undo", applied["id"], "--db", dbp)[0] == 0
    assert len(cli_json("lesson", "list", "--db", dbp)) == 30


def test_a_pattern_whose_copies_keep_the_most_used_reinforces_it_at_once_and_an_undo_puts_it_back(db, dbp, run):
    seed_copies(run, db, n=3)
    with sqlite3.connect(db) as conn:  # the oldest is the most used: kept, not the newest (the canonical)
        conn.execute("UPDATE lessons SET usage_count = 9 WHERE id = 'pin-01'")
    [finding] = reinforce(dbp)["report"]["findings"]
    assert finding["data"]["canonical"] == "pin-01"
    [pattern] = cli_json("patterns", "list", "--db", dbp)
    assert pattern["lesson_id"] == "pin-03"
    code, out, err = mgcp("rem", "resolve", finding["id"], "--option", "1", "--project", PROJECT, "--db", dbp)
    assert code == 0, err
    explained = cli_json("patterns", "explain", "pin-01", "--db", dbp)  # before any later pattern run
    assert explained["pattern"]["lesson_id"] == "pin-01" and explained["lesson_status"] == "active"
    assert [m["id"] for m in explained["members"]] == ["pin-02", "pin-03"]
    assert mgcp("rem", "undo", finding["id"], "--db", dbp)[0] == 0
    assert cli_json("patterns", "list", "--db", dbp) == [pattern]


OPENING = "Before you cut a release, " + "check the changelog, the version bump and the tag in that order; " * 4


def seed_lessons(run, db, lessons):
    async def seed(store):
        for lesson_id, trigger, action in lessons:
            await store.lessons.add(lesson_id, trigger, action)
    run(db, seed)


@pytest.mark.parametrize("lessons, differ", [
    ([("a1", "when releasing", OPENING + "Then announce it."),
      ("a2", "when onboarding a newcomer", OPENING + "Then pair with the newcomer."),
      ("a3", "when CI is flaky", OPENING + "Then rerun the flaky job.")], "trigger"),
    ([("b1", "when releasing", OPENING + "Then announce it."),
      ("b2", "when releasing", OPENING + "Then announce it."),
      ("b3", "when releasing", OPENING + "Then rerun the flaky job.")], "action after the first 200 characters"),
])
def test_auto_leaves_lessons_that_are_not_copies_to_a_person(db, dbp, run, lessons, differ):
    seed_lessons(run, db, lessons)
    before = dump(db, LESSON_TABLES)
    result = reinforce(dbp, "--auto")
    [finding] = result["report"]["findings"]
    assert result["applied"] == [] and [f["id"] for f in result["left_pending"]] == [finding["id"]]
    assert finding["data"]["normalized_equal"] is False and finding["recommended"] == 2
    assert f"not a copy, it differs in: {differ}" in finding["description"]
    assert dump(db, LESSON_TABLES) == before
    assert {lesson["id"] for lesson in cli_json("lesson", "list", "--db", dbp)} == {i for i, _, _ in lessons}


def test_auto_supersedes_copies_that_differ_only_in_case_spacing_and_punctuation(db, dbp, run):
    seed_lessons(run, db, [("c1", "Before a Release:", OPENING + "Then announce it!"),
                           ("c2", "before a  release", OPENING.upper() + "then  announce it"),
                           ("c3", "before a release", OPENING + "Then announce it.")])
    result = reinforce(dbp, "--auto")
    [applied] = result["applied"]
    assert "triggers and actions are equal once normalized" in applied["why"]
    assert [lesson["id"] for lesson in cli_json("lesson", "list", "--db", dbp)] == ["c3"]
    assert mgcp("rem", "undo", applied["id"], "--db", dbp)[0] == 0
    assert len(cli_json("lesson", "list", "--db", dbp)) == 3


def test_undoing_the_run_removes_the_patterns_it_wrote(db, dbp, run):
    seed_sessions(run, db, n=3)
    before = dump(db, ["reinforced_patterns"])
    run_id = reinforce(dbp)["report"]["run_id"]
    assert cli_json("patterns", "list", "--db", dbp)
    assert mgcp("rem", "undo", "--run", str(run_id), "--db", dbp)[0] == 0
    assert cli_json("patterns", "list", "--db", dbp) == [] and dump(db, ["reinforced_patterns"]) == before


def test_pattern_reinforcement_is_off_by_default(db, dbp, run, on):
    seed_sessions(run, db, n=12)
    status = {o["operation"]: o for o in cli_json("rem", "status", "--project", PROJECT, "--db", dbp)["operations"]}
    assert status["pattern_reinforcement"]["due"] is False and status["contradiction_scan"]["due"] is True
    assert status["pattern_reinforcement"]["enabled"] is False
    assert "no (off: enabled: false)" in mgcp("rem", "status", "--project", PROJECT, "--db", dbp)[1]
    enabled = {o["operation"]: o for o in cli_json("rem", "status", "--project", PROJECT, "--db", dbp,
                                                   "--config", on)["operations"]}
    assert enabled["pattern_reinforcement"]["due"] is True


@pytest.mark.parametrize("args, code, message", [
    (["patterns", "explain", "nope"], 1, "no reinforced pattern or lesson with id 'nope'"),
    (["patterns", "explain", "plain"], 1, "lesson 'plain' has not been reinforced"),
    (["patterns", "list", "--limit", "0"], 2, "invalid --limit 0; allowed: a whole number from 1 to 10000"),
    (["patterns", "list", "--since", "not-a-date"], 2, "invalid --since 'not-a-date'; allowed: an ISO-8601 date"),
    (["patterns", "list", "--kind", "fact"], 2, "invalid --kind 'fact'; allowed: lesson, decision, note"),
])
def test_patterns_refuses_what_it_cannot_show(dbp, args, code, message):
    mgcp("lesson", "add", "plain", "--trigger", "t", "--action", "Do the plain thing.", "--db", dbp)
    got, out, err = mgcp(*args, "--db", dbp)
    assert (got, out) == (code, "") and err.startswith("Error: " + message) and err.count("\n") == 1
    got, out, err = mgcp(*args, "--db", dbp, "--json")
    assert json.loads(err)["exit_code"] == code


def test_patterns_list_filters_by_kind_and_since(db, dbp, run):
    seed_sessions(run, db, n=3)
    seed_copies(run, db, n=3)
    reinforce(dbp)
    assert [p["category"] for p in cli_json("patterns", "list", "--kind", "lesson", "--db", dbp)] == ["lesson"]
    assert len(cli_json("patterns", "list", "--kind", "lesson,decision", "--db", dbp)) == 2
    assert cli_json("patterns", "list", "--since", "2999-01-01", "--db", dbp) == []
    assert mgcp("patterns", "list", "--since", "2999-01-01", "--db", dbp)[1] == "no reinforced patterns match\n"
    assert len(cli_json("patterns", "list", "--limit", "1", "--db", dbp)) == 1


# -- the ranking boost ------------------------------------------------------------------------------

def ranked(dbp, *config):
    return cli_json("lesson", "query", "pnpm workspaces monorepo", "--explain", "--db", dbp, *config)


def test_a_reinforced_lesson_outranks_an_equal_one_shot_lesson_only_with_the_boost(db, dbp, run, on):
    async def seed(store):
        await store.lessons.add("aa-one-shot", TRIGGER, DECISION)
        await store.lessons.add("zz-reinforced", TRIGGER, DECISION)  # newer: it holds the decision
        for i in range(1, 7):
            await store.context.save(PROJECT, session_id=f"s{i}", decisions=[DECISION])
    run(db, seed)
    reinforce(dbp)
    off = ranked(dbp)
    assert off[0]["score"] == off[1]["score"] and all("reinforcement_boost" not in h["score_parts"] for h in off)
    boosted = ranked(dbp, "--config", on)
    assert [h["id"] for h in boosted] == ["zz-reinforced", "aa-one-shot"]
    assert boosted[0]["score_parts"]["reinforcement_boost"] == 0.3  # min(0.3, 0.05 x 6)
    assert boosted[0]["score"] == pytest.approx(boosted[1]["score"] + 0.3, abs=1e-3)
    code, out, _ = mgcp("lesson", "query", "pnpm workspaces monorepo", "--explain", "--db", dbp, "--config", on)
    first = out.split("\n\n")[0]
    assert code == 0 and first.startswith("score 1.65  zz-reinforced") and "reinforcement_boost 0.300" in first


def test_recall_puts_the_reinforced_lesson_first_only_with_the_boost(db, dbp, run, on):
    async def seed(store):
        await store.lessons.add("aa-one-shot", TRIGGER, DECISION)
        await store.lessons.add("zz-reinforced", TRIGGER, DECISION)
        for i in range(1, 7):
            await store.context.save(PROJECT, session_id=f"s{i}", decisions=[DECISION])
    run(db, seed)
    reinforce(dbp)

    def recalled(*config):
        return cli_json("recall", "pnpm workspaces monorepo", "--project", PROJECT, "--db", dbp, *config)["lessons"]

    assert recalled()[0] == "aa-one-shot"  # a tie goes to the smaller id
    assert recalled("--config", on)[0] == "zz-reinforced"


# -- the contradiction scan -------------------------------------------------------------------------

@pytest.fixture
def opposite(db, dbp, run):
    async def seed(store):
        await store.lessons.add("runner-old", "choosing a python test runner", "Prefer pytest over unittest.")
        await store.lessons.add("runner-new", "choosing a python test runner", "Prefer unittest over pytest.")
    run(db, seed)
    return dbp


def contradiction(dbp, *extra):
    result = cli_json("rem", "run", "--project", PROJECT, "--op", "contradiction_scan", "--db", dbp, *extra)
    return result, [f for f in result["report"]["findings"] if f["kind"] == "contradiction"]


def test_auto_never_applies_a_contradiction(opposite):
    result, [finding] = contradiction(opposite, "--auto")
    assert result["applied"] == [] and [f["id"] for f in result["left_pending"]] == [finding["id"]]
    assert len(cli_json("lesson", "list", "--db", opposite)) == 2


@pytest.mark.parametrize("option, text, archived", [(1, None, "runner-old"), (2, None, "runner-new")])
def test_keeping_one_archives_the_other_and_undo_restores_it(db, opposite, option, text, archived):
    before = dump(db, ["lessons", "lesson_versions", "lesson_lifecycle"])
    _, [finding] = contradiction(opposite)
    assert mgcp("rem", "resolve", finding["id"], "--option", str(option), "--db", opposite)[0] == 0
    assert [lesson["id"] for lesson in cli_json("lesson", "list", "--status", "archived", "--db", opposite)] == [archived]
    assert mgcp("rem", "undo", finding["id"], "--db", opposite)[0] == 0
    assert {lesson["id"] for lesson in cli_json("lesson", "list", "--db", opposite)} == {"runner-old", "runner-new"}
    after = dump(db, ["lessons", "lesson_versions", "lesson_lifecycle"])
    assert after["lessons"] == before["lessons"] and after["lesson_versions"] == before["lesson_versions"]


def test_refining_one_writes_a_version_and_undo_takes_it_back(opposite):
    _, [finding] = contradiction(opposite)
    code, out, err = mgcp("rem", "resolve", finding["id"], "--option", "3", "--input",
                          "2: Prefer unittest only in legacy modules.", "--db", opposite)
    assert code == 0 and "refined runner-new" in out
    assert cli_json("lesson", "show", "runner-new", "--db", opposite)["version"] == 2
    assert mgcp("rem", "undo", finding["id"], "--db", opposite)[0] == 0
    assert cli_json("lesson", "show", "runner-new", "--db", opposite)["action"] == "Prefer unittest over pytest."


def test_refining_needs_a_lesson_and_its_action(db, opposite):
    _, [finding] = contradiction(opposite)
    before = dump(db)
    code, _, err = mgcp("rem", "resolve", finding["id"], "--option", "3", "--input", "3: whatever", "--db", opposite)
    assert code == 2 and "give the lesson and its new action" in err and dump(db) == before


def test_keep_both_is_remembered(opposite):
    _, [finding] = contradiction(opposite)
    assert mgcp("rem", "resolve", finding["id"], "--option", "4", "--db", opposite)[0] == 0
    assert contradiction(opposite)[1] == []


# -- every answer is undone exactly -------------------------------------------------------------------

LESSON_TABLES = ["lessons", "lesson_versions", "lesson_lifecycle"]


def findings_of(dbp, run_args):
    return cli_json("rem", "run", "--project", PROJECT, "--db", dbp, *run_args)["report"]["findings"]


@pytest.mark.parametrize("kind, option, text", [
    ("contradiction", 1, None), ("contradiction", 2, None), ("contradiction", 3, "1: Prefer pytest everywhere."),
    ("contradiction", 4, None),
    ("reinforced_duplicates", 1, None), ("reinforced_duplicates", 2, None),
    ("reinforced_draft", 1, None), ("reinforced_draft", 1, '{"id": "pnpm", "tags": ["js"]}'), ("reinforced_draft", 2, None),
])
def test_every_answer_is_undone_exactly(db, dbp, run, kind, option, text):
    async def seed(store):
        await store.lessons.add("runner-old", "choosing a python test runner", "Prefer pytest over unittest.")
        await store.lessons.add("runner-new", "choosing a python test runner", "Prefer unittest over pytest.")
        for i in range(1, 4):
            await store.lessons.add(f"pin-{i}", "adding a dependency", "Pin exact versions of dependencies.")
            await store.context.save(PROJECT, session_id=f"s{i}", decisions=[DECISION])
    run(db, seed)
    found = findings_of(dbp, ["--op", "contradiction_scan", "--op", "pattern_reinforcement"])
    finding = next(f for f in found if f["kind"] == kind)
    before = dump(db, LESSON_TABLES)
    args = ["--input", text] if text else []
    code, _, err = mgcp("rem", "resolve", finding["id"], "--option", str(option), *args, "--project", PROJECT,
                        "--db", dbp)
    assert code == 0, err
    assert mgcp("rem", "undo", finding["id"], "--db", dbp)[0] == 0
    assert dump(db, LESSON_TABLES) == before
    assert [f["id"] for f in cli_json("rem", "report", "--project", PROJECT, "--db", dbp)["pending"]
            if f["id"] == finding["id"]] == [finding["id"]]


def test_history_read_in_pages_and_after_a_mark_observes_what_the_whole_history_holds(db, run):
    # saves that carry their decisions over come out as None; any page size, and reading on from a
    # mark (the notes and decisions of the row before), observes the same
    async def seed(store):
        for i in range(1, 13):
            for project in (PROJECT, "/p/other"):
                await store.context.save(project, session_id=f"s{i // 2}", notes=f"Session {i // 3}: pool warm at night.",
                                         decisions=["Use pnpm workspaces", "Pin node"][: 1 + (i // 4) % 2])
    run(db, seed)
    conn = sqlite3.connect(db)
    rows = conn.execute("""SELECT project_id, session_number, timestamp, coalesce(notes, ''), recent_decisions
                           FROM context_history ORDER BY project_id, id""").fetchall()
    conn.close()
    whole = [(p, s, at, notes, json.loads(d)) for p, s, at, notes, d in rows]
    from mgcp.operations import pattern_reinforcement

    expected = pattern_reinforcement.Observations.of(whole, [])
    projects = sorted({row[0] for row in whole})

    async def paged(store, size, cut):
        """Read each project up to its `cut`-th row, then on from the mark that left."""
        kept = store.pattern_observations
        observed, pages, read = pattern_reinforcement.Observations(), [], {}
        for project_id in projects:
            observed.resume(None, None, [])
            first = []
            async for page in kept.history_after(project_id, None, read, size=size):
                first.extend(page)
            last_id = (await store.db.fetchall("SELECT id FROM context_history WHERE project_id = ? ORDER BY id",
                                               [project_id]))[cut - 1][0]
            raw = await store.db.fetchone("SELECT coalesce(notes, ''), recent_decisions FROM context_history WHERE id = ?",
                                          [last_id])
            mark = (last_id, cut, raw[0], raw[1])
            observed.add_history(first[:cut])
            pages.append(first[:cut])
            observed.resume(project_id, mark[2], kept.decisions_of(mark))
            async for page in kept.history_after(project_id, mark, {}, size=size):
                pages.append(page)
                observed.add_history(page)
        return observed, pages, read

    conn = sqlite3.connect(db)
    last = {p: (newest, n) for p, newest, n in conn.execute(
        "SELECT project_id, max(id), count(*) FROM context_history GROUP BY project_id")}
    conn.close()
    assert min(n for _, n in last.values()) >= 5
    for size, cut in ((1, 1), (2, 3), (5, 4), (1000, 5)):
        observed, pages, read = run(db, lambda store: paged(store, size, cut))
        assert any(row[4] is None for page in pages for row in page)
        assert observed.snapshots == len(whole) == sum(map(len, pages))
        assert {p: mark[:2] for p, mark in read.items()} == last
        assert observed.wording == expected.wording and observed.observed().keys(2, {"decision", "note"})
        assert observed.seen() == expected.seen()  # every key's sources (and their first moments)


ALPHA, BETA = "/proj/alpha", "/proj/beta"
# a decision longer than a cluster key: the two projects' wordings share the key and differ after it
SHARED = "Keep money in integer cents " + "and round only where it is shown, " * 6


def seed_projects(run, db, said: dict[str, tuple[str, int]]):
    """Each project's sessions stating one decision, the projects one after another in time."""
    async def seed(store):
        for project, (decision, sessions) in said.items():
            for i in range(1, sessions + 1):
                await store.context.save(project, session_id=f"{project}-{i}", decisions=[decision])
    run(db, seed)


def test_a_run_shows_and_counts_only_its_own_projects_drafts(db, dbp, run):
    seed_projects(run, db, {ALPHA: ("Alpha stores money as integer cents", 6),
                            BETA: ("Beta uses pnpm workspaces", 6)})
    code, out, err = mgcp("rem", "run", "--project", ALPHA, "--op", "pattern_reinforcement", "--db", dbp)
    assert code == 0 and "1 new finding(s)" in out and "pattern_reinforcement: 1 finding(s)" in err
    report = cli_json("rem", "report", "--project", ALPHA, "--db", dbp)
    [draft] = report["last_run"]["findings"]
    assert draft["project_id"] == report["project_id"] and "integer cents" in draft["title"]
    assert "beta" not in json.dumps(report).lower()
    assert "beta" not in mgcp("rem", "report", "--project", ALPHA, "--db", dbp)[1].lower()
    code, out, err = mgcp("rem", "run", "--project", BETA, "--op", "pattern_reinforcement", "--db", dbp)
    assert code == 0 and "1 new finding(s)" in out and "pattern_reinforcement: 1 finding(s)" in err
    [pending] = cli_json("rem", "report", "--project", BETA, "--db", dbp)["pending"]
    assert "pnpm workspaces" in pending["title"]


def test_a_decision_both_projects_made_is_drafted_in_each_from_its_own_sessions_and_wording(db, dbp, run):
    seed_projects(run, db, {ALPHA: (SHARED + "as the alpha ledger does.", 4),
                            BETA: (SHARED.upper() + "AS THE BETA INVOICES DO.", 3)})
    drafts = {}
    for project, other in ((ALPHA, "beta"), (BETA, "alpha")):
        [draft] = cli_json("rem", "run", "--project", project, "--op", "pattern_reinforcement",
                           "--db", dbp)["report"]["findings"]
        assert other not in json.dumps(draft).lower()
        drafts[project] = draft
    assert drafts[ALPHA]["data"]["count"] == 4 and drafts[BETA]["data"]["count"] == 3
    assert drafts[ALPHA]["data"]["draft"]["action"].endswith("as the alpha ledger does.")
    assert [s["sessions"] for s in drafts[ALPHA]["data"]["sessions"]] == [[1, 2, 3, 4]]
    for project in (ALPHA, BETA):  # each reviewed where it was raised
        assert [f["id"] for f in cli_json("rem", "report", "--project", project, "--db", dbp)["pending"]] == [
            drafts[project]["id"]]
    [pattern] = cli_json("patterns", "list", "--db", dbp)  # the knowledge base's pattern counts both
    assert pattern["reinforcement_count"] == 7


def test_a_decision_recurring_only_across_projects_is_drafted_in_neither(db, dbp, run):
    seed_projects(run, db, {ALPHA: (DECISION, 2), BETA: (DECISION, 2)})
    for project in (ALPHA, BETA):
        assert cli_json("rem", "run", "--project", project, "--op", "pattern_reinforcement",
                        "--db", dbp)["report"]["findings"] == []
    [pattern] = cli_json("patterns", "list", "--db", dbp)
    assert pattern["reinforcement_count"] == 4


def test_a_draft_from_one_projects_decisions_is_raised_by_its_own_run_not_another_projects(db, dbp, run):
    seed_sessions(run, db, n=3)
    other = "/p/elsewhere"

    async def elsewhere(store):
        await store.context.save(other, session_id="e1", notes="Nothing about workspaces here.")
    run(db, elsewhere)
    assert cli_json("rem", "run", "--project", other, "--op", "pattern_reinforcement",
                    "--db", dbp)["report"]["findings"] == []
    assert [f["id"] for f in cli_json("rem", "report", "--project", other, "--db", dbp)["pending"]] == []
    [draft] = reinforce(dbp)["report"]["findings"]
    assert [f["id"] for f in cli_json("rem", "report", "--project", PROJECT, "--db", dbp)["pending"]] == [draft["id"]]
    code, out, _ = mgcp("rem", "resolve", draft["id"], "--option", "1", "--project", PROJECT, "--db", dbp)
    assert code == 0 and "added lesson" in out


def test_lessons_added_again_are_a_finding_every_projects_review_shows(db, dbp, run):
    """Copies of a lesson are the knowledge base's, not the project's whose run found them: every
    project's review and report shows the finding, and it is raised once."""
    seed_copies(run, db)
    [found] = reinforce(dbp)["report"]["findings"]
    assert found["kind"] == "reinforced_duplicates"
    other = "/p/elsewhere"
    pending = cli_json("rem", "report", "--project", other, "--db", dbp)["pending"]
    assert found["id"] in [f["id"] for f in pending]
    again = cli_json("rem", "run", "--project", other, "--op", "pattern_reinforcement", "--db", dbp)
    assert [f for f in again["report"]["findings"] if f["kind"] == "reinforced_duplicates"] == []
    code, out, err = mgcp("rem", "resolve", found["id"], "--option", "1", "--project", other, "--db", dbp)
    assert code == 0, err
