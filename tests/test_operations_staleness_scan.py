from datetime import datetime, timedelta, timezone

import pytest

from mgcp.config import DEFAULTS
from mgcp.models import Lesson
from mgcp.operations import staleness_scan

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
SETTINGS = DEFAULTS["staleness_scan"]
ONE_QUERY = {**SETTINGS, "unmatched_min_queries": 1}  # a query's words alone judge triggers


def lesson(id, trigger="When rotating api keys", *, age=100, refined=None, usage=3, version=1):
    created = (NOW - timedelta(days=age)).isoformat()
    last_refined = (NOW - timedelta(days=refined if refined is not None else age)).isoformat()
    return Lesson(id=id, trigger=trigger, action="Do the careful thing.", created_at=created,
                  last_refined=last_refined, usage_count=usage, version=version)


def kinds(findings):
    return {f.data["lesson"]: f.kind for f in findings}


def test_unused_old_lesson_is_stale():
    found = staleness_scan.run([lesson("old", usage=0, age=45), lesson("young", usage=0, age=5)], [], NOW, SETTINGS)
    assert kinds(found) == {"old": "stale_unused"}


def test_stale_unused_offers_the_seed_options_archive_first():
    [finding] = staleness_scan.run([lesson("old", usage=0, age=45)], [], NOW, SETTINGS)
    assert [o.action for o in finding.options] == ["archive", "delete", "update_trigger", "keep", "skip"]
    assert finding.recommended == 1
    assert "45 days" in finding.description


def test_popular_unrefined_lesson():
    found = staleness_scan.run([lesson("pop", usage=25, age=400, refined=200),
                                lesson("fresh", usage=25, age=400, refined=10)], [], NOW, SETTINGS)
    assert kinds(found) == {"pop": "popular_unrefined"}


def test_unmatched_trigger_needs_queries():
    assert staleness_scan.run([lesson("keys", trigger="When rotating api keys")], [], NOW, SETTINGS) == []


def test_trigger_matching_no_query_is_flagged():
    found = staleness_scan.run([lesson("keys", trigger="When rotating api keys"),
                                lesson("pool", trigger="When sizing connection pools")],
                               ["connection pooling settings"], NOW, ONE_QUERY)
    assert kinds(found) == {"keys": "unmatched_trigger"}


def test_a_trigger_is_judged_only_once_the_window_holds_enough_queries():
    """Five queries leave most triggers unasked for: they say nothing yet (unmatched_min_queries)."""
    lessons = [lesson("keys", trigger="When rotating api keys", usage=3, age=60)]
    few = ["connection pooling settings"] * (SETTINGS["unmatched_min_queries"] - 1)
    assert staleness_scan.run(lessons, few, NOW, SETTINGS) == []
    [finding] = staleness_scan.run(lessons, few + ["retry budgets"], NOW, SETTINGS)
    assert finding.kind == "unmatched_trigger" and f"none of the {len(few) + 1} queries" in finding.description


def test_the_lessons_beyond_the_cap_are_counted():
    lessons = [lesson(f"old-{i}", usage=0, age=45 + i) for i in range(7)]
    found, _, beyond = staleness_scan.scan(lessons, [], NOW, {**SETTINGS, "max_findings": 3})
    assert (len(found), beyond) == (3, 4)


def test_lesson_younger_than_the_query_window_is_not_judged_by_queries():
    found = staleness_scan.run([lesson("new", age=3)], ["connection pooling"], NOW, SETTINGS)
    assert found == []


def test_unused_and_unmatched_is_one_finding_saying_both():
    [finding] = staleness_scan.run([lesson("old", usage=0, age=45)], ["connection pooling"], NOW, ONE_QUERY)
    assert finding.kind == "stale_unused"
    assert finding.data["reasons"] == ["stale_unused", "unmatched_trigger"]
    assert "never been retrieved" in finding.description and "match none of the 1 queries" in finding.description


def test_strongest_first_and_capped():
    lessons = [lesson(f"l{i}", usage=0, age=40 + i) for i in range(5)]
    found = staleness_scan.run(lessons, [], NOW, dict(SETTINGS, max_findings=2))
    assert [f.data["lesson"] for f in found] == ["l4", "l3"]


def test_deterministic():
    lessons = [lesson(f"l{i}", usage=0, age=40) for i in range(4)]
    first = staleness_scan.run(lessons, ["x"], NOW, SETTINGS)
    second = staleness_scan.run(list(reversed(lessons)), ["x"], NOW, SETTINGS)
    assert [f.model_dump() for f in first] == [f.model_dump() for f in second]


def test_new_version_changes_the_fingerprint():
    [a] = staleness_scan.run([lesson("old", usage=0, age=45)], [], NOW, SETTINGS)
    [b] = staleness_scan.run([lesson("old", usage=0, age=45, version=2)], [], NOW, SETTINGS)
    assert a.fingerprint != b.fingerprint and b.subject == {"old": 2}


def test_engine_fields_left_empty():
    [finding] = staleness_scan.run([lesson("old", usage=0, age=45)], [], NOW, SETTINGS)
    assert (finding.id, finding.project_id, finding.run_id) == ("", None, None)


