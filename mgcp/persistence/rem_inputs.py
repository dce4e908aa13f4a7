"""What a REM cycle reads of the context history, read for analysis rather than for display.

`history_since` gives the snapshots `Contexts.history_since` gives as light rows (`HistoryRow`:
without the catalogue's hash and delta, which no operation reads): each column is parsed as
`snapshot_from_row` parses it, and the lists saves carry from row to row (todos, decisions, files)
are parsed once per distinct stored text and shared between the rows that hold it. The rows and
their lists are therefore read-only.
"""

from __future__ import annotations

import json

from mgcp.models import HistoryRow, Todo
from mgcp.persistence.context import _json
from mgcp.persistence.database import Database
from mgcp.collector import collector_paused


class RemInputs:
    def __init__(self, db: Database):
        self.db = db

    async def history_since(self, project_id: str, after_session: int) -> list[HistoryRow]:
        """The project's snapshots of sessions after `after_session`, by id."""
        with collector_paused():  # a row per snapshot: a hundred thousand objects, no cycles
            rows = await self.db.fetchall_tuples(
                """SELECT id, session_number, session_id, timestamp, notes, active_files, todos, recent_decisions
                   FROM context_history WHERE project_id = ? AND session_number > ? ORDER BY id""",
                [project_id, after_session])
            return self._rows(project_id, rows)

    @staticmethod
    def _rows(project_id: str, rows) -> list[HistoryRow]:
        files: dict[str | None, list[str]] = {}
        todos: dict[str | None, list[Todo]] = {}
        decisions: dict[str | None, list[str]] = {}
        out = []
        new = tuple.__new__  # each row made as the tuple it is, every field given (a Python call less per row)
        for row_id, session, session_id, at, notes, files_text, todos_text, decisions_text in rows:
            if files_text not in files:
                files[files_text] = json.loads(files_text or "[]")
            if todos_text not in todos:
                todos[todos_text] = [Todo.from_stored(t) for t in _json(todos_text, [])]
            if decisions_text not in decisions:
                decisions[decisions_text] = json.loads(decisions_text or "[]")
            out.append(new(HistoryRow, (row_id, project_id, session, session_id, at, notes, files[files_text],
                                        todos[todos_text], decisions[decisions_text])))
        return out
