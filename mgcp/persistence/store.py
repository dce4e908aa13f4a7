"""The async store: lessons, context and REM state in one SQLite database.

`Store` composes plain classes over one `Database` (connection and transactions):
`store.lessons`, `store.context`, `store.rem`, `store.patterns` and the others below, each made on
first use. Open it with
`async with Store.open(path) as store:`; the database is checked and upgraded by the sync migration
runner first. Writes that belong together share `store.transaction()` (nested blocks are
savepoints).
"""

from __future__ import annotations

import importlib
import json
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable

from mgcp.errors import ConflictError
from mgcp.persistence import columns
from mgcp.persistence.database import Database, same_content
from mgcp.records import LessonStatus


class _Part:
    """One part of the store (`store.lessons`, ...), made on first use from its module: a command
    imports the parts it uses and no others (`rem status` never imports the lessons' pydantic
    models)."""

    def __init__(self, module: str, name: str):
        self.module, self.name = f"mgcp.persistence.{module}", name

    def __set_name__(self, owner, attr: str) -> None:
        self.attr = attr

    def __get__(self, store, owner=None):
        if store is None:
            return self
        part = getattr(importlib.import_module(self.module), self.name)(store.db)
        store.__dict__[self.attr] = part  # found there from now on
        return part


def _taken_back(earlier: list, left: list, now: list, key: Callable) -> list:
    """`now` with what went from `earlier` to `left` taken back item by item (items matched by
    `key`): an item that went in comes out, one that changed is as it was, one that went out
    comes back (at the end); an item changed since (no longer as `left` holds it) stays as it is."""
    before = {key(item): item for item in earlier}
    after = {key(item): item for item in left}
    result = []
    for item in now:
        k = key(item)
        if k not in after or after[k] != item or before.get(k) == item:  # not the changes' doing, or changed since
            result.append(item)
        elif k in before:
            result.append(before[k])
    present = {key(item) for item in now}
    return result + [item for item in earlier if key(item) not in after and key(item) not in present]


def _lesson_of(change: dict) -> str | None:
    """The lesson a recorded change belongs to (its row, or one of its versions and their traits)."""
    if change["table"] == "lessons":
        return change["key"]["id"]
    if change["table"] in ("lesson_versions", "lesson_traits"):
        return (change["after"] or change["before"])["lesson_id"]
    return None


def _project_of(change: dict) -> str | None:
    """The project a recorded change of a context row belongs to."""
    if change["table"] in ("project_contexts", "context_history"):
        return (change["after"] or change["before"])["project_id"]
    return None


# The rows that refer to a lesson, by table: the column naming it, and the columns of a row's key
# (as a recorded change names it). An undo cannot delete a lesson that rows it does not restore
# refer to: a later version or lifecycle, what its use taught, a legacy tool's counts, a child.
REFERRING = {"lesson_versions": ("lesson_id", ("id",)), "lesson_traits": ("lesson_id", ("lesson_id", "version")),
             "lesson_lifecycle": ("lesson_id", ("lesson_id",)), "lesson_outcomes": ("lesson_id", ("id",)),
             "lesson_outcome_stats": ("lesson_id", ("lesson_id",)), "lesson_usage": ("lesson_id", ("lesson_id",)),
             "lessons": ("parent_id", ("id",))}


def _lesson_text(row: dict) -> dict:
    """A recorded lessons row's text fields as `Lessons.refine` takes them."""
    return {"trigger": row["trigger"], "action": row["action"], "rationale": row["rationale"],
            "tags": sorted(set(columns.tags(row["tags"]))), "examples": columns.json_list(row["examples"])}


def _links(row: dict) -> dict[str, dict]:
    """A recorded lessons row's links by target."""
    return {r["target"]: r for r in columns.relationships(row["relationships"])}


