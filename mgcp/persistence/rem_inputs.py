"""What a REM cycle reads of the context history, read for analysis rather than for display.

`history_since` gives the same snapshots as `Contexts.history_since` except the catalogue (hash and
delta, which no operation reads), and builds them without validating them again: each column is
parsed as `snapshot_from_row` parses it, and the lists saves carry from row to row (todos,
decisions, files) are parsed once per distinct stored text and shared between the snapshots that
hold it. The snapshots and their lists are therefore read-only.
"""

from __future__ import annotations

import json

from mgcp.models import ContextSnapshot, Todo
from mgcp.persistence.context import _json
from mgcp.persistence.database import Database


class RemInputs:
    def __init__(self, db: Database):
        self.db = db

    async def history_since(self, project_id: str, after_session: int) -> list[ContextSnapshot]:
        """The project's snapshots of sessions after `after_session`, by id, without their catalogue."""
        rows = await self.db.fetchall(
            """SELECT id, session_number, session_id, timestamp, notes, active_files, todos, recent_decisions
               FROM context_history WHERE project_id = ? AND session_number > ? ORDER BY id""",
            [project_id, after_session])
        files: dict[str | None, list[str]] = {}
        todos: dict[str | None, list[Todo]] = {}
        decisions: dict[str | None, list[str]] = {}
        out = []
        for r in rows:
            if r["active_files"] not in files:
                files[r["active_files"]] = json.loads(r["active_files"] or "[]")
            if r["todos"] not in todos:
                todos[r["todos"]] = [Todo.from_stored(t) for t in _json(r["todos"], [])]
            if r["recent_decisions"] not in decisions:
                decisions[r["recent_decisions"]] = json.loads(r["recent_decisions"] or "[]")
            out.append(ContextSnapshot.model_construct(
                id=r["id"], project_id=project_id, session_number=r["session_number"], session_id=r["session_id"],
                timestamp=r["timestamp"], notes=r["notes"], active_files=files[r["active_files"]],
                todos=todos[r["todos"]], recent_decisions=decisions[r["recent_decisions"]],
                catalogue_hash=None, catalogue_delta=None))
        return out
