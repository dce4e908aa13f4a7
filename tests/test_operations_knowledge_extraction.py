from mgcp.config import DEFAULTS
from mgcp.models import ContextSnapshot, Lesson, Todo
from mgcp.operations import knowledge_extraction

SETTINGS = DEFAULTS["knowledge_extraction"]
TS = "2026-01-01T00:00:00+00:00"

NOTES = {
    1: "Fixed the login page. Worked on connection pooling for the worker database.",
    2: "Session today: tuned connection pooling limits after timeouts in staging.",
    3: "Added retries. The connection pooling again: pool size too small under load.",
    4: "Cleaned up the release notes and fixed tests.",
    5: "Connection pooling now shares one pool per process. Fixed flaky tests again.",
}


def snap(id, session, notes=None, todos=(), decisions=()):
    return ContextSnapshot(id=id, project_id="p", session_number=session, timestamp=TS, notes=notes,
                           todos=list(todos), recent_decisions=list(decisions))


def history():
    return [snap(i, s, n) for i, (s, n) in enumerate(NOTES.items(), 1)]


def lesson(id, trigger, action, tags=()):
    return Lesson(id=id, trigger=trigger, action=action, tags=list(tags), created_at=TS, last_refined=TS)


def kinds(findings, kind):
    return [f for f in findings if f.kind == kind]


def test_theme_is_the_phrase_not_its_words():
    themes = kinds(knowledge_extraction.run(history(), [], SETTINGS), "theme")
    assert [t.data["theme"] for t in themes] == ["connection pooling"]
    assert themes[0].data["sessions"] == [1, 2, 3, 5]


def test_generic_words_are_not_themes():
    notes = ["Fixed tests today, good work.", "Session: fixed tests and added docs work.", "Work: fixed tests."]
    found = knowledge_extraction.run([snap(i, i, n) for i, n in enumerate(notes, 1)], [], SETTINGS)
    assert kinds(found, "theme") == []


def test_repeated_mentions_in_one_session_count_once():
    found = knowledge_extraction.run([snap(i, 7, "connection pooling") for i in range(1, 5)], [], SETTINGS)
    assert kinds(found, "theme") == []


def test_covered_theme_is_not_reported():
    covering = lesson("pool-size", "When sizing database connection pools", "Size the pool to the workers.")
    assert kinds(knowledge_extraction.run(history(), [covering], SETTINGS), "theme") == []


def test_theme_finding_offers_a_draft():
    [theme] = kinds(knowledge_extraction.run(history(), [], SETTINGS), "theme")
    assert [o.action for o in theme.options] == ["draft_lesson", "project_specific", "skip"]
    assert theme.recommended == 1
    assert set(theme.data["draft"]) == {"id", "trigger", "action", "rationale", "tags"}
    assert theme.data["draft"]["id"] == "connection-pooling"
    assert '"connection pooling" in 4 of them' in theme.description
    assert [e["session"] for e in theme.data["excerpts"]] == [1, 2, 3]


def test_a_draft_says_a_note_written_again_once():
    notes = ["Webhook retries flaky.", "webhook retries flaky", "Webhook retries flaky. Raised the timeout."]
    [theme] = kinds(knowledge_extraction.run([snap(i, i, n) for i, n in enumerate(notes, 1)], [], SETTINGS), "theme")
    assert theme.data["draft"]["action"] == "Webhook retries flaky."
    assert len(theme.data["excerpts"]) == 3  # the finding still shows where it came up


def test_stale_todo_pending_across_sessions():
    todo = Todo(content="Write the migration guide")
    snaps = [snap(i, i, todos=[todo]) for i in range(1, 6)]
    [finding] = knowledge_extraction.run(snaps, [], SETTINGS)
    assert finding.kind == "stale_todo" and finding.data["sessions"] == [1, 2, 3, 4, 5]
    assert [o.action for o in finding.options] == ["close_todo", "drop_todo", "keep", "skip"]


