"""Recall: the budgeted memory section (mgcp.recall over persistence.recall_data)."""

import json
import re
import shutil
import sqlite3
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgcp import recall
from mgcp.persistence import recall_data
from mgcp.persistence.migrate import open_and_migrate
from mgcp.quality import KINDS

TS = "2026-01-01T00:00:00+00:00"
WORDS = ["retry", "webhook", "signature", "migration", "cache", "pool", "timeout", "deploy", "schema",
         "index", "token", "queue", "backoff", "lock", "commit", "rollback", "fixture", "mock", "parse",
         "encode", "stream", "batch", "shard", "vacuum"]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("recall") / "template.db"
    open_and_migrate(path)
    return path


def fresh(template, tmp_path, name="kb.db"):
    path = tmp_path / name
    shutil.copy(template, path)
    return path


def add(conn, lesson_id, trigger, action, kind="pattern", confidence=0.8, usage=0, status=None):
    conn.execute("""INSERT INTO lessons (id, trigger, action, rationale, created_at, last_refined, usage_count, tags)
                    VALUES (?, ?, ?, NULL, ?, ?, ?, '[]')""", [lesson_id, trigger, action, TS, TS, usage])
    conn.execute("INSERT INTO lesson_traits (lesson_id, version, kind, confidence, created_at) VALUES (?, 1, ?, ?, ?)",
                 [lesson_id, kind, confidence, TS])
    doc = conn.execute("INSERT INTO lesson_search_docs (lesson_id) VALUES (?)", [lesson_id]).lastrowid
    conn.execute("INSERT INTO lesson_search (rowid, trigger, action, rationale, tags) VALUES (?, ?, ?, '', '[]')",
                 [doc, trigger, action])
    if status:
        conn.execute("INSERT INTO lesson_lifecycle (lesson_id, status, changed_at) VALUES (?, ?, ?)",
                     [lesson_id, status, TS])


def project(conn, path, notes=None, todos=(), decisions=(), files=()):
    conn.execute("""INSERT INTO project_contexts (project_id, project_name, project_path, todos, active_files,
                    recent_decisions, last_accessed, notes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                 ["p" + str(abs(hash(path)))[:10], path.rsplit("/", 1)[-1], path,
                  json.dumps([{"content": t, "status": "pending"} for t in todos]), json.dumps(list(files)),
                  json.dumps(list(decisions)), TS, notes])


@contextmanager
def writing(path):
    """A connection to the database at `path` whose writes inside the block are one transaction."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def build(path, budget, project_path=None, match=None, **kw):
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return recall.build(recall_data.Reader(conn), project_path, budget, match=match, **kw)
    finally:
        conn.close()


text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=60).map(" ".join)
lesson_st = st.tuples(text_st, text_st, st.sampled_from(KINDS), st.floats(0, 1), st.integers(0, 50))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lessons=st.lists(lesson_st, max_size=40), budget=st.integers(400, 12000),
       notes=st.one_of(st.none(), text_st), todos=st.lists(text_st, max_size=8), task=st.booleans())
def test_never_over_budget_and_the_strongest_constraint_is_always_in(template, tmp_path, lessons, budget,
                                                                   notes, todos, task):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        for n, (trigger, action, kind, confidence, usage) in enumerate(lessons):
            add(conn, f"l{n:03d}", trigger, action * 3, kind, round(confidence, 3), usage)
        project(conn, "/work/p", notes, todos, ["use WAL"] * 2, ["a.py"])
    result = build(path, budget, "/work/p", match='"retry" OR "cache"' if task else None)
    assert len(result.text) <= budget
    constraints = [(-round(c, 3), f"l{n:03d}") for n, (_, _, kind, c, _) in enumerate(lessons)
                   if kind == "constraint" and round(c, 3) >= 0.9]
    if constraints:
        strongest = min(constraints)
        # ties on confidence go to the most used: any of the tied ones is the strongest
        tied = {i for c, i in constraints if c == strongest[0]}
        assert result.lessons and result.lessons[0] in tied
        assert f"[{result.lessons[0]}]" in result.text


