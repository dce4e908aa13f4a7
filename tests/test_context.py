import asyncio
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mgcp.errors import InvalidInputError
from mgcp.models import Todo
from mgcp.persistence.store import Store
from mgcp.persistence.migrate import open_and_migrate

P = "/work/projects/alpha"


def test_first_save_adds_everything(db, run):
    snap = run(db, lambda s: s.context.save(P, "s1", notes="start", catalogue={"a": 1}))
    assert snap.session_number == 1
    assert snap.catalogue_delta == {"added": {"a": 1}, "removed": {}, "changed": {}}


def test_save_that_changes_nothing_writes_no_row(db, run):
    run(db, lambda s: s.context.save(P, "s1", notes="same"))
    assert run(db, lambda s: s.context.save(P, "s1", notes="same")) is None
    assert sqlite3.connect(db).execute("SELECT count(*) FROM context_history").fetchone()[0] == 1


def test_todos_replace_and_decisions_append(db, run):
    async def work(s):
        await s.context.save(P, "s1", todos=[Todo(content="a"), Todo(content="b")], decisions=["use WAL"])
        await s.context.save(P, "s2", todos=[Todo(content="b", status="completed")], decisions=["pin deps"])
        return await s.context.get_project(P)
    project = run(db, work)
    assert [(t.content, t.status) for t in project.todos] == [("b", "completed")]
    assert project.recent_decisions == ["use WAL", "pin deps"]


def test_a_save_of_more_new_decisions_than_the_context_keeps_is_refused_and_writes_nothing(db, run):
    """The context keeps the last 10 and each history row the list as it was: the first of 12 new
    decisions would be in no row."""
    async def work(s):
        await s.context.save(P, "s1", decisions=["use WAL"])
        with pytest.raises(InvalidInputError, match="at most 10 new decisions"):
            await s.context.save(P, "s1", decisions=[f"decision number {i}" for i in range(12)])
        return await s.context.get_project(P), await s.context.history(P)
    project, history = run(db, work)
    assert project.recent_decisions == ["use WAL"] and len(history) == 1


def test_add_project_stores_what_ensure_project_stores_once(db, run, tmp_path):
    """`add_project` (the cycle's) stores a new project as `ensure_project` does, and leaves a known
    one as it is; `QueueReads.project` reads, before and after, the project they store."""
    other = str(tmp_path / "other.db")

    async def work(s, add):
        before = await s.queue.project(P)
        await (s.context.add_project(P) if add else s.context.ensure_project(P))
        await s.context.save(P, "s1", notes="start")
        await (s.context.add_project(P) if add else s.context.ensure_project(P))
        after = await s.queue.project(P), await s.context.get_project(P)
        return before, after

    rows = []
    for path, add in ((db, True), (other, False)):
        ref, (ref_after, project) = run(path, lambda s, add=add: work(s, add))
        assert (ref.project_id, ref.project_path, ref.session_count) == (project.project_id, project.project_path, 0)
        assert (ref_after.project_id, ref_after.session_count) == (project.project_id, project.session_count) == (ref.project_id, 1)
        rows.append(sqlite3.connect(path).execute(
            "SELECT project_id, project_name, project_path, session_count FROM project_contexts").fetchall())
    assert rows[0] == rows[1] and len(rows[0]) == 1


def test_sessions_count_distinct_ids(db, run):
    async def work(s):
        a = await s.context.register_session(P, "id-1", "startup")
        b = await s.context.register_session(P, "id-1", "resume")
        c = await s.context.register_session(P, "id-2", "clear")
        d = await s.context.save(P, None, notes="no id: current session")
        return a, b, c, d
    a, b, c, d = run(db, work)
    assert (a.session_number, a.is_new, b.session_number, b.is_new, c.session_number) == (1, True, 1, False, 2)
    assert d.session_number == 2


def test_secret_in_note_is_refused_and_nothing_written(db, run):
    with pytest.raises(InvalidInputError, match="API key"):
        run(db, lambda s: s.context.save(P, "s1", notes="use sk-proj-" + "x" * 40))
    assert sqlite3.connect(db).execute("SELECT count(*) FROM project_contexts").fetchone()[0] == 0


@pytest.mark.parametrize("todos", [None, [Todo(content="a")]])
def test_done_naming_no_todo_of_a_new_project_writes_nothing(db, run, todos):
    with pytest.raises(InvalidInputError, match="no todo 'b' to mark done"):
        run(db, lambda s: s.context.save(P, "s1", notes="n", todos=todos, done=["b"]))
    conn = sqlite3.connect(db)
    assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("project_contexts", "project_sessions", "context_history")] == [0, 0, 0]


def test_a_todo_given_twice_is_refused_and_nothing_is_written(db, run):
    with pytest.raises(InvalidInputError, match="the todo 'a' is given twice"):
        run(db, lambda s: s.context.save(P, "s1", notes="n", todos=[Todo(content="a"), Todo(content="a")]))
    assert sqlite3.connect(db).execute("SELECT count(*) FROM context_history").fetchone()[0] == 0


@pytest.mark.parametrize("column, text", [("catalogue", "not json"), ("catalogue", "[1, 2]"),
                                          ("todos", "{}"), ("active_files", "src/app.py")])
def test_a_save_over_stored_state_it_cannot_read_is_refused(db, run, column, text):
    """A legacy project whose catalogue (or todos, files) is not JSON of its type reads as empty: a
    save would write the empty value over the text, kept nowhere. It is refused, naming the
    project and the column, and changes nothing."""
    from mgcp.errors import DatabaseError

    run(db, lambda s: s.context.ensure_project(P))
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE project_contexts SET {column} = ?", [text])
    conn.commit()
    before = conn.execute("SELECT * FROM project_contexts").fetchall()
    with pytest.raises(DatabaseError, match=f"the {column} stored for {P} is not a JSON .*nothing was saved"):
        run(db, lambda s: s.context.save(P, "s1", notes="hi", catalogue={"a": 1}))
    assert conn.execute("SELECT * FROM project_contexts").fetchall() == before
    assert conn.execute("SELECT count(*) FROM context_history").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM project_sessions").fetchone()[0] == 0


def test_context_at_detects_tampered_history(db, run):
    run(db, lambda s: s.context.save(P, "s1", catalogue={"a": 1}))
    conn = sqlite3.connect(db)
    conn.execute("""UPDATE context_history SET catalogue_delta = '{"added": {"a": 2}}'""")
    conn.commit()
    from mgcp.errors import DatabaseError
    with pytest.raises(DatabaseError, match="does not verify"):
        run(db, lambda s: s.context.at(P, 1))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6)
catalogues = st.dictionaries(st.sampled_from(["arch", "deps", "ci", "api", "db", "x"]), json_values, max_size=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(catalogues, min_size=1, max_size=6))
def test_any_sequence_of_catalogue_saves_replays_exactly(tmp_path_factory, saves):
    path = tmp_path_factory.mktemp("prop") / "p.db"
    open_and_migrate(path)

    async def work():
        async with Store.open(path) as s:
            expected = {}
            for i, catalogue in enumerate(saves, 1):
                await s.context.save(P, f"session-{i}", notes=f"save {i}", catalogue=catalogue)
                expected[i] = catalogue
            return {i: (await s.context.at(P, i)).catalogue for i in expected}, expected
    got, expected = asyncio.run(work())
    assert got == expected
