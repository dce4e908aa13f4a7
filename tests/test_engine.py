import pytest

from mgcp import engine
from mgcp.config import OPERATIONS, parse_config
from mgcp.errors import InvalidInputError

CONFIG = parse_config({}, "defaults")
A, B = "/work/alpha", "/work/beta"


def due(status):
    return [o.operation for o in status.operations if o.due]


def test_status_and_run_agree_over_200_sessions(db, run):
    async def work(s):
        disagreements, runs = [], {op: [] for op in OPERATIONS}
        for n in range(1, 201):
            await s.context.register_session(A, f"session-{n}")
            status = await engine.status(s, CONFIG, A)
            report = await engine.run_cycle(s, CONFIG, A)
            ran = [o.operation for o in report.operations]
            if ran != due(status):
                disagreements.append((n, due(status), ran))
            for op in ran:
                runs[op].append(n)
        return disagreements, runs
    disagreements, runs = run(db, work)
    assert disagreements == []
    assert runs["staleness_scan"][:3] == [5, 10, 15]
    assert runs["community_detection"] == [5, 8, 13, 21, 34, 55, 89, 144]
    assert runs["knowledge_extraction"] == [10, 17, 28, 45, 74, 122]
    assert runs["context_summary"] == [20, 40, 60, 80, 100, 120, 140, 160, 180, 200]


def test_missed_runs_run_once_and_reschedule(db, run):
    async def work(s):
        for n in range(1, 14):
            await s.context.register_session(A, f"s{n}")
        report = await engine.run_cycle(s, CONFIG, A)
        return report, await engine.status(s, CONFIG, A)
    report, status = run(db, work)
    assert "staleness_scan" in [o.operation for o in report.operations]
    assert {o.operation: o.next_due_session for o in status.operations}["staleness_scan"] == 18


def test_projects_keep_independent_cursors(db, run):
    async def work(s):
        for n in range(1, 6):
            await s.context.register_session(A, f"a{n}")
        await s.context.register_session(B, "b1")
        await engine.run_cycle(s, CONFIG, A)
        return await engine.status(s, CONFIG, A), await engine.status(s, CONFIG, B)
    a, b = run(db, work)
    assert due(a) == [] and a.session_number == 5
    assert {o.operation: o.last_run_session for o in b.operations}["staleness_scan"] == 0
    assert b.session_number == 1


def test_named_operation_runs_even_when_not_due(db, run):
    report = run(db, lambda s: engine.run_cycle(s, CONFIG, A, ["duplicate_detection"]))
    assert [o.operation for o in report.operations] == ["duplicate_detection"]


def test_unknown_operation_is_refused(db, run):
    with pytest.raises(InvalidInputError, match="unknown operation"):
        run(db, lambda s: engine.run_cycle(s, CONFIG, A, ["nap"]))


def test_per_project_override_changes_only_that_project(db, run):
    config = parse_config({"projects": {A: {"staleness_scan": {"interval": 2}}}}, "x")

    async def work(s):
        for n in range(1, 3):
            await s.context.register_session(A, f"a{n}")
            await s.context.register_session(B, f"b{n}")
        return await engine.status(s, config, A), await engine.status(s, config, B)
    a, b = run(db, work)
    assert "staleness_scan" in due(a) and "staleness_scan" not in due(b)


def test_a_failing_operation_is_reported_and_the_others_still_run(db, run, monkeypatch):
    from mgcp.engine import cycle

    async def broken(*args):
        raise ValueError("the analysis blew up")

    monkeypatch.setitem(cycle.RUNNERS, "duplicate_detection", broken)

    async def work(s):
        await s.context.register_session(A, "s1")
        report = await engine.run_cycle(s, CONFIG, A, operations=["duplicate_detection", "staleness_scan"])
        state = await s.rem.state((await s.context.get_project(A)).project_id)
        return report, state
    report, state = run(db, work)
    by_op = {o.operation: o for o in report.operations}
    assert by_op["duplicate_detection"].error == "ValueError: the analysis blew up"
    assert by_op["staleness_scan"].error is None
    assert "staleness_scan" in state and "duplicate_detection" not in state  # its cursor did not move


