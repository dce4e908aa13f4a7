"""Kinds and confidence, write-time dedup and the gate, ranking with --explain, outcome feedback,
tiers and `mgcp stats`, used as a user uses them: the CLI in a subprocess."""

import json
import sqlite3

import pytest

from clihelp import mgcp
from conftest import dump

API = ("--trigger", "calling an unfamiliar API", "--action", "Read its signature first, then one call site.")


@pytest.fixture
def dbp(db):
    return str(db)


def add(dbp, lesson_id, *args):
    code, out, err = mgcp("lesson", "add", lesson_id, *args, "--db", dbp, "--json")
    assert code == 0, err
    return json.loads(out)


def test_kind_and_confidence_are_set_shown_and_versioned(dbp):
    lesson = add(dbp, "c1", "--trigger", "writing SQL migrations", "--action", "Never alter legacy tables.",
                 "--kind", "constraint", "--confidence", "0.95")
    assert (lesson["kind"], lesson["confidence"], lesson["tier"]) == ("constraint", 0.95, "candidate")
    assert mgcp("lesson", "refine", "c1", "--confidence", "0.7", "--reason", "one exception found", "--db", dbp)[0] == 0
    code, out, _ = mgcp("lesson", "history", "c1", "--db", dbp, "--json")
    assert [(v["kind"], v["confidence"]) for v in json.loads(out)] == [("constraint", 0.95), ("constraint", 0.7)]
    code, out, _ = mgcp("lesson", "show", "c1", "--db", dbp)
    assert "constraint, confidence 0.70, candidate, importance" in out


def test_refine_reports_the_importance_of_what_it_wrote(dbp):
    add(dbp, "t1", "--trigger", "changing code you did not write", "--action", "Read its tests before editing it")
    code, out, err = mgcp("lesson", "refine", "t1", "--action", "Read its tests before editing it, and run them first "
                          "to see they pass", "--reason", "tests may already fail", "--db", dbp, "--json")
    assert code == 0, err
    shown = json.loads(mgcp("lesson", "show", "t1", "--db", dbp, "--json")[1])
    assert json.loads(out)["importance"] == shown["importance"] and shown["version"] == 2


@pytest.mark.parametrize("args, message", [
    (["--kind", "rule"], "unknown kind 'rule'"),
    (["--confidence", "1.5"], "confidence must be a number from 0 to 1"),
])
def test_bad_kind_or_confidence_is_refused(dbp, args, message):
    before = dump(dbp)
    code, out, err = mgcp("lesson", "add", "x", *API, *args, "--db", dbp)
    assert code == 2 and out == "" and message in err
    assert dump(dbp) == before


def test_legacy_lessons_read_with_the_default_kind_and_confidence(dbp):
    conn = sqlite3.connect(dbp)
    with conn:
        conn.execute("""INSERT INTO lessons (id, trigger, action, created_at, last_refined)
                        VALUES ('old', 'an old situation', 'An old answer to it.', '2024-01-01', '2024-01-01')""")
    conn.close()
    code, out, _ = mgcp("lesson", "show", "old", "--db", dbp, "--json")
    assert (json.loads(out)["kind"], json.loads(out)["confidence"]) == ("pattern", 0.8)


@pytest.mark.parametrize("trigger, action", [
    ("calling an unfamiliar API", "Read its signature first, then one call site."),
    ("  Calling an UNFAMILIAR api!! ", "read its signature first -- then one call_site"),
])
def test_the_same_text_twice_is_one_lesson(dbp, trigger, action):
    first = add(dbp, "verify-api", *API)
    code, out, err = mgcp("lesson", "add", "verify-api-again", "--trigger", trigger, "--action", action,
                          "--db", dbp, "--json")
    again = json.loads(out)
    assert code == 0 and again["existing"] is True and again["id"] == first["id"] == "verify-api"
    assert "already says this" in again["message"]
    code, out, err = mgcp("lesson", "add", "verify-api-3", "--trigger", trigger, "--action", action, "--db", dbp)
    assert code == 0 and "lesson verify-api already says this" in err
    code, out, _ = mgcp("lesson", "list", "--db", dbp, "--json")
    assert [lesson["id"] for lesson in json.loads(out)] == ["verify-api"]


