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


def test_the_lesson_rows_hold_what_the_lessons_hold(db, run):
    """`Lessons.rows` gives each field of `LessonRow` as `Lessons.list` gives it, odd legacy columns
    included (comma-separated tags, links that are not objects or lack a target)."""
    from mgcp.models import LessonRow, LessonStatus

    async def scenario(store):
        await store.lessons.add("plain", "when caching", "Name cache keys after the owner.", tags=["cache"])
        await store.lessons.add("linked", "when retrying", "Retry with backoff.", tags=["net", "retry"])
        await store.lessons.link("linked", "plain", "depends_on")
        await store.lessons.add("gone", "when logging", "Log at info.")
        await store.lessons.set_lifecycle("gone", LessonStatus.archived, "old")
        await store.db.conn.execute(
            """INSERT INTO lessons (id, trigger, action, version, created_at, last_refined, usage_count, tags,
                                    relationships)
               VALUES ('legacy', 'when importing', 'Import lazily.', 3, '2024-01-01T00:00:00', '2024-02-01T00:00:00',
                       7, 'python, imports ,', ?)""",
            ['[{"target": "plain"}, "not an object", {"type": "related"}, {"target": "linked", "type": "x"}]'])
        await store.db.conn.commit()
        return ({status: (await store.lessons.list(status=status), await store.lessons.rows(status))
                 for status in ("active", "archived")})

    for status, (lessons, rows) in run(db, scenario).items():
        assert [r.id for r in rows] == [lesson.id for lesson in lessons] and rows
        for lesson, row in zip(lessons, rows):
            for field in LessonRow._fields:
                if field == "relationships":
                    assert [(r.target, r.type) for r in row.relationships] == \
                        [(r.target, r.type) for r in lesson.relationships]
                else:
                    assert getattr(row, field) == getattr(lesson, field), (lesson.id, field)
