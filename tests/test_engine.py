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
