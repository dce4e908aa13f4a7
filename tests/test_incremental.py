"""A repeat REM cycle over knowledge that did not change skips the operations that compare lessons,
and finds again as soon as what they read changes: a lesson, a setting, an answer or an undo."""

import pytest

from mgcp import engine
from mgcp.config import parse_config

OPS = ["duplicate_detection", "community_detection"]
CONFIG = parse_config({"rem": {"duplicate_detection": {"max_findings": 1}}}, "test")
P = "/work/alpha"


async def _seed(store):
    for i, words in enumerate(["cache keys", "retry loops", "log levels"]):
        action = f"Always name the {words} after the module that owns them, never after the caller."
        await store.lessons.add(f"rule-{i}-a", f"when writing {words}", action, tags=[f"t{i}"])
        await store.lessons.add(f"rule-{i}-b", f"when adding {words}", action, tags=[f"t{i}"])


def _unchanged(report):
    return {o.operation: bool(o.summary.get("skipped")) for o in report.operations}


async def _pending(store):
    return sorted(f.fingerprint for f in await engine.pending_findings(store, P))


def test_an_unchanged_knowledge_base_skips_the_comparing_operations_and_any_change_reruns_them(db, run):
    async def scenario(store):
        await _seed(store)
        seen = {}
        first = await engine.run_cycle(store, CONFIG, P, OPS)
        seen["first"] = (_unchanged(first), len(first.findings))
        again = await engine.run_cycle(store, CONFIG, P, OPS)
        seen["again"] = (_unchanged(again), len(again.findings))
        await store.query("cache keys")  # a query counts a use: nothing they read
        seen["after query"] = _unchanged(await engine.run_cycle(store, CONFIG, P, OPS))
        shown = next(f for f in await engine.pending_findings(store, P) if f.kind.startswith("duplicate"))
        keep_both = next(i for i, o in enumerate(shown.options, 1) if o.action == "keep_both")
        await engine.resolve(store, CONFIG, shown.id, keep_both, project_path=P)
        seen["after an answer"] = _unchanged(await engine.run_cycle(store, CONFIG, P, OPS))
        await engine.undo_finding(store, shown.id)
        seen["after an undo"] = _unchanged(await engine.run_cycle(store, CONFIG, P, OPS))
        await store.lessons.refine("rule-2-b", action="Name log levels after the owning module.",
                                   reason="shorter")
        seen["after a refine"] = _unchanged(await engine.run_cycle(store, CONFIG, P, OPS))
        other = parse_config({"rem": {"duplicate_detection": {"max_findings": 1, "review_threshold": 0.7}}}, "t")
        seen["after a setting"] = _unchanged(await engine.run_cycle(store, other, P, OPS))
        return seen

    seen = run(db, scenario)
    assert seen["first"][0] == {op: False for op in OPS} and seen["first"][1] > 0
    assert seen["again"] == ({op: True for op in OPS}, 0)
    assert seen["after query"] == {op: True for op in OPS}
    assert seen["after an answer"] == {"duplicate_detection": False, "community_detection": True}
    assert seen["after an undo"]["duplicate_detection"] is False  # any undo reruns both
    assert seen["after a refine"] == {op: False for op in OPS}
    assert seen["after a setting"]["duplicate_detection"] is False
    assert seen["after a setting"]["community_detection"] is True  # its own settings did not change


def test_deleting_the_kept_state_costs_time_and_changes_no_result(db, run):
    async def scenario(store):
        await _seed(store)
        await engine.run_cycle(store, CONFIG, P, OPS)
        before = await _pending(store)
        await store.db.conn.execute("UPDATE rem_state SET last_run_result = NULL")
        await store.db.conn.commit()
        report = await engine.run_cycle(store, CONFIG, P, OPS)
        return before, _unchanged(report), len(report.findings), await _pending(store)

    before, unchanged, new, after = run(db, scenario)
    assert unchanged == {op: False for op in OPS}  # it ran again in full...
    assert new == 0 and after == before            # ...and found exactly what is already stored


def test_findings_answered_dont_ask_again_make_room_for_the_next_ones_beyond_the_cap(db, run):
    """Cap 1: keeping the shown pair shows the next pair in the next run; answering the summary
    "don't ask about these again" keeps the rest away for good."""
    async def answer(store, finding, action):
        option = next(i for i, o in enumerate(finding.options, 1) if o.action == action)
        await engine.resolve(store, CONFIG, finding.id, option, project_path=P)

    async def shown(store):
        pending = await engine.pending_findings(store, P)
        pairs = [f for f in pending if f.kind.startswith("duplicate_")]
        summaries = [f for f in pending if f.kind == "summary"]
        return pairs, summaries

    async def scenario(store):
        await _seed(store)
        seen = []
        await engine.run_cycle(store, CONFIG, P, ["duplicate_detection"])
        pairs, summaries = await shown(store)
        seen.append((len(pairs), summaries[0].data["count"]))
        await answer(store, pairs[0], "keep_both")
        await engine.run_cycle(store, CONFIG, P, ["duplicate_detection"])
        pairs2, summaries2 = await shown(store)
        seen.append((len(pairs2), summaries2[0].data["count"], pairs2[0].fingerprint != pairs[0].fingerprint))
        await answer(store, summaries2[0], "keep")
        await answer(store, pairs2[0], "keep_both")
        report = await engine.run_cycle(store, CONFIG, P, ["duplicate_detection"])
        seen.append(len(report.findings))
        return seen

    first, second, third = run(db, scenario)
    assert first == (1, 2)             # one pair shown, two more in the summary
    assert second == (1, 1, True)      # the kept pair made room for the next one
    assert third == 0                  # the rest was answered "don't ask again" through its summary


