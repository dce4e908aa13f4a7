"""context_summary: a project's context history compressed into one narrative.

Input: the snapshots since the last summary (ordered by id). Consecutive snapshots are diffed:
a decision not in the previous snapshot's list is a decision made then; a todo (by normalized
content) that appears open is opened; one that turns completed/done is closed; one that vanishes
while open is dropped. Recurring themes come from the notes (the phrase miner of
knowledge_extraction, at THEME_MIN_SESSIONS); the most active files are counted in distinct sessions.
`data` holds the same lists, structured; the narrative is plain text for people and for the agent.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import islice

from mgcp import text
from mgcp.models import ContextSnapshot, HistoryRow
from mgcp.operations.knowledge_extraction import CLOSED, recurring_phrases
from mgcp.collector import collector_paused
from mgcp.operations.shared import CycleCache

THEME_MIN_SESSIONS = 2
TOP = 5


@dataclass
class SummaryResult:
    narrative: str
    data: dict
    from_session: int
    to_session: int


@collector_paused()
def run(history: list[ContextSnapshot | HistoryRow], settings: dict,
        cache: CycleCache | None = None) -> SummaryResult | None:
    history = sorted(history, key=lambda s: s.id)
    if not history:
        return None
    sessions = sorted({s.session_number for s in history})
    decisions, opened, closed, dropped = [], [], [], []
    prev_decisions: set[str] = set()
    prev_open: dict[str, str] = {}
    seen_decisions: set[str] = set()
    norm = text.Memo(text.normalize)  # the same todos and decisions recur in snapshot after snapshot
    for snap in history:
        for decision in snap.recent_decisions:
            key = norm[decision]
            if key and key not in prev_decisions and key not in seen_decisions:
                decisions.append({"text": decision.strip(), "session": snap.session_number})
                seen_decisions.add(key)
        prev_decisions = {norm[d] for d in snap.recent_decisions}
        now_open: dict[str, str] = {}
        now_closed: set[str] = set()
        for todo in snap.todos:
            key = norm[todo.content]
            if not key:
                continue
            if todo.status in CLOSED:
                now_closed.add(key)
                if key in prev_open:
                    closed.append({"content": todo.content, "session": snap.session_number})
            else:
                now_open[key] = todo.content
                if key not in prev_open:
                    opened.append({"content": todo.content, "session": snap.session_number})
        for key, content in prev_open.items():
            if key not in now_open and key not in now_closed:
                dropped.append({"content": content, "session": snap.session_number})
        prev_open = now_open
    still_open = list(prev_open.values())

    file_sessions: dict[str, set[int]] = defaultdict(set)
    for snap in history:
        for path in snap.active_files:
            file_sessions[path].add(snap.session_number)
    files = sorted(file_sessions.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:TOP]
    themes = (list(islice(recurring_phrases(history, min(THEME_MIN_SESSIONS, len(sessions)), cache), TOP))
              if len(sessions) > 1 else [])

    data = {
        "sessions": sessions, "snapshots": len(history),
        "decisions": decisions, "todos_opened": opened, "todos_closed": closed,
        "todos_dropped": dropped, "todos_open": still_open,
        "themes": [{"theme": t["theme"], "sessions": t["sessions"]} for t in themes],
        "active_files": [{"path": p, "sessions": len(s)} for p, s in files],
    }
    return SummaryResult(narrative=_narrative(data), data=data,
                         from_session=sessions[0], to_session=sessions[-1])


def _narrative(d: dict) -> str:
    s = d["sessions"]
    span = f"Session {s[0]}" if len(s) == 1 else f"Sessions {s[0]}-{s[-1]}"
    lines = [f"{span} ({len(s)} session{'s' if len(s) != 1 else ''}, {d['snapshots']} saves)."]
    if d["decisions"]:
        lines.append("Decisions: " + "; ".join(f"{x['text']} (session {x['session']})" for x in d["decisions"]) + ".")
    todo_parts = []
    for key, label in (("todos_opened", "opened"), ("todos_closed", "closed"), ("todos_dropped", "dropped")):
        if d[key]:
            todo_parts.append(f"{label} {len(d[key])} (" + "; ".join(x["content"] for x in d[key]) + ")")
    if todo_parts:
        lines.append("Todos: " + ", ".join(todo_parts) + f"; {len(d['todos_open'])} still open.")
    if d["themes"]:
        lines.append("Recurring themes: " + ", ".join(
            f"{t['theme']} ({len(t['sessions'])} sessions)" for t in d["themes"]) + ".")
    if d["active_files"]:
        lines.append("Most active files: " + ", ".join(
            f"{f['path']} ({f['sessions']} session{'s' if f['sessions'] != 1 else ''})"
            for f in d["active_files"]) + ".")
    return "\n".join(lines)
