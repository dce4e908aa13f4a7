"""Where two features meet: drafts offered by two operations, REM answers through the write gate,
one project's pattern findings kept out of another project's review."""

import json

import pytest

from clihelp import mgcp

DECISION = "Use pnpm workspaces for the monorepo"


def cli_json(*args):
    code, out, err = mgcp(*args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def dbp(db):
    return str(db)


def seed_decision(run, db, project, n=6):
    async def seed(store):
        for i in range(1, n + 1):
            await store.context.save(project, session_id=f"{project}-s{i}", decisions=[DECISION],
                                     notes=f"Session {i}: wired up package {i}.")
    run(db, seed)


def pending(dbp, project):
    return cli_json("rem", "report", "--project", project, "--db", dbp)["pending"]


def test_one_decision_drafted_by_two_operations_is_added_once(db, dbp, run):
    """knowledge_extraction and pattern_reinforcement may both offer a draft for one recurring
    decision: once one draft is accepted, the other goes stale instead of adding a copy."""
    seed_decision(run, db, "/p/a")
    for op in ("knowledge_extraction", "pattern_reinforcement"):
        cli_json("rem", "run", "--project", "/p/a", "--op", op, "--db", dbp)
    drafts = [f for f in pending(dbp, "/p/a") if (f["data"].get("draft") or {}).get("action") == DECISION]
    assert {f["operation"] for f in drafts} == {"knowledge_extraction", "pattern_reinforcement"}
    code, out, err = mgcp("rem", "resolve", drafts[0]["id"], "--option", "1", "--project", "/p/a", "--db", dbp)
    assert code == 0 and "added lesson" in out, err
    assert drafts[1]["id"] not in {f["id"] for f in pending(dbp, "/p/a")}
    assert len(cli_json("lesson", "list", "--db", dbp)) == 1


def test_a_decision_drafted_by_two_operations_and_accepted_with_edits_is_added_once(db, dbp, run):
    """The first draft accepted with an edited trigger and action: the other draft of the same
    decision no longer equals any lesson's action, and would have added a second lesson."""
    seed_decision(run, db, "/p/a")
    for op in ("knowledge_extraction", "pattern_reinforcement"):
        cli_json("rem", "run", "--project", "/p/a", "--op", op, "--db", dbp)
    drafts = [f for f in pending(dbp, "/p/a") if (f["data"].get("draft") or {}).get("action") == DECISION]
    edits = json.dumps({"trigger": "setting up a JavaScript monorepo", "action": "Use pnpm workspaces, not yarn"})
    code, out, err = mgcp("rem", "resolve", drafts[0]["id"], "--option", "1", "--input", edits,
                          "--project", "/p/a", "--db", dbp)
    assert code == 0 and "added lesson" in out, err
    assert drafts[1]["id"] not in {f["id"] for f in pending(dbp, "/p/a")}
    code, out, err = mgcp("rem", "resolve", drafts[1]["id"], "--option", "1", "--project", "/p/a", "--db", dbp)
    assert code != 0 and "stale" in err, (out, err)
    assert len(cli_json("lesson", "list", "--db", dbp)) == 1


def test_one_projects_pattern_findings_stay_out_of_another_projects_review(db, dbp, run):
    seed_decision(run, db, "/p/alpha")
    cli_json("rem", "run", "--project", "/p/alpha", "--op", "pattern_reinforcement", "--db", dbp)
    assert any(f["operation"] == "pattern_reinforcement" for f in pending(dbp, "/p/alpha"))
    mgcp("context", "save", "--project", "/p/beta", "--notes", "another project", "--db", dbp)
    assert not any(f["operation"] == "pattern_reinforcement" for f in pending(dbp, "/p/beta"))


@pytest.mark.parametrize("answer", ["q", "ok", "👍"])
def test_a_refine_answer_passes_the_write_gate(dbp, answer):
    """A REM answer that writes a lesson's text is held to the rules `lesson refine` keeps: a piped
    review's "q" or an agent's "ok" never becomes a lesson's action."""
    mgcp("lesson", "add", "pool-size", "--trigger", "sizing a database connection pool",
         "--action", "Start from cores x 2 and measure under load.", "--db", dbp)
    for _ in range(3):
        mgcp("lesson", "outcome", "pool-size", "--failed", "--db", dbp)
    [finding] = [f for f in pending(dbp, "/p") if f["kind"] == "failure_streak"]
    refine = next(i for i, o in enumerate(finding["options"], 1) if o["action"] == "refine")
    code, out, err = mgcp("rem", "resolve", finding["id"], "--option", refine, "--input", answer,
                          "--project", "/p", "--db", dbp)
    assert code == 2 and err.count("\n") == 1
    assert cli_json("lesson", "show", "pool-size", "--db", dbp)["action"] == "Start from cores x 2 and measure under load."


def test_undoing_the_answer_to_a_failure_streak_a_success_ended_since_leaves_it_stale(dbp):
    mgcp("lesson", "add", "flaky-one", "--trigger", "running the integration tests",
         "--action", "Run them with --retries 3 to absorb flakes", "--db", dbp)
    for _ in range(3):
        mgcp("lesson", "outcome", "flaky-one", "--failed", "--project", "/p", "--db", dbp)
    [finding] = [f for f in pending(dbp, "/p") if f["kind"] == "failure_streak"]
    keep = next(i for i, o in enumerate(finding["options"], 1) if o["action"] == "keep")
    assert mgcp("rem", "resolve", finding["id"], "--option", keep, "--project", "/p", "--db", dbp)[0] == 0
    assert mgcp("lesson", "outcome", "flaky-one", "--helped", "--project", "/p", "--db", dbp)[0] == 0
    code, out, err = mgcp("rem", "undo", finding["id"], "--project", "/p", "--db", dbp)
    assert code == 0 and "marked stale" in out and "failure streak" in out, (out, err)
    assert pending(dbp, "/p") == []


def test_auto_never_merges_two_lessons_that_say_opposite_things(dbp):
    """Duplicate detection reads words, so two reversed preferences look like one lesson (1.00);
    --auto leaves such a merge to a person, and the contradiction scan raises the pair."""
    for lesson_id, action in (("prefer-a", "Prefer httpx over requests for new code."),
                              ("prefer-b", "Prefer requests over httpx for new code.")):
        mgcp("lesson", "add", lesson_id, "--trigger", f"choosing an http client in python ({lesson_id})",
             "--action", action, "--db", dbp)
    cli_json("rem", "run", "--project", "/p", "--op", "duplicate_detection", "--op", "contradiction_scan",
             "--db", dbp)
    kinds = {f["kind"] for f in pending(dbp, "/p")}
    assert {"contradiction"} <= kinds and kinds & {"duplicate_merge", "duplicate_review"}
    result = cli_json("rem", "run", "--project", "/p", "--auto", "--db", dbp)
    assert result["applied"] == []
    assert {lesson["id"] for lesson in cli_json("lesson", "list", "--db", dbp)} == {"prefer-a", "prefer-b"}
