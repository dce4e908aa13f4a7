"""What pattern reinforcement observed in the context history is kept between cycles
(`pattern_observations`): a repeat cycle reads only the history added since the last one, and finds
and writes exactly what the same cycle finds and writes with nothing kept - after new history in
several projects, changed lessons, an undone run, or a history changed below what was read (then
the history is read whole again). A dry run keeps nothing."""

import json
import sqlite3

import planted
from clihelp import process_cli
from mgcp import engine
from mgcp.config import parse_config
from mgcp.engine import actions, cycle
from mgcp.models import LessonStatus
from mgcp.operations import pattern_reinforcement

SETTINGS = {"enabled": True, "min_count": 2, "max_findings": 500}
CONFIG = parse_config({"rem": {"pattern_reinforcement": SETTINGS}}, "test")
OPS = ["pattern_reinforcement"]
MAIN, OTHER, THIRD = "/work/app", "/work/lib", "/work/docs"
KEPT = ("pattern_observations", "pattern_observation_marks", "kept_indexes")
NOTES = ["Keep the connection pool warm overnight.", "Run the migrations before the tests start.",
         "Pin the node version in the CI image.", "Review the flaky login test on Fridays."]
DECISIONS = ["Use pnpm workspaces", "Pin node to 20", "Keep the pool at twenty connections", "Ship on Tuesdays"]