def test_todo_done_in_latest_snapshot_is_not_stale():
    snaps = [snap(i, i, todos=[Todo(content="Write the migration guide")]) for i in range(1, 6)]
    snaps.append(snap(6, 6, todos=[Todo(content="write the migration guide.", status="completed")]))
    assert knowledge_extraction.run(snaps, [], SETTINGS) == []


def test_todo_pending_in_too_few_sessions_is_not_stale():
    snaps = [snap(i, 1 + i // 3, todos=[Todo(content="Write the guide")]) for i in range(1, 10)]
    assert knowledge_extraction.run(snaps, [], SETTINGS) == []  # sessions 1..4 only


def test_uncaptured_decision():
    snaps = [snap(1, 1, decisions=["Use WAL journal mode for the sqlite store"]),
             snap(2, 2, decisions=["Use WAL journal mode for the sqlite store"])]
    [finding] = knowledge_extraction.run(snaps, [], SETTINGS)
    assert finding.kind == "uncaptured_decision" and finding.data["sessions"] == [1, 2]
    assert finding.data["draft"]["action"] == "Use WAL journal mode for the sqlite store"


def test_a_drafted_decisions_tags_are_words_not_stems():
    snaps = [snap(1, 1, decisions=["Beta uses pnpm workspaces for integrations"])]
    [finding] = knowledge_extraction.run(snaps, [], SETTINGS)
    tags = finding.data["draft"]["tags"]
    assert "workspaces" in tags and "integrations" in tags and "workspac" not in tags, tags


def test_captured_decision_is_not_reported():
    captured = lesson("sqlite-wal", "When opening the sqlite store", "Turn on WAL journal mode.")
    snaps = [snap(1, 1, decisions=["Use WAL journal mode for the sqlite store"])]
    assert knowledge_extraction.run(snaps, [captured], SETTINGS) == []


def test_fingerprint_is_stable_across_runs_and_input_order():
    a = knowledge_extraction.run(history(), [], SETTINGS)
    b = knowledge_extraction.run(list(reversed(history())), [], SETTINGS)
    assert [f.model_dump() for f in a] == [f.model_dump() for f in b]


def test_no_history_no_findings():
    assert knowledge_extraction.run([], [], SETTINGS) == []


def test_lesson_index_holds_each_lessons_content_tokens():
    """The per-token reading of the index gives exactly `text.content_tokens` of each lesson's
    trigger and action and of its tags."""
    from collections import defaultdict

    from mgcp import text

    texts = ["When the API's rate-limit (429) hits, retry_after headers", "Running runs ran: 2024 x y",
             "snake_case_names and kebab-case-names", "", "the a an of", "Réseau naïve café 42nd"]
    lessons = [lesson(f"l{i}", a, b, tags) for i, (a, b, tags) in enumerate(
        [(a, b, tags) for a in texts for b in texts[::-1] for tags in ([], ["Rate-Limits", "x y"])])]
    expected = defaultdict(set)
    for number, item in enumerate(lessons):
        for word in text.content_tokens(item.trigger + " " + item.action) + text.content_tokens(" ".join(item.tags)):
            expected[word].add(number)
    assert knowledge_extraction._LessonIndex(lessons).postings == dict(expected)


def test_excerpts_of_a_phrase_do_not_depend_on_the_others_asked_for():
    notes = history() + [snap(10 + i, s, n) for i, (s, n) in enumerate(NOTES.items())]
    keys = [t["key"] for t in knowledge_extraction.recurring_phrases(notes, 1)]
    assert len(keys) >= 10
    together = knowledge_extraction.excerpts(notes, keys)
    assert all(knowledge_extraction.excerpts(notes, [k]) == {k: together[k]} for k in keys)
    assert together[("connect", "pool")] and len({s for s, _ in together[("connect", "pool")]}) == len(together[("connect", "pool")])


def test_a_cycle_mining_two_spans_of_the_history_finds_what_each_finds_alone():
    """Extraction and the summary mine overlapping spans of the history in one cycle, with one
    cache: what either mined is not taken for the other's span."""
    from mgcp.operations import context_summary
    from mgcp.operations.shared import CycleCache

    whole = history() + [snap(6, 6, NOTES[5]), snap(7, 7, "Connection pooling limits tuned for staging.")]
    settings = {**SETTINGS, "theme_min_sessions": 2}
    cache = CycleCache()
    assert knowledge_extraction.run(whole, [], settings, cache) == knowledge_extraction.run(whole, [], settings)
    later = whole[3:]
    assert context_summary.run(later, {}, cache) == context_summary.run(later, {})
    assert context_summary.run(later, {}, cache).data["themes"]


def test_a_sentence_mined_for_one_span_is_not_mined_again_for_the_other(monkeypatch):
    """The summary's span lies inside extraction's: with the cycle's cache its notes' sentences
    are all read already, and it finds what it finds alone."""
    from mgcp import text
    from mgcp.operations import context_summary
    from mgcp.operations.shared import CycleCache

    whole = history() + [snap(6, 6, NOTES[5]), snap(7, 7, "Connection pooling limits tuned for staging.")]
    later = whole[3:]
    alone = context_summary.run(later, {})
    read = []
    monkeypatch.setattr(text, "phrases", lambda sentence, _phrases=text.phrases: read.append(sentence) or _phrases(sentence))
    cache = CycleCache()
    knowledge_extraction.run(whole, [], {**SETTINGS, "theme_min_sessions": 2}, cache)
    assert read
    read.clear()
    assert context_summary.run(later, {}, cache) == alone
    assert read == []


def test_lesson_index_covers_and_containment_are_their_definitions():
    """`covers` (one lesson holds every word) and `best_containment` (the largest share of the
    words one lesson holds), searched in the index's sorted postings, equal a count over every
    lesson, on random lessons and word lists."""
    import random

    from mgcp import text

    rng = random.Random(7)
    vocabulary = ["cache", "retry", "pool", "index", "query", "lock", "queue", "token", "shard", "batch"]
    lessons = [lesson(f"l{i:03}", " ".join(rng.sample(vocabulary, rng.randint(0, 4))),
                      " ".join(rng.sample(vocabulary, rng.randint(0, 3))), rng.sample(vocabulary, rng.randint(0, 2)))
               for i in range(300)]
    held = [set(text.content_tokens(f"{x.trigger} {x.action} {' '.join(x.tags)}")) for x in lessons]
    index = knowledge_extraction._LessonIndex(lessons)
    for _ in range(400):
        words = [text.content_tokens(w)[0] for w in rng.sample(vocabulary + ["absent"], rng.randint(0, 6))]
        distinct = set(words)
        assert index.covers(tuple(words)) == (not distinct or any(distinct <= h for h in held))
        expected = max((len(distinct & h) for h in held), default=0) / len(distinct) if distinct else 1.0
        assert index.best_containment(words) == expected


def test_the_projects_own_name_is_no_theme_of_its_notes():
    snaps = [snap(i, i, notes=f"Alpha billing: tuned the connection pooling, day {i}.") for i in range(1, 5)]
    themes = {f.data["theme"] for f in knowledge_extraction.run(snaps, [], SETTINGS, project_path="/proj/alpha-billing")}
    assert "connection pooling" in themes and not themes & {"alpha", "billing", "alpha billing"}, themes
    assert "alpha billing" in {f.data["theme"] for f in knowledge_extraction.run(snaps, [], SETTINGS)}


def test_a_theme_in_another_script_is_found():
    notes = ["Вебхук платежей падает на CI.", "Снова чинил вебхук платежей.", "Вебхук платежей: добавил ретраи."]
    themes = kinds(knowledge_extraction.run([snap(i, i, n) for i, n in enumerate(notes, 1)], [], SETTINGS), "theme")
    assert "вебхук платежей" in [t.data["theme"] for t in themes]