def test_knowledge_extraction_is_skipped_until_the_project_saves_again(db, run):
    async def scenario(store):
        await _seed(store)
        for n in range(1, 5):
            await store.context.register_session(P, f"s{n}")
            await store.context.save(P, notes=f"Session {n}: the flaky zorbling cache again")
        seen = [_unchanged(await engine.run_cycle(store, CONFIG, P, ["knowledge_extraction"]))]
        seen.append(_unchanged(await engine.run_cycle(store, CONFIG, P, ["knowledge_extraction"])))
        await store.context.save(P, notes="Session 4: and the zorbling cache once more")
        seen.append(_unchanged(await engine.run_cycle(store, CONFIG, P, ["knowledge_extraction"])))
        return [s["knowledge_extraction"] for s in seen]

    assert run(db, scenario) == [False, True, False]


def test_the_context_summary_is_skipped_until_the_project_saves_again(db, run):
    async def scenario(store):
        for n in range(1, 4):
            await store.context.register_session(P, f"s{n}")
            await store.context.save(P, notes=f"Session {n}: tuned the retry loop")
        seen = []
        for _ in range(2):
            report = await engine.run_cycle(store, CONFIG, P, ["context_summary"])
            seen.append((_unchanged(report)["context_summary"], report.operations[0].summary.get("snapshots")))
        await store.context.register_session(P, "s4")
        await store.context.save(P, notes="Session 4: and the cache")
        report = await engine.run_cycle(store, CONFIG, P, ["context_summary"])
        seen.append((_unchanged(report)["context_summary"], report.operations[0].summary.get("snapshots")))
        return seen, len(await store.db.fetchall("SELECT 1 FROM context_summaries"))

    seen, summaries = run(db, scenario)
    assert seen == [(False, 3), (True, None), (False, 1)] and summaries == 2


def test_the_lessons_digest_sees_superseded_copies_leave(db, run):
    """Pattern reinforcement counts superseded copies: archiving one must make its next run real."""
    from mgcp.models import LessonStatus

    async def scenario(store):
        await _seed(store)
        await store.lessons.set_lifecycle("rule-0-b", LessonStatus.superseded, superseded_by="rule-0-a")
        before = await store.lessons.content_digest()
        await store.lessons.set_lifecycle("rule-0-b", LessonStatus.archived)
        return before, await store.lessons.content_digest()

    before, after = run(db, scenario)
    assert before != after


async def _marks(store):
    return await store.lessons.content_digest(), await store.lessons.content_digest("lesson_use")


async def _refine(store):
    await store.lessons.refine("rule-0-a", action="Name cache keys after the owner.", reason="shorter")


async def _link(store):
    await store.lessons.link("rule-0-a", "rule-1-a")


async def _archive(store):
    from mgcp.models import LessonStatus

    await store.lessons.set_lifecycle("rule-1-b", LessonStatus.archived)


async def _add(store):
    await store.lessons.add("rule-new", "when naming queues", "Name queues after their consumer.")


async def _query(store):
    await store.query("cache keys")


async def _outcome(store):
    await store.outcomes.record("rule-0-a", True)


async def _rolled_back(store):
    async with store.preview():
        await _refine(store)


@pytest.mark.parametrize("write, content, use", [
    (_refine, True, True), (_link, True, True), (_archive, True, True), (_add, True, True),
    (_query, False, True), (_outcome, False, True), (_rolled_back, False, False),
])
def test_the_change_marks_move_with_every_write_they_watch(db, run, write, content, use):
    async def scenario(store):
        await _seed(store)
        before = await _marks(store)
        await write(store)
        return before, await _marks(store)

    before, after = run(db, scenario)
    assert (before[0] != after[0], before[1] != after[1]) == (content, use)


STALE = ["staleness_scan"]


def test_the_staleness_scan_is_skipped_while_its_findings_hold_and_runs_again_after(db, run, monkeypatch):
    """Unchanged use and queries skip it until the moment its findings could change (here: a young
    unused lesson turning old enough to count as unused); a query logged reruns it at once."""
    from datetime import datetime, timedelta, timezone

    from mgcp.engine import cycle

    now = datetime.now(timezone.utc)

    async def scenario(store):
        await _seed(store)
        await store.db.conn.execute("UPDATE lessons SET created_at = ?, last_refined = ? WHERE id != 'rule-2-b'",
                                    [(now - timedelta(days=90)).isoformat()] * 2)
        await store.db.conn.execute("UPDATE lessons SET created_at = ?, last_refined = ? WHERE id = 'rule-2-b'",
                                    [(now - timedelta(days=20)).isoformat()] * 2)
        await store.db.conn.commit()
        seen = []
        for _ in range(2):
            report = await engine.run_cycle(store, CONFIG, P, STALE)
            seen.append((_unchanged(report)["staleness_scan"], len(report.findings)))
        steady = report.operations[0].summary["steady"]
        await store.lessons.log_query("cache keys", None, now.isoformat())
        report = await engine.run_cycle(store, CONFIG, P, STALE)
        seen.append((_unchanged(report)["staleness_scan"], len(report.findings)))
        report = await engine.run_cycle(store, CONFIG, P, STALE)
        seen.append((_unchanged(report)["staleness_scan"], len(report.findings)))
        end = datetime.fromisoformat(report.operations[0].summary["steady"][1])
        monkeypatch.setattr(cycle, "_now", lambda: end)
        report = await engine.run_cycle(store, CONFIG, P, STALE)
        seen.append((_unchanged(report)["staleness_scan"], len(report.findings)))
        return seen, steady, end

    seen, steady, end = run(db, scenario)
    assert seen == [(False, 5), (True, 0), (False, 0), (True, 0), (False, 1)]
    assert abs(end - (now + timedelta(days=10))) < timedelta(seconds=5)  # rule-2-b turns 30 days unused
