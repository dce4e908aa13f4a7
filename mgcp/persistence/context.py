"""Project context and its history (PRODUCT.md section 3).

A save that changes anything appends one `context_history` row in the same transaction as the update
of `project_contexts`: notes, active files, todos and decisions in full, plus the catalogue's
SHA-256 over canonical JSON and a top-level delta against the previous snapshot
(`{"added": {k: new}, "removed": {k: old}, "changed": {k: new}}`; the first snapshot adds
everything). Todos and active files given to a save replace the previous lists; decisions are
appended (the last 10 stay in `project_contexts`).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from mgcp.errors import DatabaseError, InvalidInputError, NotFoundError
from mgcp.models import ContextSnapshot, ProjectContext, SessionRegistration, Todo
from mgcp.persistence import sessions as sql
from mgcp.persistence.core import StoreCore, dumps, utcnow
from mgcp.validation import check_catalogue, check_list, check_text

RECENT_DECISIONS = 10
MAX_SESSION = 2**62


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def catalogue_hash(catalogue: dict) -> str:
    return hashlib.sha256(canonical(catalogue).encode("utf-8")).hexdigest()


def catalogue_delta(old: dict, new: dict) -> dict:
    return {
        "added": {k: new[k] for k in new if k not in old},
        "removed": {k: old[k] for k in old if k not in new},
        "changed": {k: new[k] for k in new if k in old and canonical(old[k]) != canonical(new[k])},
    }


def apply_delta(catalogue: dict, delta: dict) -> dict:
    result = {k: v for k, v in catalogue.items() if k not in delta.get("removed", {})}
    result.update(delta.get("added", {}))
    result.update(delta.get("changed", {}))
    return result


def project_from_row(row) -> ProjectContext:
    d = dict(row)
    return ProjectContext(
        project_id=d["project_id"], project_name=d["project_name"], project_path=d["project_path"],
        catalogue=json.loads(d["catalogue"] or "{}"),
        todos=[Todo(**t) if isinstance(t, dict) else Todo(content=str(t)) for t in json.loads(d["todos"] or "[]")],
        active_files=json.loads(d["active_files"] or "[]"),
        recent_decisions=json.loads(d["recent_decisions"] or "[]"),
        last_session_id=d["last_session_id"], last_accessed=d["last_accessed"],
        session_count=d["session_count"] or 0, notes=d["notes"],
    )


def snapshot_from_row(row) -> ContextSnapshot:
    d = dict(row)
    return ContextSnapshot(
        id=d["id"], project_id=d["project_id"], session_number=d["session_number"],
        session_id=d["session_id"], timestamp=d["timestamp"], notes=d["notes"],
        active_files=json.loads(d["active_files"] or "[]"),
        todos=[Todo(**t) if isinstance(t, dict) else Todo(content=str(t)) for t in json.loads(d["todos"] or "[]")],
        recent_decisions=json.loads(d["recent_decisions"] or "[]"),
        catalogue_hash=d["catalogue_hash"],
        catalogue_delta=json.loads(d["catalogue_delta"]) if d["catalogue_delta"] else None,
    )


class ContextStore(StoreCore):
    async def find_project(self, path: str) -> ProjectContext | None:
        row = await self.fetchone("SELECT * FROM project_contexts WHERE project_path = ?",
                                  [sql.normalize_path(path)])
        return project_from_row(row) if row else None

    async def get_project(self, path: str) -> ProjectContext:
        project = await self.find_project(path)
        if project is None:
            raise NotFoundError(f"no context saved for project {sql.normalize_path(path)}")
        return project

    async def get_project_by_id(self, project_id: str) -> ProjectContext:
        row = await self.fetchone("SELECT * FROM project_contexts WHERE project_id = ?", [project_id])
        if row is None:
            raise NotFoundError(f"no project with id {project_id!r}")
        return project_from_row(row)

    async def ensure_project(self, path: str) -> ProjectContext:
        path = sql.normalize_path(path)
        async with self.transaction():
            project = await self.find_project(path)
            if project is None:
                project = ProjectContext(project_id=sql.project_id_for(path),
                                         project_name=os.path.basename(path) or path,
                                         project_path=path, last_accessed=utcnow())
                await self._insert("project_contexts", {
                    "project_id": project.project_id, "project_name": project.project_name,
                    "project_path": path, "last_accessed": project.last_accessed, "session_count": 0,
                })
        return project

    async def register_session(self, path: str, session_id: str, source: str | None = None,
                               at: str | None = None) -> SessionRegistration:
        async with self.transaction():
            project = await self.ensure_project(path)
            known = await self.fetchone(sql.FIND_SESSION, [project.project_id, session_id])
            if known:
                return SessionRegistration(project_id=project.project_id, session_id=session_id,
                                           session_number=known[0], is_new=False)
            number, now = project.session_count + 1, at or utcnow()
            await self._insert("project_sessions", {
                "project_id": project.project_id, "session_id": session_id, "session_number": number,
                "source": source, "first_seen_at": now})
            await self._update("project_contexts", {"project_id": project.project_id}, {
                "session_count": number, "last_session_id": session_id, "last_accessed": now})
        return SessionRegistration(project_id=project.project_id, session_id=session_id,
                                   session_number=number, is_new=True)

    async def save_context(self, path: str, session_id: str | None = None, notes: str | None = None,
                           todos: list[Todo] | None = None, decisions: list[str] | None = None,
                           active_files: list[str] | None = None,
                           catalogue: dict | None = None, at: str | None = None) -> ContextSnapshot | None:
        """Save the project's state; returns the new history row, or None when nothing changed.
        `at` backdates the save (imports and the demo); by default it is now."""
        notes = check_text("notes", notes, required=False)
        decisions = check_list("decision", decisions)
        active_files = check_list("active file", active_files)
        for todo in todos or []:
            check_text("todo", todo.content)
        if catalogue is not None:
            check_catalogue(catalogue)
        if session_id is not None:
            session_id = check_text("session id", session_id, limit=200)
        async with self.transaction():
            if session_id:
                number = (await self.register_session(path, session_id, "save", at)).session_number
            project = await self.ensure_project(path)
            if not session_id:
                number = project.session_count
                if number == 0:  # a brand-new project's first save opens its first session
                    number = 1
                    await self._update("project_contexts", {"project_id": project.project_id},
                                       {"session_count": 1})
            old_todos = {t.content: t for t in project.todos}
            now = at or utcnow()
            new_todos = project.todos if todos is None else [
                t.model_copy(update={"created_at": t.created_at or (old_todos[t.content].created_at
                                                                      if t.content in old_todos else now)})
                for t in todos]
            new_decisions = (project.recent_decisions + list(decisions or []))[-RECENT_DECISIONS:]
            state = {
                "notes": project.notes if notes is None else notes,
                "todos": dumps([t.model_dump() for t in new_todos]),
                "active_files": dumps(project.active_files if active_files is None else active_files),
                "recent_decisions": dumps(new_decisions),
                "catalogue": canonical(project.catalogue if catalogue is None else catalogue),
            }
            old = {
                "notes": project.notes, "todos": dumps([t.model_dump() for t in project.todos]),
                "active_files": dumps(project.active_files),
                "recent_decisions": dumps(project.recent_decisions),
                "catalogue": canonical(project.catalogue),
            }
            if state == old and not decisions:
                return None
            new_catalogue = json.loads(state["catalogue"])
            base = await self._latest_catalogue(project)
            await self._update("project_contexts", {"project_id": project.project_id}, {
                **state, "last_accessed": now,
                **({"last_session_id": session_id} if session_id else {})})
            row = {
                "project_id": project.project_id, "session_number": number, "session_id": session_id,
                "timestamp": now, "notes": state["notes"], "active_files": state["active_files"],
                "todos": state["todos"], "recent_decisions": state["recent_decisions"],
                "catalogue_hash": catalogue_hash(new_catalogue),
                "catalogue_delta": dumps(catalogue_delta(base, new_catalogue)),
            }
            row["id"] = await self._insert("context_history", row)
        return snapshot_from_row(row)

    async def _latest_catalogue(self, project: ProjectContext) -> dict:
        """The catalogue as the last snapshot recorded it (normally the current one)."""
        last = await self.fetchone(
            "SELECT catalogue_hash FROM context_history WHERE project_id = ? ORDER BY id DESC LIMIT 1",
            [project.project_id])
        if last is None:
            return {}
        if last["catalogue_hash"] == catalogue_hash(project.catalogue):
            return project.catalogue
        # The catalogue was changed outside mgcp's saves (an older mgcp): replay history instead.
        return (await self.context_at(project.project_path, None))[1]

    async def context_history(self, path: str, limit: int | None = None) -> list[ContextSnapshot]:
        project = await self.get_project(path)
        rows = await self.fetchall(
            "SELECT * FROM context_history WHERE project_id = ? ORDER BY id DESC LIMIT ?",
            [project.project_id, limit if limit is not None else -1])
        return [snapshot_from_row(r) for r in reversed(rows)]

    async def history_since(self, project_id: str, after_session: int) -> list[ContextSnapshot]:
        rows = await self.fetchall(
            "SELECT * FROM context_history WHERE project_id = ? AND session_number > ? ORDER BY id",
            [project_id, after_session])
        return [snapshot_from_row(r) for r in rows]

    async def context_at(self, path: str, session: int | None) -> tuple[ContextSnapshot, dict]:
        """The state as of the end of `session` (None: the latest), catalogue rebuilt from the
        deltas and verified against the recorded hash."""
        if session is not None and not 0 <= session <= MAX_SESSION:
            raise InvalidInputError(f"session must be between 0 and {MAX_SESSION}")
        project = await self.get_project(path)
        rows = await self.fetchall(
            """SELECT * FROM context_history WHERE project_id = ? AND session_number <= ?
               ORDER BY id""",
            [project.project_id, session if session is not None else MAX_SESSION])
        if not rows:
            raise NotFoundError(f"no history for {project.project_path} at or before session {session}")
        catalogue: dict = {}
        for row in rows:
            catalogue = apply_delta(catalogue, json.loads(row["catalogue_delta"] or "{}"))
            if row["catalogue_hash"] and catalogue_hash(catalogue) != row["catalogue_hash"]:
                raise DatabaseError(
                    f"catalogue history of {project.project_path} does not verify at history row "
                    f"{row['id']} (session {row['session_number']}): the stored hash does not match")
        return snapshot_from_row(rows[-1]), catalogue