def test_a_kept_finding_makes_room_for_the_next_one_beyond_the_limit():
    lessons = [lesson(f"old-{i}", usage=0, age=100 + i) for i in range(3)]
    settings = {**SETTINGS, "max_findings": 1}
    [first] = staleness_scan.run(lessons, [], NOW, settings)
    [second] = staleness_scan.run(lessons, [], NOW, settings, frozenset({first.fingerprint}))
    assert first.data["lesson"] == "old-2" and second.data["lesson"] == "old-1"


def _world(seed):
    """Random lessons (ages, refines, uses, confidences) and timed queries around NOW."""
    import random

    from mgcp.models import LessonUse

    rng = random.Random(seed)
    words = ["keys", "pools", "cache", "retry", "logs", "schema", "tokens", "queues"]
    at = lambda days: (NOW - timedelta(days=days)).isoformat()  # noqa: E731
    lessons = []
    for i in range(60):
        age = rng.uniform(0, 120)
        refined = rng.uniform(0, age) if rng.random() < 0.5 else age
        used = rng.uniform(0, refined) if rng.random() < 0.6 else None
        lessons.append(LessonUse(f"l{i:02d}", f"When handling {rng.choice(words)}", "Do it.", 1,
                                 rng.choice([0, 0, 1, 5, 25]), at(age), at(refined), used and at(used),
                                 rng.choice([0.3, 0.8]), rng.choice([0, 0, 1])))
    queries = [(f"{rng.choice(words)} setup", NOW - timedelta(days=rng.uniform(0, 40))) for _ in range(4)]
    return lessons, queries


def _scan_at(lessons, queries, when, settings):
    window = [(q, t) for q, t in queries if t >= when - timedelta(days=settings["query_window_days"])]
    first = min((t for _, t in window), default=None)
    return staleness_scan.scan(lessons, [q for q, _ in window], when, settings, frozenset(),
                               first.isoformat() if first else None)


@pytest.mark.parametrize("min_queries", [1, 3, 4])  # each world's window holds 0 to 4 queries
def test_the_findings_hold_until_the_moment_the_scan_names_and_no_longer(min_queries):
    """Within the span the scan reports, the same inputs give the same findings (the engine skips the
    scan there); a day past its end they often differ, so the spans are not merely short."""
    import random

    settings = {**SETTINGS, "unmatched_min_queries": min_queries, "max_findings": 6}
    changed_after = 0
    for seed in range(40):
        lessons, queries = _world(seed)
        findings, until, _ = _scan_at(lessons, queries, NOW, settings)
        assert until is not None and until > NOW
        shown = {f.fingerprint for f in findings}
        rng = random.Random(seed)
        span = (until - NOW).total_seconds()
        for when in [until - timedelta(microseconds=1)] + [NOW + timedelta(seconds=rng.uniform(0, span))
                                                           for _ in range(30)]:
            assert {f.fingerprint for f in _scan_at(lessons, queries, when, settings)[0]} == shown, (seed, when)
        later = {f.fingerprint for f in _scan_at(lessons, queries, until + timedelta(days=1), settings)[0]}
        changed_after += later != shown
    assert changed_after >= 8


def test_the_lessons_no_rule_can_judge_change_nothing_when_left_out():
    """Without queries, a lesson retrieved at least once but less than a popular one adds no reason
    and no moment: the scan without them gives the same findings and the same span."""
    settings = {**SETTINGS, "max_findings": 6}
    for seed in range(40):
        lessons, _ = _world(seed)
        low, high = staleness_scan.unjudged(settings, [])
        judged = [lesson for lesson in lessons if not low <= lesson.usage_count <= high]
        assert len(judged) < len(lessons)
        assert _scan_at(judged, [], NOW, settings) == _scan_at(lessons, [], NOW, settings), seed


def test_with_enough_queries_every_lesson_can_be_judged():
    assert staleness_scan.unjudged(ONE_QUERY, ["connection pooling"]) is None
    assert staleness_scan.unjudged(SETTINGS, ["connection pooling"]) == (1, SETTINGS["popular_min_retrievals"] - 1)
    assert staleness_scan.unjudged({**SETTINGS, "popular_min_retrievals": 1}, []) is None
    assert staleness_scan.unjudged(SETTINGS, []) == (1, SETTINGS["popular_min_retrievals"] - 1)


def test_the_store_leaves_out_exactly_the_lessons_of_the_counts_asked(db, run):
    """`uses(skip=...)` reads every active lesson but those whose usage count is in the range,
    whatever form the count was stored in."""
    import sqlite3

    async def add(store):
        for i in range(6):
            await store.lessons.add(f"l{i}", f"When handling case {i}", "Do the careful thing.")
        return [u.id for u in await store.lessons.uses()]

    assert run(db, add) == [f"l{i}" for i in range(6)]
    conn = sqlite3.connect(db)
    for i, usage in enumerate([0, 1, 5, 9, 10, 9.5]):
        conn.execute("UPDATE lessons SET usage_count = ? WHERE id = ?", [usage, f"l{i}"])
    conn.commit()
    conn.close()
    read = run(db, lambda s: s.lessons.uses(skip=(1, 9)))
    assert [(u.id, u.usage_count) for u in read] == [("l0", 0), ("l4", 10), ("l5", 9)]