def test_a_near_match_is_added_and_named(dbp):
    add(dbp, "verify-api", *API)
    near = add(dbp, "check-api", "--trigger", "calling an unknown API",
               "--action", "Read its signature first, then one real call site.")
    assert near["existing"] is False and [s["id"] for s in near["similar"]] == ["verify-api"]
    assert near["similar"][0]["similarity"] >= 0.8 and "consider refining" in near["message"]
    unrelated = add(dbp, "tag-releases", "--trigger", "deploying", "--action", "Tag every release in git first.")
    assert unrelated["similar"] == []


def test_a_near_match_that_denies_the_other_is_named_as_maybe_opposite_not_to_refine(dbp):
    add(dbp, "read-tests", "--trigger", "changing code you did not write", "--action", "Read its tests before editing it")
    never = add(dbp, "never-tests", "--trigger", "changing code you did not write",
                "--action", "Never read its tests before editing it")
    assert never["similar"] and never["similar"][0] == {**never["similar"][0], "id": "read-tests", "opposite": True}
    assert "may say the opposite" in never["message"] and "consider refining" not in never["message"]


@pytest.mark.parametrize("trigger, action, why", [
    ("hi", "Read its signature first.", "greeting or an acknowledgement"),
    ("calling an API", "ok thanks", "under 10 characters"),
    ("部署服务时", "检查日志", "under 10 characters"),
    ("calling an API", "do it 🚀🚀", "under 10 characters"),  # an emoji is wide, not a letter
    ("calling an API", "👍👍👍👍👍👍👍👍👍👍👍👍", "no words"),
    ("calling an API", "Thank you!", "greeting or an acknowledgement"),
])
def test_trivial_content_is_refused_and_nothing_written(dbp, trigger, action, why):
    before = dump(dbp)
    code, out, err = mgcp("lesson", "add", "t", "--trigger", trigger, "--action", action, "--db", dbp)
    assert code == 2 and out == "" and why in err and err.count("\n") == 1
    assert dump(dbp) == before


def test_a_short_action_in_chinese_says_enough(dbp):
    code, _, err = mgcp("lesson", "add", "deploy-zh", "--trigger", "部署服务时", "--action", "部署后检查日志", "--db", dbp)
    assert code == 0, err


def outcome(dbp, lesson_id, flag, *more):
    code, out, err = mgcp("lesson", "outcome", lesson_id, flag, *more, "--db", dbp, "--json")
    assert code == 0, err
    return json.loads(out)


def test_equal_relevance_a_proven_lesson_outranks_a_candidate_and_explain_says_why(dbp):
    add(dbp, "proven", "--trigger", "flaky integration test", "--action", "Quarantine it and file a ticket today.")
    add(dbp, "fresh", "--trigger", "flaky integration test", "--action", "Quarantine it and open an issue today.")
    for _ in range(3):
        outcome(dbp, "proven", "--helped")
    code, out, _ = mgcp("lesson", "query", "flaky integration test", "--explain", "--db", dbp, "--json")
    hits = json.loads(out)
    assert [h["id"] for h in hits] == ["proven", "fresh"]
    assert [h["tier"] for h in hits] == ["validated", "candidate"]
    proven, fresh = (h["score_parts"] for h in hits)
    assert proven["relevance"] == fresh["relevance"]  # same trigger, same words matched
    assert proven["success"] > fresh["success"] and proven["tier"] > fresh["tier"]
    code, out, _ = mgcp("lesson", "query", "flaky integration test", "--explain", "--db", dbp)
    assert "score parts: relevance" in out and "success 0.200 (= 0.25 x 0.80)" in out


def test_three_failures_in_a_row_raise_a_finding_and_a_success_resets(dbp):
    add(dbp, "verify-api", *API)
    assert outcome(dbp, "verify-api", "--failed")["streak"] == 1
    outcome(dbp, "verify-api", "--failed")
    reset = outcome(dbp, "verify-api", "--helped")
    assert reset["streak"] == 0 and reset["finding"] is None
    outcome(dbp, "verify-api", "--failed")
    assert outcome(dbp, "verify-api", "--failed")["finding"] is None
    third = outcome(dbp, "verify-api", "--failed", "--note", "signature was out of date")
    assert third["streak"] == 3 and third["success_rate"] == 0.1667
    finding = third["finding"]
    assert finding["kind"] == "failure_streak" and [o["action"] for o in finding["options"]] == [
        "refine", "archive", "keep", "skip"]
    assert outcome(dbp, "verify-api", "--failed")["finding"] is None  # the same streak: asked once
    code, out, _ = mgcp("rem", "report", "--project", "/p", "--db", dbp, "--json")
    assert [f["id"] for f in json.loads(out)["pending"]] == [finding["id"]]


