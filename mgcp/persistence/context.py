"""Projects, their sessions, and their context with its history.

A save that changes anything appends one `context_history` row in the same transaction as the update
of `project_contexts`: notes, active files, todos and decisions in full, plus the catalogue's
SHA-256 over canonical JSON and a top-level delta against the previous snapshot
(`{"added": {k: new}, "removed": {k: old}, "changed": {k: new}}`; the first snapshot adds
everything). Todos and active files given to a save replace the previous lists; decisions are
appended (the last 10 stay in `project_contexts`, and each history row holds the list as it was:
a save adding more than 10 new ones is refused, since the first would be in no row). A project
whose stored catalogue, todos, files or decisions are not JSON of their type (an older writer's)
reads them as empty, and is not saved until they are corrected: the save would write the empty
value over text kept nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from mgcp.errors import DatabaseError, InvalidInputError, NotFoundError
from mgcp.models import ContextAt, ContextSnapshot, ProjectContext, SessionRegistration, Todo
from mgcp.persistence import sessions as sql
from mgcp.persistence.database import Database, dumps, utcnow
from mgcp.validation import (MAX_TEXT, check_catalogue, check_count, check_json, check_list, check_session_id,
                             check_text)

RECENT_DECISIONS = 10
SHOWN_TODOS = 5  # open todos an unknown `done` name's error lists


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


def _json(text: str | None, default):
    """A JSON column as the type the model expects (older rows may hold another shape: then the
    default, rather than a failure to read the whole project)."""
    try:
        value = json.loads(text) if text else default
    except ValueError:
        return default
    return value if isinstance(value, type(default)) else default


# The JSON columns of project_contexts that a save writes again in full, and the type each holds.
STATE_JSON = {"catalogue": dict, "todos": list, "active_files": list, "recent_decisions": list}


def unreadable(row) -> list[str]:
    """The STATE_JSON columns of a project_contexts row whose text is not JSON of their type (an
    older writer's): `project_from_row` reads them as empty."""
    bad = []
    for column, kind in STATE_JSON.items():
        text = row[column]
        try:
            if text and not isinstance(json.loads(text), kind):
                bad.append(column)
        except ValueError:
            bad.append(column)
    return bad


def _check_twice(project: ProjectContext, todos: list[Todo]) -> None:
    """A todo given twice (`--todo a --todo a`) is refused: `--done a` would then finish both. A
    list that already held it twice (an older writer's) may still be saved as it is."""
    held, given = Counter(t.content for t in project.todos), Counter(t.content for t in todos)
    twice = next((content for content, n in given.items() if n > max(1, held[content])), None)
    if twice is not None:
        raise InvalidInputError(f"the todo {twice!r} is given twice; give each todo once")


def _texts(text: str | None) -> list[str]:
    return [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in _json(text, [])]


def project_from_row(row) -> ProjectContext:
    d = dict(row)
    return ProjectContext(
        project_id=d["project_id"], project_name=d["project_name"], project_path=d["project_path"],
        catalogue=_json(d["catalogue"], {}),
        todos=[Todo.from_stored(t) for t in _json(d["todos"], [])],
        active_files=_texts(d["active_files"]),
        recent_decisions=_texts(d["recent_decisions"]),
        last_session_id=d["last_session_id"], last_accessed=d["last_accessed"],
        session_count=d["session_count"] or 0, notes=d["notes"],
    )


def snapshot_from_row(row) -> ContextSnapshot:
    d = dict(row)
    return ContextSnapshot(
        id=d["id"], project_id=d["project_id"], session_number=d["session_number"],
        session_id=d["session_id"], timestamp=d["timestamp"], notes=d["notes"],
        active_files=json.loads(d["active_files"] or "[]"),
        todos=[Todo.from_stored(t) for t in _json(d["todos"], [])],
        recent_decisions=json.loads(d["recent_decisions"] or "[]"),
        catalogue_hash=d["catalogue_hash"],
        catalogue_delta=_json(d["catalogue_delta"], {}) or None,
    )


def _checked(todo: Todo, restoring: bool) -> Todo:
    """A todo as a save stores it: its text trimmed and screened as every stored text is, and what
    else it holds (a priority, its notes, an older writer's keys) stored as JSON can be, unless it
    is a list the project held before (`restoring`)."""
    if not restoring:
        check_json("a todo's fields", todo.model_dump(exclude={"content"}), MAX_TEXT)
    return todo.model_copy(update={"content": check_text("todo", todo.content),
                                   "notes": check_text("todo notes", todo.notes, required=False)})


class Contexts:
    """Projects, their sessions, and their context with its history."""

    def __init__(self, db: Database):
        self.db = db

    # -- projects and sessions (the rules are in persistence.sessions) --------------------------

    async def find_project(self, path: str) -> ProjectContext | None:
        row = await self.db.fetchone(sql.FIND_PROJECT, sql.find_params(path))
        return project_from_row(row) if row else None

    async def get_project(self, path: str) -> ProjectContext:
        project = await self.find_project(path)
        if project is None:
            raise NotFoundError(f"no context saved for project {sql.normalize_path(path)}")
        return project

    async def project_by_id(self, project_id: str) -> ProjectContext:
        row = await self.db.fetchone("SELECT * FROM project_contexts WHERE project_id = ?", [project_id])
        if row is None:
            raise NotFoundError(f"no project with id {project_id!r}")
        return project_from_row(row)

    async def ensure_project(self, path: str) -> ProjectContext:
        async with self.db.transaction():
            project = await self.find_project(path)
            if project is None:
                row = sql.new_project(sql.normalize_path(path), utcnow())
                await self.db.insert("project_contexts", row)
                project = ProjectContext(**row)
        return project

    async def add_project(self, path: str) -> None:
        """Store the project when it is not yet known: `ensure_project` without reading its context."""
        async with self.db.transaction():
            if await self.db.fetchone(sql.FIND_PROJECT, sql.find_params(path)) is None:
                await self.db.insert("project_contexts", sql.new_project(sql.normalize_path(path), utcnow()))

    async def register_session(self, path: str, session_id: str, source: str | None = None,
                               at: str | None = None) -> SessionRegistration:
        """Register a session; the result carries the project's current session number."""
        async with self.db.transaction():
            project = await self.ensure_project(path)
            if await self.db.fetchone(sql.FIND_SESSION, [project.project_id, session_id]):
                return SessionRegistration(project_id=project.project_id, session_id=session_id,
                                           session_number=project.session_count, is_new=False)
            number, now = project.session_count + 1, at or utcnow()
            await self.db.insert("project_sessions", {
                "project_id": project.project_id, "session_id": session_id, "session_number": number,
                "source": source, "first_seen_at": now})
            await self.db.update("project_contexts", {"project_id": project.project_id}, {
                "session_count": number, "last_session_id": session_id, "last_accessed": now})
        return SessionRegistration(project_id=project.project_id, session_id=session_id,
                                   session_number=number, is_new=True)

    # -- saving ---------------------------------------------------------------------------------

    async def save(self, path: str, session_id: str | None = None, notes: str | None = None,
                   todos: list[Todo] | None = None, decisions: list[str] | None = None,
                   active_files: list[str] | None = None,
                   catalogue: dict | None = None, at: str | None = None,
                   done: list[str] | None = None, restoring: bool = False) -> ContextSnapshot | None:
        """Save the project's state; returns the new history row, or None when nothing changed.

        The save belongs to the project's current session (a new session id opens the next one;
        a known id continues the current one). A decision already among the recent decisions is
        not appended again, so repeating a save changes nothing. `todos` replace the list; `done`
        marks todos completed: each of the list (the `todos` given, else the current list) whose
        content it names, and one of the current list that the `todos` given leave out is added as
        completed. A `done` name that is neither the content of a current todo nor of one given is
        refused (InvalidInputError) and nothing is written: a typo must not become a finished todo.
        `at` backdates the save (imports and the demo); by default it is now. `restoring`: the todos
        are a list the project held before (a forced undo puts it back), a todo held twice included."""
        if not session_id and all(v is None for v in (notes, todos, done, decisions, active_files, catalogue)):
            raise InvalidInputError("nothing to save: give notes, todos, todos done, decisions, active files, "
                                    "a catalogue or a session id")
        notes = check_text("notes", notes, required=False)
        decisions = check_list("decision", decisions)
        active_files = check_list("active file", active_files)
        if todos is not None:  # trimmed like every other text
            check_count("todo", todos)
            todos = [_checked(todo, restoring) for todo in todos]
        done = check_list("todo", done)
        if catalogue is not None:
            check_catalogue(catalogue)
        if session_id is not None:
            session_id = check_session_id(session_id)
        async with self.db.transaction():
            if session_id:
                await self.register_session(path, session_id, "save", at)
            project = await self.ensure_project(path)
            await self._refuse_unreadable(project)
            if todos is not None and not restoring:
                _check_twice(project, todos)
            if done:
                _check_done(project, todos, done)
            number = project.session_count
            if number == 0:  # a brand-new project's first save opens its first session
                number = 1
                await self.db.update("project_contexts", {"project_id": project.project_id},
                                     {"session_count": 1})
            old_todos = {t.content: t for t in project.todos}
            if done:
                todos = _completed(project.todos if todos is None else todos, done)
            now = at or utcnow()
            new_todos = project.todos if todos is None else [
                t.model_copy(update={"created_at": t.created_at or (old_todos[t.content].created_at
                                                                      if t.content in old_todos else now)})
                for t in todos]
            added = [d for d in dict.fromkeys(decisions or []) if d not in project.recent_decisions]
            if len(added) > RECENT_DECISIONS:  # the first of them would be in no history row
                raise InvalidInputError(f"a save adds at most {RECENT_DECISIONS} new decisions (the context keeps "
                                        f"the last {RECENT_DECISIONS}); got {len(added)}: save them in parts")
            # Each decision stated in a session is an observation, even one the recent decisions
            # already hold (which leaves the context unchanged): pattern reinforcement counts them.
            await self.db.conn.executemany(
                "INSERT OR IGNORE INTO decision_observations (project_id, session_number, decision, observed_at)"
                " VALUES (?, ?, ?, ?)", [(project.project_id, number, d, now) for d in dict.fromkeys(decisions or [])])
            state = {
                "notes": project.notes if notes is None else notes,
                "todos": dumps([t.model_dump() for t in new_todos]),
                "active_files": dumps(project.active_files if active_files is None else active_files),
                "recent_decisions": dumps((project.recent_decisions + added)[-RECENT_DECISIONS:]),
                "catalogue": canonical(project.catalogue if catalogue is None else catalogue),
            }
            old = {
                "notes": project.notes, "todos": dumps([t.model_dump() for t in project.todos]),
                "active_files": dumps(project.active_files),
                "recent_decisions": dumps(project.recent_decisions),
                "catalogue": canonical(project.catalogue),
            }
            if state == old:
                return None
            new_catalogue = json.loads(state["catalogue"])
            base = await self._latest_catalogue(project)
            await self.db.update("project_contexts", {"project_id": project.project_id}, {
                **state, "last_accessed": now,
                **({"last_session_id": session_id} if session_id else {})})
            row = {
                "project_id": project.project_id, "session_number": number, "session_id": session_id,
                "timestamp": now, "notes": state["notes"], "active_files": state["active_files"],
                "todos": state["todos"], "recent_decisions": state["recent_decisions"],
                "catalogue_hash": catalogue_hash(new_catalogue),
                "catalogue_delta": dumps(catalogue_delta(base, new_catalogue)),
            }
            row["id"] = await self.db.insert("context_history", row)
        return snapshot_from_row(row)

    async def _refuse_unreadable(self, project: ProjectContext) -> None:
        """Refuse to save a project whose stored state holds JSON that cannot be read (DatabaseError).

        The save writes every state column again, so such a column would become its empty value, and
        its text would be kept nowhere: history has no place for a value that is not JSON, and
        migration 0005, which seeds a project's history with the state it finds, skipped this
        project for the same reason, so even its readable notes and todos are in no history row
        yet. Once the column is corrected, the next command's migration seeds the history with the
        project's state, and saves go on from there."""
        row = await self.db.fetchone(
            f"SELECT {', '.join(STATE_JSON)} FROM project_contexts WHERE project_id = ?", [project.project_id])
        bad = unreadable(row)
        if bad:
            column = bad[0]
            raise DatabaseError(
                f"the {column} stored for {project.project_path} is not a JSON "
                f"{'object' if STATE_JSON[column] is dict else 'list'} "
                f"({_short(row[column], 40)}): mgcp cannot read it, and a save would replace it; nothing was "
                f"saved. Correct the {column} column of project {project.project_id} in the project_contexts "
                "table (or restore a backup), then save again")

    async def _latest_catalogue(self, project: ProjectContext) -> dict:
        """The catalogue as the last snapshot recorded it (normally the current one)."""
        last = await self.db.fetchone(
            "SELECT catalogue_hash FROM context_history WHERE project_id = ? ORDER BY id DESC LIMIT 1",
            [project.project_id])
        if last is None:
            return {}
        if last["catalogue_hash"] == catalogue_hash(project.catalogue):
            return project.catalogue
        # The catalogue was changed outside mgcp's saves (an older mgcp): replay history instead.
        return (await self._replay(project, None))[1]

    # -- reading history ------------------------------------------------------------------------

    async def history(self, path: str, limit: int | None = None) -> list[ContextSnapshot]:
        project = await self.get_project(path)
        rows = await self.db.fetchall(
            "SELECT * FROM context_history WHERE project_id = ? ORDER BY id DESC LIMIT ?",
            [project.project_id, limit if limit is not None else -1])
        return [snapshot_from_row(r) for r in reversed(rows)]

    async def history_mark(self, project_id: str | None = None) -> tuple:
        """How many history rows the project (None: every project) has and the newest row's id: a
        save changes it."""
        if project_id is None:
            return tuple(await self.db.fetchone("SELECT count(*), max(id) FROM context_history"))
        row = await self.db.fetchone("SELECT count(*), max(id) FROM context_history WHERE project_id = ?",
                                     [project_id])
        return tuple(row)

    async def history_since(self, project_id: str, after_session: int) -> list[ContextSnapshot]:
        rows = await self.db.fetchall(
            "SELECT * FROM context_history WHERE project_id = ? AND session_number > ? ORDER BY id",
            [project_id, after_session])
        return [snapshot_from_row(r) for r in rows]

    async def at(self, path: str, session: int) -> ContextAt:
        """The state at the end of session `session` in time order: the last save before the first
        save of any later session. Before the project's first save there is no context, and a
        session past the current one is refused (NotFoundError / InvalidInputError)."""
        project = await self.get_project(path)
        if not 0 <= session <= project.session_count:
            raise InvalidInputError(f"session {session} is past the current session of "
                                    f"{project.project_path}, which is {project.session_count}")
        row, catalogue = await self._replay(project, session)
        return ContextAt(session=session, snapshot=snapshot_from_row(row), catalogue=catalogue)

    async def _replay(self, project: ProjectContext, session: int | None) -> tuple:
        """The history row in force at the end of `session` (None: the latest) and the catalogue
        rebuilt from the deltas up to it, each step verified against its recorded hash."""
        rows = await self.db.fetchall(
            "SELECT * FROM context_history WHERE project_id = ? ORDER BY id", [project.project_id])
        catalogue: dict = {}
        last = None
        for row in rows:
            if session is not None and row["session_number"] > session:
                break  # history is a timeline: what came later is not part of that session
            catalogue = apply_delta(catalogue, _json(row["catalogue_delta"], {}))
            if row["catalogue_hash"] and catalogue_hash(catalogue) != row["catalogue_hash"]:
                raise DatabaseError(
                    f"catalogue history of {project.project_path} does not verify at history row "
                    f"{row['id']} (session {row['session_number']}): the stored hash does not match")
            last = row
        if last is None:
            first = f"; its first save is in session {rows[0]['session_number']}" if rows else ""
            raise NotFoundError(f"no context for {project.project_path} at session {session}: "
                                f"nothing was saved by then{first}")
        return last, catalogue


def _check_done(project: ProjectContext, todos: list[Todo] | None, done: list[str]) -> None:
    """Refuse `done` names that are neither among the project's todos nor among the `todos` the save
    gives (matched by exact content, as todos always are), naming a close match (case aside) or
    else the open todos."""
    import difflib

    known = project.todos + (todos or [])
    missing = [c for c in dict.fromkeys(done) if c not in {t.content for t in known}]
    if not missing:
        return
    folded = {t.content.casefold(): t.content for t in reversed(known)}  # the first of a case wins
    close = dict.fromkeys(folded[m] for c in missing for m in difflib.get_close_matches(c.casefold(), folded, n=1))
    if close:
        hint = f"did you mean {', '.join(map(_short, close))}?"
    else:
        open_todos = list(dict.fromkeys(t.content for t in known if t.status != "completed"))
        more = len(open_todos) - SHOWN_TODOS
        hint = (f"open todos: {', '.join(map(_short, open_todos[:SHOWN_TODOS]))}"
                + (f" and {more} more" if more > 0 else "")) if open_todos else "it has no open todos"
    noun = "todo" if len(missing) == 1 else "todos"
    raise InvalidInputError(f"no {noun} {', '.join(map(repr, missing))} to mark done in "
                            f"{project.project_path}; {hint}")


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _completed(todos: list[Todo], done: list[str]) -> list[Todo]:
    """The todos with those `done` names marked completed, and the names the list lacks (todos of
    the project the save's list leaves out) added so."""
    named = set(done)
    marked = [t.model_copy(update={"status": "completed"}) if t.content in named else t for t in todos]
    held = {t.content for t in todos}
    return marked + [Todo(content=c, status="completed") for c in dict.fromkeys(done) if c not in held]
