from mgcp.models import ContextSnapshot, Todo
from mgcp.operations import context_summary

TS = "2026-01-01T00:00:00+00:00"


def snap(id, session, notes=None, todos=(), decisions=(), files=()):
    return ContextSnapshot(id=id, project_id="p", session_number=session, timestamp=TS, notes=notes,
                           todos=list(todos), recent_decisions=list(decisions), active_files=list(files))


def history():
    return [
        snap(1, 3, "Started on rate limiting for the api.", [Todo(content="Add rate limit headers")],
             ["Use a token bucket"], ["api/limits.py"]),
        snap(2, 4, "Rate limiting works for anonymous users.",
             [Todo(content="Add rate limit headers", status="completed"), Todo(content="Document limits")],
             ["Use a token bucket", "Store buckets in redis"], ["api/limits.py", "docs/api.md"]),
        snap(3, 5, "Rate limiting docs.", [], ["Store buckets in redis"], ["api/limits.py"]),
    ]


def test_no_history_gives_none():
    assert context_summary.run([], {}) is None


def test_session_range():
    result = context_summary.run(history(), {})
    assert (result.from_session, result.to_session) == (3, 5)


def test_decisions_are_listed_once_when_first_made():
    data = context_summary.run(history(), {}).data
    assert data["decisions"] == [{"text": "Use a token bucket", "session": 3},
                                 {"text": "Store buckets in redis", "session": 4}]


def test_todos_opened_closed_and_dropped():
    data = context_summary.run(history(), {}).data
    assert [t["content"] for t in data["todos_opened"]] == ["Add rate limit headers", "Document limits"]
    assert data["todos_closed"] == [{"content": "Add rate limit headers", "session": 4}]
    assert data["todos_dropped"] == [{"content": "Document limits", "session": 5}]


def test_most_active_files_by_sessions():
    assert context_summary.run(history(), {}).data["active_files"][0] == {"path": "api/limits.py", "sessions": 3}


def test_recurring_theme():
    assert context_summary.run(history(), {}).data["themes"][0]["theme"] == "rate limiting"


def test_narrative_mentions_the_lists():
    narrative = context_summary.run(history(), {}).narrative
    assert narrative.startswith("Sessions 3-5 (3 sessions, 3 saves).")
    for part in ("Use a token bucket", "closed 1", "rate limiting", "api/limits.py (3 sessions)"):
        assert part in narrative


def test_deterministic():
    assert context_summary.run(history(), {}) == context_summary.run(list(reversed(history())), {})
