"""The REM cycle's read of a project's history: the same snapshots as `Contexts.history_since`,
as light rows without the catalogue, old and odd stored shapes included."""

P = "/projects/rem-inputs"


def test_the_light_rows_hold_what_the_snapshots_hold(db, run):
    async def scenario(store):
        from mgcp.models import Todo

        await store.context.save(P, "s1", notes="first", todos=[Todo(content="ship it", priority="high")],
                                 decisions=["use sqlite"], active_files=["a.py"], catalogue={"db": "sqlite"})
        await store.context.save(P, "s1", notes="second", decisions=["keep the hook quiet"])
        await store.context.save(P, "s2", todos=[Todo(content="ship it", status="completed")],
                                 active_files=["b.py"])
        project = await store.context.get_project(P)
        # an old row: a todo as a plain string, one under "text" with an integer priority
        await store.db.conn.execute(
            """INSERT INTO context_history (project_id, session_number, session_id, timestamp, notes, active_files,
                                            todos, recent_decisions)
               VALUES (?, 3, 's3', '2025-01-01T00:00:00+00:00', NULL, '[]', ?, '[]')""",
            [project.project_id, '["old todo", {"text": "older", "priority": 2}]'])
        await store.db.conn.commit()
        full = await store.context.history_since(project.project_id, 0)
        light = await store.rem_inputs.history_since(project.project_id, 0)
        return full, light

    full, light = run(db, scenario)
    assert len(light) == len(full) == 4
    for snapshot, row in zip(full, light):
        expected = snapshot.model_dump(exclude={"catalogue_hash", "catalogue_delta"})
        got = row._asdict()
        got["todos"] = [todo.model_dump() for todo in got["todos"]]
        assert got == expected
    assert [t.content for t in light[-1].todos] == ["old todo", "older"]
