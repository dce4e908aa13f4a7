import sqlite3

import pytest

from mgcp.errors import InvalidInputError, NotFoundError


def add(store, lesson_id="verify-api", **kw):
    return store.lessons.add(lesson_id, kw.pop("trigger", "calling an unfamiliar API"),
                            kw.pop("action", "Read its signature first."), **kw)


def test_add_writes_version_one(db, run):
    versions = run(db, lambda s: add(s)) and run(db, lambda s: s.lessons.versions("verify-api"))
    assert [(v.version, v.action, v.reconstructed) for v in versions] == [(1, "Read its signature first.", False)]


def test_refine_twice_keeps_every_version_with_reasons(db, run):
    async def work(s):
        await add(s, tags=["api"])
        await s.lessons.refine("verify-api", "too vague", action="Read the signature and one example.", session_id="s1")
        await s.lessons.refine("verify-api", "no why", rationale="Guessing costs retries.", tags=["api", "docs"])
        return await s.lessons.versions("verify-api")
    v = run(db, work)
    assert [x.version for x in v] == [1, 2, 3]
    assert (v[0].action, v[0].refinement_reason, v[0].session_id) == ("Read its signature first.", "too vague", "s1")
    assert (v[1].action, v[1].refinement_reason) == ("Read the signature and one example.", "no why")
    assert (v[2].rationale, v[2].tags, v[2].refinement_reason) == ("Guessing costs retries.", ["api", "docs"], None)
    row = sqlite3.connect(db).execute("SELECT version, action, rationale FROM lessons").fetchone()
    assert row == (3, "Read the signature and one example.", "Guessing costs retries.")


