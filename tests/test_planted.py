"""REM on the planted knowledge base: every expected finding, no false one, and no repeats."""

import pytest

from mgcp import engine
from mgcp.config import OPERATIONS, parse_config
from planted import (DECISION_STARTS, EXPECTED, PROJECT, RECURRING_DECISION, STALE_TODO, THEME, build,
                     lesson_subject)

CONFIG = parse_config({}, "defaults")


@pytest.fixture
def planted(db):
    build(db)
    return db


@pytest.fixture
def report(planted, run):
    return run(planted, lambda s: engine.run_cycle(s, CONFIG, PROJECT, list(OPERATIONS)))


def test_no_operation_fails(report):
    assert [o.error for o in report.operations] == [None] * len(OPERATIONS)


def test_lesson_findings_are_exactly_the_planted_ones(report):
    lesson_kinds = [f for f in report.findings if f.operation not in ("knowledge_extraction", "pattern_reinforcement")]
    assert {(f.kind, lesson_subject(f)) for f in lesson_kinds} == EXPECTED
    assert len(lesson_kinds) == len(EXPECTED)


def test_extraction_finds_the_theme_the_todo_and_the_decisions(report):
    extraction = [f for f in report.findings if f.operation == "knowledge_extraction"]
    assert [f.data["theme"] for f in extraction if f.kind == "theme"] == [THEME]
    assert len(next(f for f in extraction if f.kind == "theme").data["sessions"]) >= 3
    assert [f.data["todo"] for f in extraction if f.kind == "stale_todo"] == [STALE_TODO]
    decisions = sorted(f.data["decision"] for f in extraction if f.kind == "uncaptured_decision")
    assert [d.startswith(s) for d, s in zip(decisions, sorted(DECISION_STARTS))] == [True] * 3
    assert len(extraction) == 5


def test_reinforcement_finds_the_decision_stated_in_three_sessions(report):
    [finding] = [f for f in report.findings if f.operation == "pattern_reinforcement"]
    assert finding.kind == "reinforced_draft" and finding.data["text"].startswith(RECURRING_DECISION)
    assert finding.data["count"] == 3


def test_duplicate_similarities_fall_in_their_bands(report):
    sims = {f.kind: f.data["similarity"] for f in report.findings if f.operation == "duplicate_detection"}
    assert sims["duplicate_merge"] >= 0.90 and 0.80 <= sims["duplicate_review"] < 0.90


def test_second_run_on_unchanged_data_stores_nothing_new(planted, run, report):
    again = run(planted, lambda s: engine.run_cycle(s, CONFIG, PROJECT, list(OPERATIONS)))
    assert again.findings == []


def test_context_summary_is_stored(planted, run, report):
    summary = run(planted, lambda s: s.rem.last_summary(report.project_id))
    assert summary["to_session"] == report.session_number and "decision" in summary["narrative"].lower()


def test_community_summaries_are_written_and_stable(planted, run, report):
    import sqlite3
    rows = sqlite3.connect(planted).execute("SELECT community_id, member_count FROM community_summaries").fetchall()
    assert rows and all(count >= 1 for _, count in rows)
    run(planted, lambda s: engine.run_cycle(s, CONFIG, PROJECT, ["community_detection"]))
    assert sqlite3.connect(planted).execute("SELECT community_id, member_count FROM community_summaries").fetchall() == rows


def test_community_summaries_hold_the_communities_as_they_are(planted, run, report):
    """A community of the last run that no longer exists leaves the table (a row mgcp did not
    write stays); undoing the run brings its rows back."""
    import sqlite3

    from mgcp.models import LessonStatus

    conn = sqlite3.connect(planted)
    conn.execute("INSERT INTO community_summaries VALUES ('legacy-1', 't', 's', '[]', 0, '2024-01-01', '2024-01-01')")
    conn.commit()
    before = sorted(conn.execute("SELECT * FROM community_summaries").fetchall())
    members = max(run(planted, lambda s: s.rem.last_community_run())["communities"], key=lambda c: len(c["member_ids"]))
    run(planted, lambda s: s.lessons.set_lifecycle(members["member_ids"][0], LessonStatus.archived, "gone"))
    again = run(planted, lambda s: engine.run_cycle(s, CONFIG, PROJECT, ["community_detection"]))
    now = run(planted, lambda s: s.rem.last_community_run())["communities"]
    ids = {c["community_id"] for c in now}
    assert members["community_id"] not in ids
    assert {r[0] for r in conn.execute("SELECT community_id FROM community_summaries")} == ids | {"legacy-1"}
    run(planted, lambda s: engine.undo_run(s, again.run_id))
    assert sorted(conn.execute("SELECT * FROM community_summaries").fetchall()) == before


def test_an_earlier_run_is_undone_after_a_later_one_replaced_its_communities(planted, run, report):
    """The later run deleted the summaries of communities that changed; undoing the earlier run
    finds them gone, as it would leave them, and is no conflict."""
    from mgcp.models import LessonStatus

    members = max(run(planted, lambda s: s.rem.last_community_run())["communities"], key=lambda c: len(c["member_ids"]))
    run(planted, lambda s: s.lessons.set_lifecycle(members["member_ids"][0], LessonStatus.archived, "gone"))
    run(planted, lambda s: engine.run_cycle(s, CONFIG, PROJECT, ["community_detection"]))
    message = run(planted, lambda s: engine.undo_run(s, report.run_id))
    assert message.startswith(f"undid") and "write_community_summaries" in message