def test_the_first_failure_after_a_refinement_starts_a_new_streak(dbp):
    add(dbp, "verify-api", *API)
    for _ in range(3):
        finding = outcome(dbp, "verify-api", "--failed")["finding"]
    assert mgcp("rem", "resolve", finding["id"], "--option", "1", "--input",
                "Read the signature and one current call site.", "--db", dbp)[0] == 0
    after = outcome(dbp, "verify-api", "--failed")  # the new text failed once, not four times
    assert (after["streak"], after["failed"], after["finding"]) == (1, 4, None)
    outcome(dbp, "verify-api", "--failed")
    assert outcome(dbp, "verify-api", "--failed")["finding"]["title"] == 'Lesson "verify-api" failed 3 times in a row'


def test_a_refinement_that_leaves_the_text_as_it_is_does_not_restart_the_streak(dbp):
    add(dbp, "verify-api", *API)
    outcome(dbp, "verify-api", "--failed")
    outcome(dbp, "verify-api", "--failed")
    assert mgcp("lesson", "refine", "verify-api", "--confidence", "0.9", "--tag", "api", "--reason", "sure of it",
                "--db", dbp)[0] == 0
    third = outcome(dbp, "verify-api", "--failed")  # the same text failed a third time in a row
    assert third["streak"] == 3 and third["finding"] is not None


@pytest.mark.parametrize("option, text, check", [
    ("1", "Read the signature and one current call site.", lambda l: l["version"] == 2),
    ("2", None, lambda l: l["status"] == "archived" and l["tier"] == "archived"),
    ("3", None, lambda l: l["status"] == "active" and l["version"] == 1),
])
def test_the_failure_finding_options_work_and_undo(dbp, option, text, check):
    add(dbp, "verify-api", *API)
    for _ in range(3):
        finding = outcome(dbp, "verify-api", "--failed")["finding"]
    before = json.loads(mgcp("lesson", "show", "verify-api", "--db", dbp, "--json")[1])
    code, out, err = mgcp("rem", "resolve", finding["id"], "--option", option, *(["--input", text] if text else []),
                          "--db", dbp)
    assert code == 0, err
    assert check(json.loads(mgcp("lesson", "show", "verify-api", "--db", dbp, "--json")[1]))
    code, out, err = mgcp("rem", "undo", finding["id"], "--db", dbp)
    assert code == 0, err
    after = json.loads(mgcp("lesson", "show", "verify-api", "--db", dbp, "--json")[1])
    assert {k: after[k] for k in ("version", "action", "status", "kind", "confidence")} == \
        {k: before[k] for k in ("version", "action", "status", "kind", "confidence")}


def test_outcome_needs_exactly_one_flag_and_a_known_lesson(dbp):
    add(dbp, "verify-api", *API)
    assert mgcp("lesson", "outcome", "verify-api", "--db", dbp)[0] == 2
    assert mgcp("lesson", "outcome", "verify-api", "--helped", "--failed", "--db", dbp)[0] == 2
    code, _, err = mgcp("lesson", "outcome", "nope", "--helped", "--db", dbp)
    assert code == 2 and "no lesson with id 'nope'" in err


def test_tiers_filter_and_stats(dbp):
    add(dbp, "verify-api", *API)
    add(dbp, "tag-releases", "--trigger", "deploying", "--action", "Tag every release in git first.",
        "--kind", "decision")
    add(dbp, "pool", "--trigger", "database connections", "--action", "Use one pool per process, sized by cores.")
    outcome(dbp, "verify-api", "--helped")
    outcome(dbp, "pool", "--failed")
    mgcp("lesson", "query", "deploying a release", "--db", dbp)
    mgcp("lesson", "query", "kubernetes operators", "--db", dbp)
    code, out, _ = mgcp("lesson", "list", "--tier", "validated", "--db", dbp, "--json")
    assert [lesson["id"] for lesson in json.loads(out)] == ["verify-api"]
    code, out, _ = mgcp("stats", "--db", dbp, "--json")
    stats = json.loads(out)
    assert stats["by_kind"] == {"decision": 1, "pattern": 2}
    assert stats["by_tier"] == {"candidate": 2, "validated": 1, "archived": 0}
    assert stats["queries"] == {"total": 2, "found": 1, "found_nothing": 1}
    assert stats["outcomes"]["helped"] == 1 and stats["outcomes"]["success_rate"] == 0.5
    assert stats["never_used"] == 2  # an outcome is not a retrieval
    code, out, _ = mgcp("stats", "--db", dbp)
    assert code == 0 and "3 active lesson(s)" in out and "1 found nothing" in out