def test_refining_a_lesson_an_older_mgcp_wrote_without_versions_rebuilds_its_history_first(db, run):
    """A v3 lesson written straight into `lessons` after the backfill ran (as an older mgcp did):
    its first refinement writes rows 1..2 from the legacy markers, as the backfill would, not only
    rows 3 and 4."""
    from mgcp.persistence import migrate

    migrate.open_and_migrate(db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("""INSERT INTO lessons (id, trigger, action, rationale, tags, version, created_at, last_refined)
                        VALUES ('old', 'when a test flakes', 'Quarantine it.', ?, 'testing, ci', 3,
                                '2025-01-01T00:00:00+00:00', '2025-02-01T00:00:00+00:00')""",
                     ["Flaky tests erode trust.\n\n[v2] said no cause\n\n[v3] hid real bugs"])
    conn.close()
    async def work(s):
        await s.lessons.refine("old", "no ticket", action="Quarantine it and file a ticket.")
        return await s.lessons.versions("old")
    v = run(db, work)
    assert [(x.version, x.reconstructed, x.refinement_reason) for x in v] == [
        (1, True, "said no cause"), (2, True, "hid real bugs"), (3, False, "no ticket"), (4, False, None)]
    assert v[1].rationale == "Flaky tests erode trust.\n\n[v2] said no cause" and v[0].tags == ["testing", "ci"]


def test_refine_that_changes_nothing_is_refused(db, run):
    run(db, lambda s: add(s))
    with pytest.raises(InvalidInputError, match="changes nothing"):
        run(db, lambda s: s.lessons.refine("verify-api", "same", action="Read its signature first."))


@pytest.mark.parametrize("kwargs, message", [
    ({"action": ""}, "action must not be empty"),
    ({"trigger": "x" * 1001}, "too long"),
    ({"rationale": "token ghp_" + "a" * 36}, "GitHub token"),
    ({"action": "-----BEGIN RSA PRIVATE KEY-----\nabc"}, "private key"),
])
def test_bad_lesson_text_is_refused(db, run, kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        run(db, lambda s: add(s, **kwargs))
    assert sqlite3.connect(db).execute("SELECT count(*) FROM lessons").fetchone()[0] == 0


def test_unknown_lesson_is_not_found(db, run):
    with pytest.raises(NotFoundError):
        run(db, lambda s: s.lessons.refine("nope", "why", action="x"))


def test_link_is_stored_both_ways_once(db, run):
    async def work(s):
        await add(s, "a")
        await add(s, "b", trigger="reading API docs")
        first = await s.lessons.link("a", "b", "complements")
        second = await s.lessons.link("b", "a")
        return first, second, await s.lessons.get("a"), await s.lessons.get("b")
    first, second, a, b = run(db, work)
    assert (first, second) == (True, False)
    assert [(r.target, r.type) for r in a.relationships] == [("b", "complements")]
    assert [r.target for r in b.relationships] == ["a"]


def test_query_ranks_counts_and_logs(db, run):
    async def work(s):
        await add(s, "api", trigger="calling an unfamiliar API", action="Read the signature.")
        await add(s, "git", trigger="rebasing a shared branch", action="Never force-push shared branches.")
        hits = await s.lessons.query("unfamiliar api call")
        return hits, await s.lessons.get("api"), await s.lessons.recent_queries("2000")
    hits, lesson, queries = run(db, work)
    assert [h[0].id for h in hits] == ["api"]
    assert lesson.usage_count == 1 and lesson.last_used
    assert queries == ["unfamiliar api call"]


def test_lessons_written_in_other_scripts_are_found(db, run):
    async def work(s):
        await add(s, "deploy-ru", trigger="при развёртывании сервиса", action="Проверьте журналы после развёртывания")
        await add(s, "deploy-el", trigger="κατά την ανάπτυξη", action="Ελέγξτε τα αρχεία καταγραφής")
        await add(s, "deploy-zh", trigger="部署服务时", action="部署完成后务必检查服务日志和错误信息")
        return [[h[0].id for h in await s.lessons.query(q)] for q in ("развёртывании сервиса", "Ανάπτυξη", "部署")]
    assert run(db, work) == [["deploy-ru"], ["deploy-el"], ["deploy-zh"]]


def test_query_skips_archived_lessons(db, run):
    from mgcp.models import LessonStatus

    async def work(s):
        await add(s, "api")
        await s.lessons.set_lifecycle("api", LessonStatus.archived)
        return await s.lessons.query("unfamiliar API")
    assert run(db, work) == []


def test_archived_best_matches_do_not_crowd_out_active_ones(db, run):
    """However many archived lessons match better, the best active ones come back: the index ranks
    active lessons only."""
    from mgcp.models import LessonStatus

    async def work(s):
        for n in range(30):  # the better matches: the query's words twice
            await s.lessons.add(f"old-{n:02d}", f"rotating signing keys {n}", f"Rotate signing keys weekly, case {n}.")
            await s.lessons.set_lifecycle(f"old-{n:02d}", LessonStatus.archived)
        for n in range(3):
            await s.lessons.add(f"kept-{n}", f"deploying a service {n}", f"Keep signing keys out of the image {n}.")
        return [lesson.id for lesson, _ in await s.lessons.query("signing keys", 5)], \
            [lesson.id for lesson in await s.lessons.search("signing keys", 2)]
    assert run(db, work) == (["kept-0", "kept-1", "kept-2"], ["kept-0", "kept-1"])


def test_a_query_meets_wording_variants(db, run):
    """Identifiers split and joined, compounds, synonyms: a lesson is found however it is spelled."""
    async def scenario(store):
        await store.lessons.add("tw", "styling pages", "Use TailwindCSS utility classes, not custom CSS.")
        await store.lessons.add("effects", "writing React hooks", "Return a cleanup function from every useEffect.")
        await store.lessons.add("env", "configuring a service", "Utilize environment variables for secrets.")
        await store.lessons.add("unrelated", "deploying", "Tag every release in git.")
        return {query: [lesson.id for lesson, _ in await store.query(query, 3)]
                for query in ("tailwind css classes", "use effect cleanup", "use environment variables",
                              "nextjs routing")}

    found = run(db, scenario)
    assert found["tailwind css classes"][0] == "tw"
    assert found["use effect cleanup"][0] == "effects"
    assert found["use environment variables"][0] == "env"
    assert found["nextjs routing"] == []


def test_a_tag_filter_ignores_case(db, run):
    async def work(s):
        await add(s, "upper", tags=["React"])
        await add(s, "lower", trigger="writing hooks", action="Clean up every effect.", tags=["react"])
        await add(s, "other", trigger="writing go", action="Wrap errors with %w.", tags=["go"])
        return [[lesson.id for lesson in await s.lessons.list(tag=t)] for t in ("react", "REACT")]
    assert run(db, work) == [["lower", "upper"], ["lower", "upper"]]


def test_the_search_index_holds_active_lessons_whatever_writes_the_status(db, run):
    """Triggers on lesson_lifecycle keep the index to active lessons: a status written by mgcp's
    own calls or straight into the table (as undo and import restore rows) takes a lesson out of
    the index and puts it back."""
    from mgcp.models import LessonStatus

    def indexed(lesson_id):
        return sqlite3.connect(db).execute(
            """SELECT count(*) FROM lesson_search JOIN lesson_search_docs d ON d.id = lesson_search.rowid
               WHERE d.lesson_id = ?""", [lesson_id]).fetchone()[0]

    run(db, lambda s: add(s, "api"))
    assert indexed("api") == 1
    run(db, lambda s: s.lessons.set_lifecycle("api", LessonStatus.archived))
    assert indexed("api") == 0
    run(db, lambda s: s.lessons.refine("api", "sharper", action="Read its signature and one caller first."))
    assert indexed("api") == 0  # refined while archived: still out
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM lesson_lifecycle WHERE lesson_id = 'api'")  # as an undo restores it
    assert indexed("api") == 1
    assert [lesson.action for lesson, _ in run(db, lambda s: s.lessons.query("unfamiliar API"))] == [
        "Read its signature and one caller first."]
    with conn:
        conn.execute("INSERT INTO lesson_lifecycle (lesson_id, status, changed_at) VALUES ('api', 'deleted', 'x')")
    assert indexed("api") == 0


def _validated(row) -> "Lesson":
    """A lesson built field by field through each model's own validation, as the reference."""
    from mgcp import ranking
    from mgcp.models import Lesson, Relationship
    from mgcp.persistence.columns import json_list, tags

    d = dict(row)
    return Lesson(
        id=d["id"], trigger=d["trigger"], action=d["action"], rationale=d["rationale"],
        examples=json_list(d["examples"]), version=d["version"], created_at=d["created_at"],
        last_refined=d["last_refined"], last_used=d["last_used"], usage_count=d["usage_count"],
        tags=tags(d["tags"]), parent_id=d["parent_id"],
        relationships=[Relationship(**r) for r in json_list(d["relationships"]) if isinstance(r, dict) and "target" in r],
        status=d["status"], superseded_by=d["superseded_by"], project_id=d["lc_project_id"], kind=d["kind"],
        confidence=d["confidence"], helped=d["helped"], failed=d["failed"], failure_streak=d["streak"],
        success_rate=ranking.success_rate(d["helped"], d["failed"]),
        tier=ranking.tier(d["status"], d["helped"], d["usage_count"]))


def test_listed_lessons_equal_field_by_field_validation_on_odd_rows(db, run):
    """Rows as older writers left them (NULLs, comma-separated tags, JSON that is no list, links with
    missing, extra or integer fields, no traits or lifecycle rows) read exactly as validating each
    model on its own reads them: same values, same types, same fields set."""
    import gc

    from mgcp.persistence.lessons import LESSON_SELECT

    run(db, lambda s: add(s, tags=["api", "docs"]))
    run(db, lambda s: add(s, "other-lesson", tags=["api", "docs"]))
    run(db, lambda s: s.lessons.link("verify-api", "other-lesson", "prerequisite"))
    conn = sqlite3.connect(db)
    odd = [
        ("legacy-null", "[]", "[]", "[]", None),
        ("legacy-csv-tags", "React, hooks ,, state", '{"not": "a list"}', "not json", "why"),
        ("legacy-number-tags", "[1, 2.5, \"x\", null]", "[1, \"two\", {\"three\": 3}]",
         '[{"target": "verify-api", "weight": 1, "context": ["a"]}, {"type": "related"}, "verify-api", 7,'
         ' {"target": "other-lesson", "extra": true, "bidirectional": false},'
         ' {"target": "verify-api", "type": "alternative", "weight": 0.25, "context": [], "bidirectional": true}]', ""),
        ("legacy-empty", "", "", "", None),
    ]
    for lesson_id, tags, examples, relationships, rationale in odd:
        conn.execute("INSERT INTO lessons (id, trigger, action, rationale, examples, version, created_at, last_refined,"
                     " usage_count, tags, relationships) VALUES (?, 'when odd', 'read it', ?, ?, 2, '2024-01-01',"
                     " '2024-01-02', 7, ?, ?)", [lesson_id, rationale, examples, tags, relationships])
    conn.execute("INSERT INTO lesson_lifecycle (lesson_id, status, changed_at) VALUES ('legacy-empty', 'archived', 'x')")
    conn.execute("INSERT INTO lesson_outcome_stats (lesson_id, helped, failed, streak) VALUES ('legacy-null', 2, 1, 1)")
    conn.commit()
    conn.row_factory = sqlite3.Row
    rows = conn.execute(LESSON_SELECT + " ORDER BY l.id").fetchall()
    expected = [_validated(r) for r in rows]
    listed = run(db, lambda s: s.lessons.list(status=None))
    assert [x.id for x in listed] == [x.id for x in expected] and len(listed) == 6
    for got, want in zip(listed, expected):
        assert got == want
        assert got.model_fields_set == want.model_fields_set
        assert {k: type(v) for k, v in got} == {k: type(v) for k, v in want}
        assert got.model_dump() == want.model_dump()
        assert [r.model_fields_set for r in got.relationships] == [r.model_fields_set for r in want.relationships]
    by_id = {x.id: x for x in listed}
    assert by_id["legacy-csv-tags"].tags == ["React", "hooks", "state"]
    assert by_id["legacy-number-tags"].tags == ["1", "2.5", "x", "None"]
    assert [(r.target, r.weight, type(r.weight)) for r in by_id["legacy-number-tags"].relationships] == [
        ("verify-api", 1.0, float), ("other-lesson", 0.5, float), ("verify-api", 0.25, float)]
    assert run(db, lambda s: s.lessons.get("legacy-number-tags")) == by_id["legacy-number-tags"].model_copy(
        update={"importance": run(db, lambda s: s.lessons.get("legacy-number-tags")).importance})
    assert gc.isenabled()  # the collector paused while reading is running again


def test_a_nul_is_refused_at_its_place_in_the_text_as_given():
    import pytest

    from mgcp.errors import InvalidInputError
    from mgcp.validation import check_text

    with pytest.raises(InvalidInputError) as refused:
        check_text("trigger", "   ab\x00c")
    assert str(refused.value) == "trigger holds a NUL character (\\x00) at character 6, which cannot be stored"