class Store:
    lessons = _Part("lessons", "Lessons")
    context = _Part("context", "Contexts")
    rem = _Part("rem", "RemLedger")
    outcomes = _Part("outcomes", "Outcomes")
    patterns = _Part("patterns", "Patterns")
    rem_inputs = _Part("rem_inputs", "RemInputs")  # the history as REM cycles read it
    # Kept between cycles (caches): the words of the corpora compared; the pair searches of
    # duplicate detection and the contradiction scan; community detection's graph, partition and
    # titles; what pattern reinforcement observed; the word index over the lessons.
    kept_corpora = _Part("kept_corpora", "KeptCorpora")
    kept_pairs = _Part("kept_pairs", "KeptPairs")
    community_kept = _Part("community_kept", "CommunityKept")
    pattern_observations = _Part("pattern_observations", "PatternObservations")
    kept_indexes = _Part("kept_indexes", "KeptIndexes")

    # The review queue's reads in plain rows (which findings still hold; `rem status`).
    queue = _Part("queue_reads", "QueueReads")

    def __init__(self, db: Database):
        self.db = db

    @classmethod
    @asynccontextmanager
    async def open(cls, path, create: bool = True) -> AsyncIterator["Store"]:
        """`create=False` for commands that only read: a missing database is then an error."""
        async with Database.open(path, create) as db:
            yield cls(db)

    @property
    def path(self) -> str:
        return self.db.path

    def transaction(self):
        return self.db.transaction()

    def preview(self):
        return self.db.preview()

    def recording(self):
        return self.db.recording()

    async def restore(self, changes: list[dict], force: bool = False, reason: str = "forced undo") -> None:
        """Undo recorded changes (see Database.restore), keeping the search index in step.

        A lesson the changes created that rows written since refer to (an outcome recorded for
        it, say) cannot be deleted without them: that conflicts too.

        A project whose context was saved since the changes' own saves conflicts too, even when
        its context reads as the changes left it (saved away and back): its history goes on from
        what they wrote.

        Forced over later changes, it never rewinds a history: a lesson whose content changed since
        gets back what the changes changed of it (the text fields and links they changed, as they
        were before them; what only a later change changed stays) as a new version (`reason` says
        why), or
        soft-deleted if the changes created it (and the links other lessons made to it since are
        removed, as are links it made since: a link always holds both ways); a project's context
        saved since gets what the changes changed of it back as a new save; every other row is
        restored as recorded."""
        async with self.db.transaction():
            referred = await self._referred_to_since(changes)
            changed = await self._lessons_changed_since(changes) if force else {}
            changed.update(dict.fromkeys(referred, (None, None)))  # forced: marked deleted, what refers to it kept
            saved = await self._contexts_saved_since(changes)
            rows = [c for c in changes if _lesson_of(c) not in changed and _project_of(c) not in saved]
            conflicts = list(referred.values()) + ([] if force else list(saved.values()))
            try:
                touched = await self.db.restore(rows, force)
            except ConflictError as exc:
                raise ConflictError(str(exc) + "".join(f"; {c}" for c in conflicts), exc.details + conflicts) from None
            if conflicts and not force:
                raise ConflictError("undo would overwrite a later change: " + "; ".join(conflicts), conflicts)
            for lesson_id in dict.fromkeys(t["key"]["id"] for t in touched if t["table"] == "lessons"):
                await self.lessons.reindex(lesson_id)
            for lesson_id, (earlier, left) in changed.items():
                await self._bring_back(lesson_id, earlier, left, reason)
            for project_id in saved:
                await self._bring_back_context(project_id, [c for c in changes if _project_of(c) == project_id])

    async def _contexts_saved_since(self, changes: list[dict]) -> dict[str, str]:
        """Projects with a context save written after the last one the changes wrote: id -> that,
        in words."""
        last: dict[str, int] = {}
        for change in changes:
            if change["table"] == "context_history" and change["before"] is None:
                project_id = change["after"]["project_id"]
                last[project_id] = max(last.get(project_id, 0), change["key"]["id"])
        found = {}
        for project_id, row_id in sorted(last.items()):
            n = (await self.db.fetchone("SELECT count(*) FROM context_history WHERE project_id = ? AND id > ?",
                                        [project_id, row_id]))[0]
            if n:
                row = await self.db.row("project_contexts", {"project_id": project_id})
                found[project_id] = (f"the context of {row['project_path'] if row else project_id} was saved "
                                     f"{n} time{'s' if n > 1 else ''} since")
        return found

    async def _bring_back_context(self, project_id: str, changes: list[dict]) -> None:
        """A project's context saved since `changes` (its rows among them): what they changed of
        it as it was before them, in a new save. Todos, active files and the catalogue's keys are
        taken back one by one (`_taken_back`): a todo a later save added stays; the notes, one
        text, come back whole."""
        from mgcp.models import Todo

        images = [c for c in changes if c["table"] == "project_contexts"]
        if not images or images[0]["before"] is None:
            return
        earlier, left = images[0]["before"], images[-1]["after"] or {}
        now = await self.db.row("project_contexts", {"project_id": project_id}) or left
        values = {}
        if earlier["todos"] != left.get("todos"):
            todos = _taken_back(*(json.loads(row.get("todos") or "[]") for row in (earlier, left, now)),
                                key=lambda todo: Todo.from_stored(todo).content)
            values["todos"] = [Todo.from_stored(t) for t in todos]
        if earlier["notes"] != left.get("notes"):
            values["notes"] = earlier["notes"] or ""
        if earlier["active_files"] != left.get("active_files"):
            values["active_files"] = _taken_back(
                *(json.loads(row.get("active_files") or "[]") for row in (earlier, left, now)), key=str)
        if earlier["catalogue"] != left.get("catalogue"):
            keyed = [list(json.loads(row.get("catalogue") or "{}").items()) for row in (earlier, left, now)]
            values["catalogue"] = dict(_taken_back(*keyed, key=lambda item: item[0]))
        if values:
            await self.context.save(earlier["project_path"], restoring=True, **values)

    async def _referred_to_since(self, changes: list[dict]) -> dict[str, str]:
        """Lessons the changes created that rows the changes do not restore refer to now (rows
        written since): id -> those rows, in words."""
        created, restored = {}, set()
        for change in changes:
            if change["table"] == "lessons":
                created.setdefault(change["key"]["id"], change["before"] is None)
            restored.add((change["table"], tuple(change["key"].values())))
        found = {}
        for lesson_id in sorted(lesson_id for lesson_id, new in created.items() if new):
            counts = []
            for table, (column, key) in REFERRING.items():
                rows = await self.db.fetchall(f"SELECT {', '.join(key)} FROM {table} WHERE {column} = ?", [lesson_id])
                n = sum((table, tuple(row)) not in restored for row in rows)
                if n:
                    counts.append(f"{n} {table} row{'s' if n > 1 else ''}")
            linking = sorted(other.id for other in await self.lessons.linking_to(lesson_id)
                             if other.id != lesson_id and ("lessons", (other.id,)) not in restored)
            if counts or linking:
                what = counts + ([f"links from lesson{'s' if len(linking) > 1 else ''} {', '.join(linking)}"]
                                 if linking else [])
                found[lesson_id] = (f"lesson {lesson_id} is referred to since ({', '.join(what)}): forced, it is "
                                    "marked deleted" + (", those links removed (a link holds both ways)"
                                                        if linking else "")
                                    + (" and those rows stay" if counts else ""))
        return found

    async def _lessons_changed_since(self, changes: list[dict]) -> dict[str, tuple[dict | None, dict | None]]:
        """Lessons whose content differs from what the changes left: id -> the row before them and
        the row they left."""
        first, last = {}, {}
        for change in changes:
            if change["table"] == "lessons":
                first.setdefault(change["key"]["id"], change["before"])
                last[change["key"]["id"]] = change["after"]
        return {lesson_id: (first[lesson_id], after) for lesson_id, after in last.items()
                if not same_content("lessons", await self.db.row("lessons", {"id": lesson_id}), after)}

    async def _bring_back(self, lesson_id: str, earlier: dict | None, left: dict | None, reason: str) -> None:
        """A lesson changed since the changes (`earlier`: its row before them, `left`: the row they
        left): what they changed of it as it was before them, its text as a new version, its links
        through `link` / `unlink`, which change both ends; what they did not change stays as it is."""
        if not await self.lessons.exists(lesson_id):
            return
        if earlier is None:  # as before the changes, no lesson links to it
            await self.lessons.set_lifecycle(lesson_id, LessonStatus.deleted, reason=reason)
            for other in await self.lessons.linking_to(lesson_id):
                if other.id != lesson_id:
                    await self.lessons.unlink(other.id, lesson_id)
            return
        current = await self.lessons.get(lesson_id)
        now = {"trigger": current.trigger, "action": current.action, "rationale": current.rationale,
               "tags": sorted(set(current.tags)), "examples": current.examples}
        was, then = _lesson_text(earlier), _lesson_text(left)
        text = {field: was[field] if was[field] != then[field] else now[field] for field in now}
        if text != now:
            await self.lessons.refine(lesson_id, f"{reason}: what it changed of v{earlier['version']} restored", **text)
        was_links, then_links = _links(earlier), _links(left)
        held = {rel.target for rel in current.relationships}
        for target in sorted(then_links.keys() - was_links.keys()):  # made by the changes: unmade
            if target in held:
                await self.lessons.unlink(lesson_id, target)
        changed = {t for t in was_links.keys() & then_links.keys() if was_links[t] != then_links[t]}
        for target in sorted(changed & held):  # a type or a weight the changes changed: made again below
            await self.lessons.unlink(lesson_id, target)
            held.discard(target)
        for target in sorted((was_links.keys() - then_links.keys()) | changed):  # as it was before them
            rel = was_links[target]
            if target not in held and target != lesson_id and await self.lessons.exists(target):
                await self.lessons.link(lesson_id, target, rel.get("type", "related"), rel.get("weight", 0.5),
                                        rel.get("context"))

    async def query(self, text: str, limit: int = 10, project_path: str | None = None):
        """Lessons for a situation (see Lessons.query), the query attributed to the project at
        `project_path` when it is known."""
        project = await self.context.find_project(project_path) if project_path else None
        return await self.lessons.query(text, limit, project.project_id if project else None)

    async def ranked(self, text: str, limit: int = 10, project_path: str | None = None,
                     weights: dict | None = None, reinforcement: dict | None = None):
        """Lessons for a situation with their score parts (see Lessons.ranked)."""
        project = await self.context.find_project(project_path) if project_path else None
        return await self.lessons.ranked(text, limit, project.project_id if project else None, weights,
                                         reinforcement)

    async def count(self, table: str) -> int:
        return (await self.db.fetchone(f"SELECT count(*) FROM {table}"))[0]