def test_a_speculative_lesson_left_unconfirmed_becomes_a_finding_that_can_be_confirmed(dbp):
    add(dbp, "maybe", "--trigger", "slow CI runs", "--action", "Perhaps cache the pip directory between runs.",
        "--confidence", "0.3")
    conn = sqlite3.connect(dbp)
    with conn:
        conn.execute("UPDATE lessons SET created_at = '2020-01-01T00:00:00+00:00' WHERE id = 'maybe'")
    conn.close()
    code, out, err = mgcp("rem", "run", "--op", "staleness_scan", "--project", "/p", "--db", dbp, "--json")
    finding = next(f for f in json.loads(out)["report"]["findings"] if f["data"]["lesson"] == "maybe")
    assert finding["kind"] == "speculative_unconfirmed"
    assert [o["action"] for o in finding["options"]][:2] == ["confirm", "archive"] and finding["recommended"] == 2
    assert "never been retrieved" not in finding["description"]  # "neither used nor confirmed" says it
    assert mgcp("rem", "resolve", finding["id"], "--option", "1", "--db", dbp)[0] == 0
    lesson = json.loads(mgcp("lesson", "show", "maybe", "--db", dbp, "--json")[1])
    assert (lesson["confidence"], lesson["version"]) == (0.8, 2)
    assert mgcp("rem", "undo", finding["id"], "--db", dbp)[0] == 0
    lesson = json.loads(mgcp("lesson", "show", "maybe", "--db", dbp, "--json")[1])
    assert (lesson["confidence"], lesson["version"]) == (0.3, 1)


def test_recall_command_json_and_budget(dbp):
    add(dbp, "c1", "--trigger", "writing SQL migrations", "--action", "Never alter legacy tables.",
        "--kind", "constraint", "--confidence", "0.95")
    add(dbp, "verify-api", *API)
    mgcp("context", "save", "--project", "/p/x", "--notes", "Webhooks next. Which retry cap?", "--todo", "load test",
         "--db", dbp)
    code, out, err = mgcp("recall", "calling a new API", "--project", "/p/x", "--budget", "1000", "--db", dbp, "--json")
    result = json.loads(out)
    assert code == 0 and result["chars"] == len(result["text"]) <= 1000
    assert result["lessons"] == ["c1", "verify-api"]
    assert "Open question: Which retry cap?" in result["text"]
    shown = json.loads(mgcp("lesson", "show", "verify-api", "--db", dbp, "--json")[1])
    assert shown["usage_count"] == 1  # returned lessons count as used
    code, out, err = mgcp("recall", "calling a new API", "--budget", "100", "--db", dbp)
    assert code == 2 and "at least 400" in err


def test_a_streak_raised_again_after_its_finding_went_stale_and_an_undo_gets_a_new_finding(dbp):
    """The streak finding about verify-api@1 goes stale when a merge changes verify-api; undoing the
    merge brings v1 back, and the next failure raises the streak again (it once reused the stale
    finding's id and failed with a constraint error, losing the outcome)."""
    add(dbp, "verify-api", *API)
    add(dbp, "check-call-site", "--trigger", "calling an API for the first time", "--action",
        "Read its signature first, then one call site.")
    for _ in range(3):
        first = outcome(dbp, "verify-api", "--failed")
    assert first["finding"] is not None
    mgcp("rem", "run", "--op", "duplicate_detection", "--project", "/p", "--db", dbp)
    pending = json.loads(mgcp("rem", "report", "--project", "/p", "--db", dbp, "--json")[1])["pending"]
    merge = next(f for f in pending if f["kind"].startswith("duplicate_"))
    option = next(i for i, o in enumerate(merge["options"], 1) if o["action"] == "merge")
    assert mgcp("rem", "resolve", merge["id"], "--option", option, "--project", "/p", "--db", dbp)[0] == 0
    mgcp("rem", "report", "--project", "/p", "--db", dbp)  # the streak finding is found stale
    assert mgcp("rem", "undo", merge["id"], "--db", dbp)[0] == 0
    again = outcome(dbp, "verify-api", "--failed")
    assert again["streak"] == 4 and again["finding"] is not None
    assert again["finding"]["id"] != first["finding"]["id"]