async def _history(store, projects, start, count):
    """`count` sessions in each project: notes and decisions that recur, carried over, and new."""
    for i in range(start, start + count):
        for n, project in enumerate(projects):
            await store.context.register_session(project, f"{project}-{i}")
            notes = f"Day {i}. {NOTES[(i + n) % len(NOTES)]} {NOTES[(i * 3) % len(NOTES)]}"
            decisions = [DECISIONS[(i + n) % len(DECISIONS)], DECISIONS[(i // 2) % len(DECISIONS)]]
            await store.context.save(project, notes=notes, decisions=decisions)
            if i % 3 == 0:  # saved again in the same session: notes carried, a decision added
                await store.context.save(project, decisions=decisions + [f"Decision of day {i % 4}"])


async def _lessons(store):
    await store.lessons.add("pool", "when sizing the connection pool", "Keep the pool at twenty connections")
    await store.lessons.add("copy-a", "when the copy test runs", "Always run the copy test twice.")
    await store.lessons.add("copy-b", "when the copy test runs", "Always run the copy test twice.")


async def _change_lessons(store):
    await store.lessons.add("pnpm", "when adding a package", "Use pnpm workspaces for every package")
    await store.lessons.set_lifecycle("pool", LessonStatus.archived, "not needed")
    await store.lessons.add("copy-c", "when the copy test runs", "Always run the copy test twice!")


def _count(path, table) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


async def _cycle(store) -> dict:
    """The run's analysis (every finding it makes, its summary) and the patterns stored after it,
    without the moments they were written."""
    project = await store.queue.project(MAIN)
    plan = cycle._plan(CONFIG, project, await store.rem.state(project.project_id), OPS)
    analysed = []
    async for analysis in cycle._analyse(store, CONFIG, project, plan, None):
        assert analysis.error is None
        summary = {k: v for k, v in analysis.summary.items() if k not in ("snapshots", "decision_observations",
                                                                            "history_read")}
        analysed.append((summary, [(f.fingerprint, f.kind, f.title, f.description, json.dumps(f.data, sort_keys=True))
                                   for f in analysis.findings]))
    report = await engine.run_cycle(store, CONFIG, MAIN, OPS)
    history_read = report.operations[0].summary.get("history_read")
    rows = await store.db.fetchall(
        """SELECT cluster_key, category, text, lesson_id, canonical, reinforcement_count, derived_from
           FROM reinforced_patterns ORDER BY rowid""")
    return {"analysed": analysed, "patterns": [tuple(r) for r in rows], "run": report.run_id,
            "read": history_read}


def _same(run, path, tmp_path, name) -> dict:
    """The cycle on the database and on a copy with nothing kept: the same analysis and patterns."""
    other = planted.copy_without(path, tmp_path / f"{name}.db", *KEPT)
    kept, full = run(path, _cycle), run(other, _cycle)
    assert full["read"] == "whole"
    assert {k: v for k, v in kept.items() if k != "read"} == {k: v for k, v in full.items() if k != "read"}
    assert kept["analysed"][0][1] and kept["patterns"]
    # and both keep the same observations
    assert _kept_rows(path) == _kept_rows(other)
    return kept


def _kept_rows(path):
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("SELECT * FROM pattern_observations ORDER BY key").fetchall(),
                conn.execute("SELECT * FROM pattern_observation_marks ORDER BY source").fetchall())
    finally:
        conn.close()


def test_repeat_cycles_read_only_new_history_and_find_what_a_cycle_with_nothing_kept_finds(db, run, tmp_path):
    async def seed(store):
        await _lessons(store)
        await _history(store, [MAIN, OTHER], 1, 6)

    run(db, seed)
    first = run(db, _cycle)
    assert first["read"] == "whole" and _count(db, "pattern_observations") > 0

    run(db, lambda store: _history(store, [MAIN, OTHER, THIRD], 7, 4))  # more history, a new project
    assert _same(run, db, tmp_path, "a")["read"] == "since the last run"

    async def changed(store):
        await _change_lessons(store)
        await _history(store, [OTHER], 11, 3)
    run(db, changed)
    assert _same(run, db, tmp_path, "b")["read"] == "since the last run"

    # what was kept after these cycles is what one pass over the whole history observes
    def whole(path):
        conn = sqlite3.connect(path)
        rows = conn.execute("""SELECT project_id, session_number, timestamp, coalesce(notes, ''), recent_decisions
                               FROM context_history ORDER BY project_id, id""").fetchall()
        decided = [dict(zip(("project_id", "session_number", "decision", "observed_at"), r)) for r in conn.execute(
            "SELECT project_id, session_number, decision, observed_at FROM decision_observations")]
        conn.close()
        return pattern_reinforcement.Observations.of([(*r[:4], json.loads(r[4] or "[]")) for r in rows], decided)

    observed = whole(db).seen()
    kept, _ = _kept_rows(db)
    assert {key: (said_at, said, size, sources.split("\n"), firsts.split("\n"))
            for key, said_at, said, size, sources, firsts in kept} == {
        key: (said_at, said, len(sources), sources, firsts)
        for key, (said_at, said, sources, firsts) in observed.items()}


def test_undoing_a_pattern_run_and_a_history_changed_below_the_marks(db, run, tmp_path):
    async def seed(store):
        await _lessons(store)
        await _history(store, [MAIN, OTHER], 1, 5)

    run(db, seed)
    run(db, _cycle)
    run(db, lambda store: _history(store, [MAIN], 6, 4))
    second = run(db, _cycle)

    async def undo(store):
        return await actions.undo_run(store, second["run"])
    run(db, undo)
    assert _same(run, db, tmp_path, "undone")["read"] == "since the last run"

    # history removed below what was read (not something mgcp does; an older tool or a hand edit)
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM context_history WHERE id IN (SELECT id FROM context_history ORDER BY id LIMIT 3)")
    conn.commit()
    conn.close()
    assert _same(run, db, tmp_path, "pruned")["read"] == "whole"

    # observations made by other rules are made again
    conn = sqlite3.connect(db)
    conn.execute("UPDATE pattern_observation_marks SET notes = 'older rules' WHERE source = 'rules'")
    conn.execute("UPDATE pattern_observations SET said = 'stale'")
    conn.commit()
    conn.close()
    run(db, lambda store: _history(store, [OTHER], 10, 2))
    assert _same(run, db, tmp_path, "rules")["read"] == "whole"


def test_a_dry_run_keeps_nothing_and_a_run_from_the_cli_keeps_what_it_read(db, run, tmp_path):
    async def seed(store):
        await _lessons(store)
        await _history(store, [MAIN, OTHER], 1, 5)

    run(db, seed)
    config = tmp_path / "rem-config.yaml"
    config.write_text("rem:\n  pattern_reinforcement:\n    enabled: true\n    min_count: 2\n")
    mgcp = process_cli(db, config)

    done = mgcp("rem", "run", "--project", MAIN, "--op", "pattern_reinforcement", "--auto", "--dry-run",
                "--json")
    assert done.returncode == 0, done.stderr
    assert _count(db, "pattern_observations") == 0 and _count(db, "reinforced_patterns") == 0
    assert _count(db, "kept_indexes") == 0
    done = mgcp("rem", "run", "--project", MAIN, "--op", "pattern_reinforcement", "--json")
    assert done.returncode == 0, done.stderr
    assert _count(db, "pattern_observations") > 0 and _count(db, "reinforced_patterns") > 0
    marks = dict((source, last) for source, last, *_ in _kept_rows(db)[1])
    assert set(marks) >= {"rules", "decisions"} and len(marks) == 4  # and one per project