def test_sections_in_order_with_reserved_shares_and_trim_marks(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        for n in range(40):
            add(conn, f"tip-{n:02d}", f"handling {WORDS[n % 24]} {WORDS[(n * 7) % 24]} case {n}",
                f"Do the careful {WORDS[(n * 5) % 24]} thing number {n}, then check {WORDS[(n * 3) % 24]}.", usage=n)
        for n in range(10):
            add(conn, f"pref-{n}", f"writing code {n}", f"Prefer style number {n} with {WORDS[n]} names.",
                kind="preference")
        add(conn, "never-force-push", "pushing to main", "Never force-push to main; open a pull request.",
            kind="constraint", confidence=0.97)
        project(conn, "/work/p", "Working on retries. Is the backoff cap right?", ["load test"], ["use WAL"])
    result = build(path, 1500, "/work/p")
    text = result.text
    assert len(text) <= 1500
    order = [text.index(t) for t in ("### Project state", "### Constraints", "### Preferences", "### Top-ranked")]
    assert order == sorted(order)
    assert "Open question: Is the backoff cap right?" in text
    assert "more lessons trimmed" in text and "more preferences trimmed" in text
    assert result.trimmed["lessons"] > 0 and result.sections["preferences"] >= 1  # not starved
    assert "never quote it verbatim" in text


def test_a_huge_constraint_is_shortened_not_dropped(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        add(conn, "huge", "deploying", "Always " + "check everything twice " * 500, kind="constraint", confidence=1.0)
    result = build(path, 400)
    assert len(result.text) <= 400 and "[huge] When deploying: Always check" in result.text
    assert "…" in result.text


def test_near_duplicates_are_never_both_included(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        add(conn, "a", "calling an unfamiliar API", "Read its signature first, then one call site.", usage=9)
        add(conn, "b", "calling an unknown API", "Read its signature first, then one real call site.", usage=8)
        add(conn, "c", "writing a migration", "Add new tables; never alter legacy ones.", usage=7)
    result = build(path, 4000)
    assert sorted(result.lessons) == ["a", "c"]


@pytest.mark.parametrize("first, second", [
    ("Prefer Tailwind utility classes over custom CSS modules", "Prefer custom CSS modules over Tailwind utility classes"),
    ("Always commit the lockfile with the change", "Never commit the lockfile with the change"),
    ("Use WAL mode for the SQLite databases", "Don't use WAL mode for the SQLite databases"),
])
def test_two_lessons_alike_in_words_that_say_opposite_things_are_both_shown(template, tmp_path, first, second):
    """Hiding one would show an agent half of a contradiction as the whole rule."""
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        add(conn, "one", "styling components in this repository", first, usage=9)
        add(conn, "other", "styling components in this repository", second, usage=8)
    result = build(path, 4000)
    assert sorted(result.lessons) == ["one", "other"]


def billing_rules(conn, modules, confidence=0.94, usage=0):
    """Constraints written from one template: alike in words, each about its own module."""
    for m in modules:
        add(conn, f"k{m}", f"updating module m{m} of billing",
            f"Run the billing contract suite for module m{m} before merging", kind="constraint",
            confidence=confidence, usage=usage)


def test_constraints_that_read_alike_but_differ_are_all_shown(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        billing_rules(conn, [7, 8])
    result = build(path, 8000)
    assert sorted(result.lessons) == ["k7", "k8"] and result.trimmed == {}


def test_with_a_task_the_matching_constraint_comes_before_its_twin(template, tmp_path):
    from mgcp.persistence.lessons import Lessons

    path = fresh(template, tmp_path)
    with writing(path) as conn:
        billing_rules(conn, [7], usage=5)  # used more: it would come first without the task
        billing_rules(conn, [8])
    match = Lessons.match_expression("updating module m8 of billing")
    assert build(path, 8000, match=match).lessons[:2] == ["k8", "k7"]
    tight = build(path, 400, match=match)  # room for one of them only
    assert tight.lessons == ["k8"] and tight.trimmed == {"constraints": 1}


def test_an_exact_copy_of_a_constraint_is_left_out_and_said_so(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:  # written before lessons were checked for copies at write
        add(conn, "a", "pushing to main", "Never force-push to main.", kind="constraint", confidence=0.97)
        add(conn, "b", "Pushing to  main", "never force-push to main!", kind="constraint", confidence=0.95)
    result = build(path, 4000)
    assert result.lessons == ["a"] and result.trimmed == {"constraints": 1}
    assert "- … 1 more constraint trimmed, including 1 exact copy of another" in result.text


def test_constraints_use_the_budget_before_any_is_trimmed(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        billing_rules(conn, range(10, 22))
    result = build(path, 2000)
    assert result.sections == {"constraints": 12} and result.trimmed == {} and "trimmed" not in result.text


def test_short_preferences_use_the_budget_before_any_is_trimmed(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        for n in range(12):
            add(conn, f"pref-{n}", f"writing code {n}", f"Prefer style number {n} with {WORDS[n]} names.",
                kind="preference")
    result = build(path, 2000)
    assert result.sections == {"preferences": 12} and result.trimmed == {}


def test_when_constraints_are_trimmed_no_room_is_left_for_another(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        billing_rules(conn, range(100, 160))
    result = build(path, 2000)
    line = len("- [k100] When updating module m100 of billing: Run the billing contract suite for module "
               "m100 before merging (confidence 0.94)\n")
    assert 0 < result.trimmed["constraints"] <= 60 - result.sections["constraints"]  # "N+": at least N
    assert "+ more constraints trimmed" in result.text and len(result.text) > 2000 - line


def test_constraints_are_listed_strongest_first(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:  # the later ones share words with the first: an overlap penalty would reorder them
        add(conn, "c90", "writing release notes", "Name every breaking change first.", kind="constraint",
            confidence=0.90)
        add(conn, "c97", "changing the billing schema", "Write a migration; never alter legacy tables.",
            kind="constraint", confidence=0.97)
        add(conn, "c94", "changing the billing schema in tests", "Write a migration for the test tables too.",
            kind="constraint", confidence=0.94)
        add(conn, "c94-used", "changing the billing schema of reports", "Write a migration for reports too.",
            kind="constraint", confidence=0.94, usage=3)
    result = build(path, 4000)
    assert result.lessons == ["c97", "c94-used", "c94", "c90"]
    confidences = re.findall(r"\(confidence (0\.\d\d)\)", result.text)
    assert confidences == sorted(confidences, reverse=True)


def test_without_a_task_lessons_are_titled_and_ordered_by_their_ranking(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        add(conn, "twice", "tagging a release", "Tag every release before deploying it.", confidence=0.5, usage=2)
        add(conn, "once", "writing a migration", "Add new tables; never alter legacy ones.", confidence=0.9, usage=1)
        add(conn, "never", "calling an unfamiliar API", "Read its signature first.", confidence=1.0, usage=0)
    result = build(path, 4000)
    assert "### Top-ranked lessons" in result.text and "Most used" not in result.text
    rows = recall.rank(recall_data.Reader(sqlite3.connect(path)).most_used(10))
    assert result.lessons == [r["id"] for r in rows] == ["never", "once", "twice"]


def test_archived_lessons_and_secrets_stay_out(template, tmp_path):
    path = fresh(template, tmp_path)
    with writing(path) as conn:
        add(conn, "gone", "deploying", "An archived lesson about deploys.", usage=50, status="archived")
        add(conn, "kept", "deploying", "Tag every release before deploying it.", usage=5)
        # written by an older mgcp that did not check for secrets
        project(conn, "/work/p", notes="Staging key is AKIAABCDEFGHIJKLMNOP for now.")
    result = build(path, 4000, "/work/p")
    assert "gone" not in result.lessons and "kept" in result.lessons
    assert "AKIAABCDEFGHIJKLMNOP" not in result.text and "[redacted]" in result.text


def test_a_budget_under_the_minimum_is_refused(template, tmp_path):
    with pytest.raises(ValueError, match="at least 400"):
        build(fresh(template, tmp_path), 399)


@pytest.mark.parametrize("secret", [
    "-----BEGIN RSA PRIVATE KEY-----", "AKIAABCDEFGHIJKLMNOP", "sk-ant-abcdefghijklmnopqrstuvwxyz",
    "ghp_" + "a" * 36, "xoxb-1234567890-abcdef", "AIza" + "b" * 35, "sk_live_" + "c" * 24,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop", "password = hunter2hunter2",
    "password=hunter2", "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "redis://:Prod-Redis-Pass-2024@cache.internal:6379/0", "postgres://admin:S3cretPass@db.internal/app",
])
def test_every_kind_of_credential_is_redacted(secret):
    from mgcp.validation import find_secret

    assert find_secret(secret) and not find_secret(recall.redact(f"before {secret} after"))


@pytest.mark.parametrize("text", [
    "Use postgres://user:password@localhost/app for local development", "postgres://$USER:$PASS@db/app",
    "Send a Bearer token in the Authorization header", "git@github.com:org/repo.git",
    "http://localhost:8080/api/v1", "Never default to password=None", "A secret: keep it short",
])
def test_placeholders_and_prose_are_not_credentials(text):
    from mgcp.validation import find_secret

    assert find_secret(text) is None and recall.redact(text) == text


def test_a_lookup_on_a_full_disk_is_shown_and_not_counted(db, run, capsys):
    """Use counts and the query log are counters, not content: when the disk is full a lookup still
    answers (lesson query, recall), says on stderr that it was not counted, and changes nothing."""
    import sqlite3

    from mgcp.persistence import recall_data

    async def seed(store):
        await store.lessons.add("pool", "sizing a connection pool", "Start from cores x 2 and measure under load")
    run(db, seed)

    def fill(conn):  # the file may grow no further, and not even the smallest row fits
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
        for size in (500, 50, 1):
            with pytest.raises(sqlite3.OperationalError, match="full"):
                for i in range(100_000):
                    conn.execute("INSERT INTO query_log (query, result_ids, created_at) VALUES (?, '[]', 'x')",
                                 ["x" * size])

    async def query(store):
        conn = store.db.conn
        pages = await (await conn.execute("PRAGMA page_count")).fetchone()
        await conn.execute(f"PRAGMA max_page_count = {pages[0]}")
        for size in (500, 50, 1):  # until not even the smallest row fits
            with pytest.raises(sqlite3.OperationalError, match="full"):
                for i in range(100_000):
                    await conn.execute("INSERT INTO query_log (query, result_ids, created_at) VALUES (?, '[]', 'x')",
                                       ["x" * size])
        before = await store.db.fetchone("SELECT usage_count FROM lessons WHERE id = 'pool'")
        found = await store.lessons.query("connection pool")
        after = await store.db.fetchone("SELECT usage_count FROM lessons WHERE id = 'pool'")
        return [lesson.id for lesson, _ in found], before[0], after[0]

    assert run(db, query) == (["pool"], 0, 0)
    assert capsys.readouterr().err == recall_data.NOT_COUNTED + "\n"
    conn = sqlite3.connect(db, isolation_level=None)
    fill(conn)
    reader = recall_data.Reader(conn)
    reader.mark_used(["pool"], "2026-01-01T00:00:00+00:00", query="connection pool")
    assert capsys.readouterr().err == recall_data.NOT_COUNTED + "\n"
    assert conn.execute("SELECT usage_count FROM lessons WHERE id = 'pool'").fetchone()[0] == 0
    conn.close()


def test_a_task_recall_counts_as_used_only_the_lessons_relevant_to_the_task(db, run):
    """Constraints, preferences and error solutions are shown whatever the task: counting them
    made them ever more used (validated, kept in merges, never unused) for tasks they had no part in."""
    from mgcp.config import parse_config
    from mgcp.engine.recall import recall as task_recall

    async def work(store):
        await store.lessons.add("pnpm-only", "installing packages in shop-web",
                                "Always use pnpm; never run npm install or yarn.", kind="constraint", confidence=0.95)
        await store.lessons.add("retry-backoff", "retrying a webhook delivery",
                                "Retry with exponential backoff and an idempotency key.")
        result = await task_recall(store, parse_config({}, "defaults"), None, "add retries to the webhook sender")
        uses = {r[0]: r[1] for r in await store.db.fetchall("SELECT id, usage_count FROM lessons")}
        return result, uses

    result, uses = run(db, work)
    assert {"pnpm-only", "retry-backoff"} <= set(result.lessons)  # both shown
    assert uses == {"pnpm-only": 0, "retry-backoff": 1}


def test_a_lesson_sharing_only_a_word_every_task_uses_is_not_relevant(db, run):
    """The cut is relative to the best match: when "add" was the best match, a React lesson was
    listed as relevant to a webhook task."""
    from mgcp.config import parse_config
    from mgcp.engine.recall import recall as task_recall

    async def work(store):
        await store.lessons.add("react-fc", "adding a React component in shop-web",
                                "Write function components with hooks; do not add class components.")
        return await task_recall(store, parse_config({}, "defaults"), None, "add retries to the payment webhook sender")

    assert "react-fc" not in run(db, work).lessons