def test_every_option_an_operation_offers_is_one_the_engine_can_apply():
    import ast

    from conftest import ROOT
    from mgcp.engine import ACTIONS

    offered = set()
    for path in sorted((ROOT / "mgcp" / "operations").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FindingOption":
                offered |= {k.value.value for k in node.keywords
                            if k.arg == "action" and isinstance(k.value, ast.Constant)}
    assert offered and offered <= set(ACTIONS) | {"skip"}, offered - set(ACTIONS)


def test_a_bulk_import_is_capped_diverse_summarised_and_its_bulk_answer_undone_in_one_step(db, run):
    """60 unlinked lessons over four sources; the cap is 6 per kind: the review shows 6 orphans
    drawn from every source, one summary of the rest whose bulk answer links them all as one
    action, and one undo takes every link back."""
    from mgcp.config import parse_config
    from mgcp.models import FindingStatus

    config = parse_config({"rem": {"community_detection": {"max_findings": 6}}}, "test")
    topics = {"django": "django orm queryset migration model admin view",
              "react": "react component hook state effect render props",
              "docker": "docker image layer container compose volume build",
              "pytest": "pytest fixture parametrize mock assertion marker plugin"}

    async def scenario(store):
        for tag, words in topics.items():
            vocab = words.split()
            for i in range(15):
                picked = " ".join(vocab[(i + k) % len(vocab)] for k in range(4))
                await store.lessons.add(f"{tag}-{i:02d}", f"when working on {tag} {picked}",
                                        f"Check the {picked} carefully before the {'abcdefghijklmno'[i] * 3} step.",
                                        tags=[tag])
        await engine.run(store, config, "/p", ["community_detection"])
        pending = await engine.pending_findings(store, "/p")
        orphans = [f for f in pending if f.kind == "orphan"]
        summaries = [f for f in pending if f.kind == "summary" and f.data["of_kind"] == "orphan"]
        before = {lesson.id: lesson.relationships for lesson in await store.lessons.list()}
        summary = summaries[0]
        option = next(i for i, o in enumerate(summary.options, 1) if o.action == "apply_all")
        outcome = await engine.resolve(store, config, summary.id, option, project_path="/p")
        linked = {lesson.id: lesson.relationships for lesson in await store.lessons.list()}
        await engine.undo_finding(store, summary.id)
        after = {lesson.id: lesson.relationships for lesson in await store.lessons.list()}
        status = (await store.rem.get_finding(summary.id)).status
        return orphans, summaries, outcome, before, linked, after, status

    orphans, summaries, outcome, before, linked, after, status = run(db, scenario)
    assert len(orphans) <= 6 and len(summaries) == 1
    assert {o.data["lesson"].split("-")[0] for o in orphans} == set(topics)  # every source shown
    assert summaries[0].data["count"] >= 50 and summaries[0].title.startswith(f"{summaries[0].data['count']} more")
    assert "done" in outcome.message and sum(1 for k in linked if linked[k] != before[k]) > 40
    assert after == before and status == FindingStatus.pending  # one undo took every link back


def test_a_cycle_hands_its_freed_memory_back_after_each_operation(db, run, monkeypatch):
    from mgcp.engine import cycle

    calls = []
    real = cycle._give_back
    real()  # harmless on any platform
    monkeypatch.setattr(cycle, "_give_back", lambda: calls.append(len(calls)))
    report = run(db, lambda s: engine.run_cycle(s, CONFIG, A, ["staleness_scan", "duplicate_detection"]))
    assert [r.operation for r in report.operations] == ["staleness_scan", "duplicate_detection"]
    assert calls == [0, 1]


def test_a_cycle_freezes_what_each_operation_leaves_alive_and_thaws_it_at_the_end(db, run, monkeypatch):
    """The collector walks nothing an earlier operation left alive, and after the cycle (a failed
    one too) nothing stays frozen: garbage cycles are collected as before."""
    import gc

    from mgcp.engine import cycle

    frozen = []
    real = cycle.RUNNERS["duplicate_detection"]

    async def broken(*args):
        raise RuntimeError("boom")

    async def second(*args):
        frozen.append(gc.get_freeze_count())
        return await real(*args)

    gc.unfreeze()
    monkeypatch.setitem(cycle.RUNNERS, "duplicate_detection", broken)
    report = run(db, lambda s: engine.run_cycle(s, CONFIG, A, ["staleness_scan", "duplicate_detection"]))
    assert report.operations[1].error and gc.get_freeze_count() == 0
    monkeypatch.setitem(cycle.RUNNERS, "duplicate_detection", second)
    run(db, lambda s: s.lessons.add("fresh", "when a lesson is new", "Run the scan again."))  # not skipped
    run(db, lambda s: engine.run_cycle(s, CONFIG, A, ["staleness_scan", "duplicate_detection"]))
    assert frozen[0] > 0 and gc.get_freeze_count() == 0


def test_an_operations_output_is_let_go_before_the_next_operation_runs(db, run, monkeypatch):
    """What an operation's output holds (a community run's kept state) is not kept alive through
    the operations after it: their peaks would stack on it."""
    import weakref

    from mgcp.engine import cycle

    class Held:
        pass

    seen = []

    async def first(store, project, settings, inputs):
        held = Held()
        seen.append(weakref.ref(held))

        async def write(run_id):
            return held

        return [], {}, ("first_output", write)

    async def second(store, project, settings, inputs):
        seen.append(seen[0]() is None)
        return [], {}, None

    monkeypatch.setitem(cycle.RUNNERS, "staleness_scan", first)
    monkeypatch.setitem(cycle.RUNNERS, "duplicate_detection", second)
    report = run(db, lambda s: engine.run_cycle(s, CONFIG, A, ["staleness_scan", "duplicate_detection"]))
    assert [r.error for r in report.operations] == [None, None]
    assert seen[1] is True


def test_a_summary_replaced_by_a_newer_one_goes_stale_without_its_list(db, run):
    """A new count of the rest retires the pending summary: stale, with its title, kind and count,
    but not the list of findings it stood for (the new one lists what is left now)."""
    from mgcp.config import parse_config
    from mgcp.models import FindingStatus

    config = parse_config({"rem": {"community_detection": {"max_findings": 6}}}, "test")
    topics = {"django": "django orm queryset migration model admin view",
              "docker": "docker image layer container compose volume build"}

    async def add(store, tag, i):
        vocab = topics[tag].split()
        picked = " ".join(vocab[(i + k) % len(vocab)] for k in range(4))
        await store.lessons.add(f"{tag}-{i:02d}", f"when working on {tag} {picked}",
                                f"Check the {picked} carefully before the {'abcdefghijklmnop'[i] * 3} step.",
                                tags=[tag])

    async def scenario(store):
        for tag in topics:
            for i in range(15):
                await add(store, tag, i)
        await engine.run(store, config, "/p", ["community_detection"])
        first = next(f for f in await engine.pending_findings(store, "/p") if f.kind == "summary")
        await add(store, "docker", 15)
        await engine.run(store, config, "/p", ["community_detection"])
        second = next(f for f in await engine.pending_findings(store, "/p") if f.kind == "summary")
        return first, await store.rem.get_finding(first.id), second

    first, retired, second = run(db, scenario)
    assert first.data["items"] and first.data["fingerprints"] and second.id != first.id
    assert retired.status == FindingStatus.stale and retired.title == first.title
    assert retired.data == {**first.data, "items": [], "fingerprints": [], "bulk_action": None}
    assert len(second.data["fingerprints"]) == second.data["count"] and second.data["items"]


SUMMARIES_ONLY = parse_config({"rem": {"duplicate_detection": {"max_findings": 0}}}, "test")  # every pair summed up


async def two_sets_of_copies(store):
    """Two rules each copied under other triggers: five lessons (env-*) and three (fmt-*)."""
    for fw in ("react", "vue", "angular", "svelte", "astro"):
        await store.lessons.add(f"env-{fw}", f"setting up auth in a {fw} app",
                                "Keep environment variables out of the client bundle")
    for fw in ("go", "rust", "java"):
        await store.lessons.add(f"fmt-{fw}", f"formatting {fw} code before commit",
                                "Run the formatter before every commit")


def test_a_bulk_merge_leaves_one_lesson_of_each_set_of_copies(db, run):
    """Each copy is paired with its set's first lesson, so the first merge of a set refines the
    lesson the set's other pairs keep: the batch's own change does not leave those out, and a
    lesson the batch merged away is followed to the one it was merged into."""
    config = SUMMARIES_ONLY

    async def scenario(store):
        await two_sets_of_copies(store)
        await store.lessons.refine("env-vue", "a reason", rationale="Secrets leak.")  # kept, not first by id
        await engine.run(store, config, "/p", ["duplicate_detection"])
        pending = await engine.pending_findings(store, "/p")
        summary = next(f for f in pending if f.kind == "summary")
        option = next(i for i, o in enumerate(summary.options, 1) if o.action == "apply_all")
        outcome = await engine.resolve(store, config, summary.id, option, project_path="/p")
        active = sorted(lesson.id for lesson in await store.lessons.list())
        await engine.undo_finding(store, summary.id)
        return outcome, active, sorted(lesson.id for lesson in await store.lessons.list())

    outcome, active, after = run(db, scenario)
    assert "left out" not in outcome.message, outcome.message
    assert len([i for i in active if i.startswith("env-")]) == 1 and len([i for i in active if i.startswith("fmt-")]) == 1
    assert len(after) == 8


def test_keeping_a_set_of_look_alikes_keeps_its_pairs_from_a_bulk_merge(db, run):
    """A person who answers pattern reinforcement's "Keep them all" has decided about every pair
    of those lessons: a summary of duplicate pairs raised before leaves them out of its bulk merge
    (--auto and later runs: the tests below)."""
    config = SUMMARIES_ONLY

    async def scenario(store):
        await two_sets_of_copies(store)
        await engine.run(store, config, "/p", ["duplicate_detection", "pattern_reinforcement"])
        pending = await engine.pending_findings(store, "/p")
        look_alikes = next(f for f in pending if f.kind == "reinforced_duplicates" and "env-react" in f.subject)
        keep = next(i for i, o in enumerate(look_alikes.options, 1) if o.action == "keep")
        await engine.resolve(store, config, look_alikes.id, keep, project_path="/p")
        summary = next(f for f in pending if f.kind == "summary")
        bulk = next(i for i, o in enumerate(summary.options, 1) if o.action == "apply_all")
        outcome = await engine.resolve(store, config, summary.id, bulk, project_path="/p")
        return outcome, sorted(lesson.id for lesson in await store.lessons.list())

    outcome, active = run(db, scenario)
    assert "keep them apart" in outcome.message
    assert [i for i in active if i.startswith("env-")] == [
        f"env-{fw}" for fw in sorted(("react", "vue", "angular", "svelte", "astro"))]
    assert len([i for i in active if i.startswith("fmt-")]) == 1


def test_auto_merges_a_set_of_copies_raised_as_pairs_in_one_run(db, run):
    """Each copy is raised as a pair with its set's first lesson; the first merge refines that
    lesson, which left the set's other pairs stale until the next run (a set of 16 took 16 runs)."""
    async def scenario(store):
        for fw in ("react", "vue", "angular", "svelte", "astro"):
            await store.lessons.add(f"env-{fw}", f"when setting up authentication and environment configuration "
                                               f"in a new {fw} web app",  # alike enough for --auto (0.96)
                                    "Keep environment variables out of the client bundle")
        await store.lessons.refine("env-vue", "a reason", rationale="Secrets leak.")  # kept, not first by id
        report = await engine.run(store, CONFIG, "/p", ["duplicate_detection"], auto=True)
        return report, sorted(lesson.id for lesson in await store.lessons.list())

    report, active = run(db, scenario)
    assert active == ["env-vue"], (active, [(a.title, a.result) for a in report.settled_elsewhere])
    assert len(report.applied) == 4 and not report.left_pending


def test_a_batch_that_follows_a_merged_lesson_keeps_the_most_used_and_leaves_no_chain(db, run):
    """The set's pairs were raised with its first lesson; once the batch follows a lesson merged
    away, which to keep is chosen again: the most used survives, and every other copy names it."""
    config = SUMMARIES_ONLY

    async def scenario(store):
        for fw in ("react", "vue", "angular", "svelte", "astro"):
            await store.lessons.add(f"env-{fw}", f"setting up auth in a {fw} app",
                                    "Keep environment variables out of the client bundle")
        conn = store.db.conn
        await conn.execute("UPDATE lessons SET usage_count = 6 WHERE id = 'env-astro'")
        await conn.execute("UPDATE lessons SET usage_count = 2 WHERE id = 'env-react'")
        await conn.commit()
        await engine.run(store, config, "/p", ["duplicate_detection"])
        summary = next(f for f in await engine.pending_findings(store, "/p") if f.kind == "summary")
        bulk = next(i for i, o in enumerate(summary.options, 1) if o.action == "apply_all")
        await engine.resolve(store, config, summary.id, bulk, project_path="/p")
        return {lesson.id: (lesson.status.value, lesson.superseded_by)
                for lesson in await store.lessons.list(status=None)}

    lessons = run(db, scenario)
    assert lessons.pop("env-astro") == ("active", None)
    assert set(lessons.values()) == {("superseded", "env-astro")}


def test_auto_never_merges_by_following_a_pair_that_is_not_a_copy(db, run):
    """a ~ b and b ~ c reach the auto threshold, a ~ c does not: once b is merged into a, the pair
    (b, c) must not be read as (a, c), which nobody judged (and the policy refuses)."""
    base = ("Run the database schema migrations against a staging copy and check the row counts and the foreign "
            "keys and the indexes and the triggers and the views before you deploy the service to the "
            "production servers")
    fillers = ["Pin dependency versions in the lockfile for reproducible builds",
               "Write a failing test first when fixing a bug in the parser module",
               "Use structured logging with request ids in every web handler",
               "Keep secrets out of the repository and load them from the environment",
               "Prefer small pull requests that do one thing and are easy to review"]

    async def scenario(store):
        for lesson_id, action in (("a", base + " rollback"), ("b", base), ("c", base + " monitoring")):
            await store.lessons.add(lesson_id, "deploying the web service to production", action)
        for i, action in enumerate(fillers):
            await store.lessons.add(f"f{i}", f"topic {i}", action)
        report = await engine.run(store, CONFIG, "/p", ["duplicate_detection"], auto=True)
        return report, sorted(lesson.id for lesson in await store.lessons.list())

    report, active = run(db, scenario)
    assert len(report.applied) == 1 and {"a", "c"} <= set(active), [(a.title, a.result) for a in report.applied]


def test_auto_leaves_the_pairs_of_a_set_a_person_kept_and_a_later_run_raises_none(db, run):
    async def scenario(store):
        for fw in ("react", "vue", "angular"):
            await store.lessons.add(f"env-{fw}", f"when setting up authentication and environment configuration "
                                                 f"in a new {fw} web app",  # alike enough for --auto (0.96)
                                    "Keep environment variables out of the client bundle")
        await engine.run(store, CONFIG, "/p", ["duplicate_detection", "pattern_reinforcement"])
        pending = await engine.pending_findings(store, "/p")
        assert len([f for f in pending if f.kind == "duplicate_merge"]) == 2
        look_alikes = next(f for f in pending if f.kind == "reinforced_duplicates")
        keep = next(i for i, o in enumerate(look_alikes.options, 1) if o.action == "keep")
        await engine.resolve(store, CONFIG, look_alikes.id, keep, project_path="/p")
        auto = await engine.run(store, CONFIG, "/p", ["duplicate_detection"], auto=True)
        await store.lessons.add("unrelated", "writing a changelog entry", "Say what changed for users")  # a new run
        await engine.run(store, CONFIG, "/p", ["duplicate_detection"])
        raised = [f for f in await store.rem.findings(status=None) if f.operation == "duplicate_detection"]
        return auto, sorted(lesson.id for lesson in await store.lessons.list()), raised

    auto, active, raised = run(db, scenario)
    assert not auto.applied and not auto.left_pending  # the pairs raised before the answer went stale with it
    assert [i for i in active if i.startswith("env-")] == ["env-angular", "env-react", "env-vue"]
    assert [f.status.value for f in raised] == ["stale", "stale"]  # the two raised before the answer; none since


def test_duplicate_detection_raises_no_pair_of_a_set_a_person_kept_before_it_ran(db, run):
    async def scenario(store):
        for fw in ("react", "vue", "angular"):
            await store.lessons.add(f"env-{fw}", f"setting up auth in a {fw} app",
                                    "Keep environment variables out of the client bundle")
        await engine.run(store, CONFIG, "/p", ["pattern_reinforcement"])
        [look_alikes] = [f for f in await engine.pending_findings(store, "/p") if f.kind == "reinforced_duplicates"]
        keep = next(i for i, o in enumerate(look_alikes.options, 1) if o.action == "keep")
        await engine.resolve(store, CONFIG, look_alikes.id, keep, project_path="/p")
        await engine.run(store, CONFIG, "/p", ["duplicate_detection"])
        return [f for f in await engine.pending_findings(store, "/p") if f.operation == "duplicate_detection"]

    assert run(db, scenario) == []


@pytest.mark.parametrize("ids", [("a", "b", "c"), ("x", "m", "c")])
def test_auto_never_reads_a_pair_that_is_not_a_copy_after_its_own_merges(db, run, ids):
    """Either order of the pairs: a non-copy pair whose lesson this run's merge changed is stale,
    never merged at the version the run made (the merged lesson took the other one's place)."""
    base = ("Run the database schema migrations against a staging copy and check the row counts and the foreign "
            "keys and the indexes and the triggers and the views before you deploy the service to the "
            "production servers")
    first, middle, last = ids

    async def scenario(store):
        for lesson_id, action in ((first, base + " rollback"), (middle, base), (last, base + " monitoring")):
            await store.lessons.add(lesson_id, "deploying the web service to production", action)
        for i, action in enumerate(["Pin dependency versions in the lockfile for reproducible builds",
                                    "Write a failing test first when fixing a bug in the parser module",
                                    "Use structured logging with request ids in every web handler",
                                    "Keep secrets out of the repository and load them from the environment",
                                    "Prefer small pull requests that do one thing and are easy to review"]):
            await store.lessons.add(f"f{i}", f"topic {i}", action)
        report = await engine.run(store, CONFIG, "/p", ["duplicate_detection"], auto=True)
        return report, sorted(lesson.id for lesson in await store.lessons.list())

    report, active = run(db, scenario)
    assert len(report.applied) == 1, [(a.title, a.result) for a in report.applied]  # one judged pair merged
    assert len(active) == 7 and report.settled_elsewhere and all(
        "stale" in a.result for a in report.settled_elsewhere) and not report.left_pending


def test_a_finding_left_to_a_person_that_the_runs_own_merges_made_stale_is_not_left_pending(db, run):
    """Copies merged whole; a pair of a longer variant with one of them, below the auto threshold,
    went stale with the merges: it is listed as settled, not as pending review."""
    async def scenario(store):
        for fw in ("react", "vue", "angular"):
            await store.lessons.add(f"env-{fw}", f"when setting up authentication and environment configuration "
                                                 f"in a new {fw} web app",
                                    "Keep environment variables out of the client bundle")
        await store.lessons.add("env-long", "when setting up authentication and environment configuration",
                                "Keep environment variables out of the client bundle and out of the logs")
        report = await engine.run(store, CONFIG, "/p", ["duplicate_detection"], auto=True)
        pending = [f for f in await engine.pending_findings(store, "/p") if f.operation == "duplicate_detection"]
        return report, pending

    report, pending = run(db, scenario)
    assert report.applied and len(report.left_pending) == len(pending), (report.left_pending, pending)


def test_auto_never_merges_actions_apart_in_before_and_after(db, run):
    async def scenario(store):
        for lesson_id, when in (("mig-before", "before"), ("mig-after", "after")):
            await store.lessons.add(lesson_id, "deploying the web service to production",
                                    f"Run the database migrations {when} you deploy the service")
        report = await engine.run(store, CONFIG, "/p", ["duplicate_detection"], auto=True)
        return report, sorted(lesson.id for lesson in await store.lessons.list())

    report, active = run(db, scenario)
    assert not report.applied and active == ["mig-after", "mig-before"]
