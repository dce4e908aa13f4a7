"""Lessons, their versions, lifecycle, links and retrieval.

Versioning contract: `lesson_versions` holds one row per version, the current
one included. Adding writes version 1; refining N to N+1 writes the reason and session id on row N
and inserts row N+1, in the same transaction as the update of `lessons`. The search index is kept in
step in that transaction too.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import sys
from operator import itemgetter
from typing import Any

from mgcp import quality, ranking
from mgcp.collector import collector_paused
from mgcp.errors import DatabaseError, InvalidInputError, NotFoundError
from mgcp.models import Lesson, LessonLink, LessonRow, LessonStatus, LessonUse, LessonVersion, Relationship
from mgcp.persistence.columns import json_list as _json_list
from mgcp.persistence.columns import relationships as _relationships
from mgcp.persistence.columns import tags as _tags
from mgcp.persistence import migrate
from mgcp.persistence.database import Database, dumps, utcnow
from mgcp.persistence.queue_reads import QueueReads
from mgcp.persistence.recall_data import NOT_COUNTED, SEARCH
from mgcp.text import CODING_STOP_WORDS, GENERIC_WORDS, Memo, query_terms, unspaced
from mgcp.validation import (MAX_SHORT, MAX_TAGS, check_lesson_id, check_list, check_query, check_session_id,
                             check_text, redacted)

LESSON_SELECT = """
SELECT l.*, COALESCE(c.status, 'active') AS status, c.superseded_by, c.project_id AS lc_project_id,
    COALESCE(t.kind, 'pattern') AS kind, COALESCE(t.confidence, 0.8) AS confidence,
    COALESCE(s.helped, 0) AS helped, COALESCE(s.failed, 0) AS failed, COALESCE(s.streak, 0) AS streak
FROM lessons l LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id
    LEFT JOIN lesson_traits t ON t.lesson_id = l.id AND t.version = l.version
    LEFT JOIN lesson_outcome_stats s ON s.lesson_id = l.id
"""


def check_kind(kind: str | None) -> str | None:
    if kind is not None and kind not in quality.KINDS:
        raise InvalidInputError(f"unknown kind {kind!r}; allowed: {', '.join(quality.KINDS)}")
    return kind


def check_confidence(confidence: float | None) -> float | None:
    if confidence is None:
        return None
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise InvalidInputError(f"confidence must be a number from 0 to 1; got {confidence!r}")
    return float(confidence)


CANDIDATES_PER_RESULT = 4  # text matches reranked per result asked for
MIN_CANDIDATES = 20


def lesson_from_row(row, tags=_tags) -> Lesson:
    """The lesson of a LESSON_SELECT row, validated in one call (its relationships with it).
    `tags`: the reader of the tags column (`Lessons.list` passes a memo of it: tags lists repeat
    from lesson to lesson, and validation copies the list into each lesson)."""
    d = dict(row)
    return Lesson.model_validate({
        "id": d["id"], "trigger": d["trigger"], "action": d["action"], "rationale": d["rationale"],
        "examples": _json_list(d["examples"]), "version": d["version"],
        "created_at": d["created_at"], "last_refined": d["last_refined"], "last_used": d["last_used"],
        "usage_count": d["usage_count"], "tags": tags(d["tags"]), "parent_id": d["parent_id"],
        "relationships": _relationships(d["relationships"]),
        "status": d["status"], "superseded_by": d["superseded_by"], "project_id": d["lc_project_id"],
        "kind": d["kind"], "confidence": d["confidence"], "helped": d["helped"], "failed": d["failed"],
        "failure_streak": d["streak"], "success_rate": ranking.success_rate(d["helped"], d["failed"]),
        "tier": ranking.tier(d["status"], d["helped"], d["usage_count"]),
    })


def _lesson_rows(rows: list[tuple], state: LessonStatus) -> list[LessonRow]:
    """`Lessons.rows`' rows (sorted here, by id) as `LessonRow`s, made as the tuples they are with
    every field given (the named tuple's constructor is a Python call per row). A lesson's parent is one of its links
    (type "parent"), unless a relationship names it already: the REM operations read the hierarchy
    as the explicit relationship it is."""
    rows.sort(key=_first)
    tags = Memo(_tags_of)  # tags lists repeat from lesson to lesson; rows are read-only
    new = tuple.__new__
    return [new(LessonRow, (lesson_id, trigger, action, tags[tags_text],
                            _links(related) if not parent else _with_parent(_links(related), parent, lesson_id),
                            int(version), int(used), created, refined, state))
            for lesson_id, trigger, action, tags_text, related, version, used, created, refined, parent in rows]


def _with_parent(links: tuple[LessonLink, ...], parent: str, lesson_id: str) -> tuple[LessonLink, ...]:
    if parent == lesson_id or any(link.target == parent for link in links):
        return links
    return (*links, LessonLink(parent, "parent"))


# JSON lists as mgcp writes them (`dumps`), their strings free of escapes and control characters:
# their values are then their raw text, split without a parser. Anything else is parsed as JSON.
_STRING = r'"[^"\\\x00-\x1f]*"'
_STRINGS = re.compile(r"\[{s}(?:, {s})*\]".format(s=_STRING))
_ENTRY = (r'\{{"target": {s}, "type": {s}, "weight": -?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?, '
          r'"context": \[(?:{s}(?:, {s})*)?\], "bidirectional": (?:true|false)\}}').format(s=_STRING)
_RELATIONSHIPS = re.compile(r"\[{e}(?:, {e})*\]".format(e=_ENTRY))
_LINK = re.compile(r'\{"target": "([^"]*)", "type": "([^"]*)"')  # an entry's target and type, once matched


def _tags_of(text: str | None) -> list[str]:
    """The tags column (see `columns.tags`)."""
    if text and _STRINGS.fullmatch(text):
        return text[2:-2].split('", "')
    return _tags(text)


def _links(text: str | None) -> tuple[LessonLink, ...]:
    """The links of a relationships column (see `columns.relationships`)."""
    if not text or text == "[]":
        return ()
    if _RELATIONSHIPS.fullmatch(text):
        # each entry opens with its target and type, and no string holds a quote
        new = tuple.__new__
        return tuple([new(LessonLink, pair) for pair in _LINK.findall(text)])
    return tuple(LessonLink(str(r["target"]), str(r.get("type", "related"))) for r in _relationships(text))


_first = itemgetter(0)  # a row's first value (a key C calls, no Python frame per row)


def version_from_row(row) -> LessonVersion:
    d = dict(row)
    reconstructed = bool(d["reconstructed"])
    return LessonVersion(
        lesson_id=d["lesson_id"], version=d["version"], trigger=d["trigger"],
        action=None if reconstructed else d["action"], rationale=d["rationale"],
        tags=_tags(d["tags"]), timestamp=d["timestamp"],
        refinement_reason=d["refinement_reason"], session_id=d["session_id"],
        reconstructed=reconstructed, kind=d.get("t_kind"), confidence=d.get("t_confidence"),
    )


def _matching(text: str, topical: bool = False) -> str:
    """The FTS5 expression of a query's terms, OR-ed ("" when it has none). The index reads a run
    of Chinese or Japanese characters, written without spaces, as one word: such a term matches a
    run it begins (a prefix query). `topical`: words every coding task uses ("add", "fix", "use",
    `text.GENERIC_WORDS` and `text.CODING_STOP_WORDS`) are left out while others remain."""
    terms = list(dict.fromkeys(query_terms(text)))
    if topical:
        terms = [w for w in terms if w not in GENERIC_WORDS and w not in CODING_STOP_WORDS] or terms
    return " OR ".join(f'"{w}"' + ("*" if unspaced(w) else "") for w in terms)


class Lessons:
    """Lessons: versions, lifecycle, links, the search index and retrieval."""

    def __init__(self, db: Database):
        self.db = db

    async def get(self, lesson_id: str) -> Lesson:
        row = await self.db.fetchone(LESSON_SELECT + " WHERE l.id = ?", [lesson_id])
        if row is None:
            raise NotFoundError(f"no lesson with id {lesson_id!r}")
        lesson = lesson_from_row(row)
        lesson.importance = quality.importance(lesson.trigger, lesson.action, lesson.rationale, lesson.tags)
        return lesson

    async def exists(self, lesson_id: str) -> bool:
        return await self.db.fetchone("SELECT 1 FROM lessons WHERE id = ?", [lesson_id]) is not None

    async def list(self, tag: str | None = None, status: str | None = "active", after: str | None = None,
                   limit: int | None = None) -> list[Lesson]:
        """Lessons by id; `tag` matches whatever the case of its ASCII letters ("React" finds lessons
        tagged "react"); with `after`, only ids after it; with `limit`, at most that many."""
        sql, params = LESSON_SELECT + " WHERE 1", []
        if after is not None:
            sql += " AND l.id > ?"
            params.append(after)
        if status:
            sql += " AND COALESCE(c.status, 'active') = ?"
            params.append(status)
        if tag:
            # a JSON list as it is; any other value (comma-separated words) as mgcp reads it
            sql += """ AND EXISTS (SELECT 1 FROM json_each(CASE WHEN l.tags LIKE '[%' AND json_valid(l.tags)
                                                       THEN l.tags ELSE mgcp_tags(l.tags) END)
                                 WHERE lower(json_each.value) = lower(?))"""
            params.append(tag)
        tags = Memo(_tags)
        with collector_paused():
            return [lesson_from_row(r, tags.__getitem__) for r in await self.db.fetchall(
                sql + " ORDER BY l.id LIMIT ?", [*params, -1 if limit is None else limit])]

    async def uses(self, skip: tuple[int, int] | None = None) -> list[LessonUse]:
        """Every active lesson's use (see `LessonUse`), by id; with `skip` (low, high), but those
        whose usage count is from low to high. The lessons are read in one scan of their table,
        beside the few rows of the lifecycle, traits and outcome tables (joined row by row in id
        order, the same read takes three times as long at 100k lessons)."""
        where, params = "", []
        if skip is not None:  # a count stored as text or NULL is read (it is never in the range)
            where, params = " WHERE usage_count IS NULL OR NOT (usage_count BETWEEN ? AND ?)", list(skip)
        async with self.db.snapshot():
            gone = {lid for (lid,) in await self.db.fetchall(
                "SELECT lesson_id FROM lesson_lifecycle WHERE COALESCE(status, 'active') != 'active'")}
            confidence = dict(await self.db.fetchall(
                """SELECT t.lesson_id, t.confidence FROM lesson_traits t
                   JOIN lessons l ON l.id = t.lesson_id AND l.version = t.version
                   WHERE t.confidence IS NOT NULL"""))
            helped = dict(await self.db.fetchall(
                "SELECT lesson_id, helped FROM lesson_outcome_stats WHERE helped IS NOT NULL"))
            rows = await self.db.fetchall_tuples(
                "SELECT id, trigger, action, version, usage_count, created_at, last_refined, last_used FROM lessons"
                + where, params)
        new = tuple.__new__  # each made as the tuple it is, every field given (see `_lesson_rows`)
        with collector_paused():
            uses = [new(LessonUse, (lesson_id, trigger, action, int(version or 1), int(used or 0), created,
                                    refined or created, last_used, float(confidence.get(lesson_id, 0.8)),
                                    int(helped.get(lesson_id, 0))))
                    for lesson_id, trigger, action, version, used, created, refined, last_used in rows
                    if lesson_id not in gone]
        uses.sort(key=_first)
        return uses

    async def rows(self, status: str = "active") -> list[LessonRow]:
        """The lessons of a status as the REM operations read them (see `LessonRow`), by id: the
        values `list` gives, without building a model per lesson."""
        # The table is scanned in its own order and sorted here (reading it in the order of the id
        # index costs a lookup per row; ids are unique and Python orders them as SQLite does).
        with collector_paused():  # a hundred thousand rows of objects, no reference cycles
            rows = await self.db.fetchall_tuples(
                """SELECT l.id, l.trigger, l.action, l.tags, l.relationships, l.version, l.usage_count,
                          l.created_at, l.last_refined, l.parent_id
                   FROM lessons l NOT INDEXED LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id
                   WHERE COALESCE(c.status, 'active') = ?""", [status])
            return await asyncio.to_thread(_lesson_rows, rows, LessonStatus(status))  # off the event loop

    async def add(self, lesson_id: str, trigger: str, action: str, rationale: str | None = None,
                         tags: list[str] | None = None, parent_id: str | None = None,
                         examples: list[Any] | None = None, session_id: str | None = None,
                         kind: str | None = None, confidence: float | None = None) -> Lesson:
        check_lesson_id(lesson_id)
        kind, confidence = check_kind(kind), check_confidence(confidence)
        trigger = check_text("trigger", trigger, limit=MAX_SHORT)
        action = check_text("action", action)
        rationale = check_text("rationale", rationale, required=False)
        tags = check_list("tag", tags, count=MAX_TAGS)
        session_id = check_session_id(session_id)
        if parent_id is not None:
            check_lesson_id(parent_id, "parent id")
        now = utcnow()
        async with self.db.transaction():
            if await self.exists(lesson_id):
                raise InvalidInputError(f"a lesson with id {lesson_id!r} already exists")
            if parent_id and not await self.exists(parent_id):
                raise NotFoundError(f"no parent lesson with id {parent_id!r}")
            tags_json = dumps(sorted(set(tags or [])))
            await self.db.insert("lessons", {
                "id": lesson_id, "trigger": trigger, "action": action, "rationale": rationale,
                "examples": dumps(examples or []), "version": 1, "created_at": now,
                "last_refined": now, "tags": tags_json, "parent_id": parent_id,
            })
            await self.db.insert("lesson_versions", {
                "lesson_id": lesson_id, "version": 1, "trigger": trigger, "action": action,
                "rationale": rationale, "tags": tags_json, "timestamp": now, "session_id": session_id,
            })
            await self.write_traits(lesson_id, 1, kind, confidence, now)
            await self.reindex(lesson_id)
        return await self.get(lesson_id)

    async def write_traits(self, lesson_id: str, version: int, kind: str | None, confidence: float | None,
                           now: str) -> None:
        """Record version `version`'s kind and confidence (None: the defaults)."""
        await self.db.insert("lesson_traits", {
            "lesson_id": lesson_id, "version": version, "kind": kind or quality.DEFAULT_KIND,
            "confidence": quality.DEFAULT_CONFIDENCE if confidence is None else confidence, "created_at": now})

    async def refine(self, lesson_id: str, reason: str, trigger: str | None = None,
                            action: str | None = None, rationale: str | None = None,
                            tags: list[str] | None = None, session_id: str | None = None,
                            examples: list[Any] | None = None,
                            relationships: list[dict] | None = None,
                            kind: str | None = None, confidence: float | None = None) -> Lesson:
        """Write version N+1. `reason` says why version N was insufficient. Kind and confidence
        carry over unless given."""
        reason = check_text("reason", reason, limit=MAX_SHORT)
        kind, confidence = check_kind(kind), check_confidence(confidence)
        trigger = check_text("trigger", trigger, required=False, limit=MAX_SHORT)
        action = check_text("action", action, required=False)
        rationale = check_text("rationale", rationale, required=False)
        tags = check_list("tag", tags, count=MAX_TAGS)
        session_id = check_session_id(session_id)
        if trigger == "" or action == "":
            raise InvalidInputError("trigger and action must not be empty")
        async with self.db.transaction():
            current = await self.get(lesson_id)
            new = {
                "trigger": trigger if trigger is not None else current.trigger,
                "action": action if action is not None else current.action,
                "rationale": rationale if rationale is not None else current.rationale,
                "tags": dumps(sorted(set(tags)) if tags is not None else current.tags),
            }
            unchanged = (new["trigger"] == current.trigger and new["action"] == current.action
                         and new["rationale"] == current.rationale
                         and new["tags"] == dumps(current.tags) and examples is None
                         and relationships is None)
            traits = {"kind": kind if kind is not None else current.kind,
                      "confidence": confidence if confidence is not None else current.confidence}
            if unchanged and (traits["kind"], traits["confidence"]) == (current.kind, current.confidence):
                raise InvalidInputError("the refinement changes nothing; give a new trigger, action, rationale, "
                                        "tags, kind or confidence")
            now = utcnow()
            row = await self.db.fetchone(
                "SELECT id FROM lesson_versions WHERE lesson_id = ? AND version = ?",
                [lesson_id, current.version],
            )
            if row is None:  # a lesson no backfill reached (an older mgcp wrote it after the backfill ran)
                await self._refuse_a_gap(current)
                await self._backfill(current, reason, session_id)
            else:
                await self.db.update("lesson_versions", {"id": row["id"]},
                                   {"refinement_reason": reason, "session_id": session_id})
            version = current.version + 1
            await self.db.insert("lesson_versions", {
                "lesson_id": lesson_id, "version": version, **new, "timestamp": now,
            })
            values = {**new, "version": version, "last_refined": now}
            if examples is not None:
                values["examples"] = dumps(examples)
            if relationships is not None:
                values["relationships"] = dumps(relationships)
            await self.db.update("lessons", {"id": lesson_id}, values)
            await self.write_traits(lesson_id, version, traits["kind"], traits["confidence"], now)
            await self.reindex(lesson_id, new)
        tags = json.loads(new["tags"])
        return current.model_copy(update={
            **{k: v for k, v in new.items() if k != "tags"}, "tags": tags,
            "version": version, "last_refined": now, **traits,
            "importance": quality.importance(new["trigger"], new["action"], new["rationale"], tags),
            **({"examples": examples} if examples is not None else {}),
            **({"relationships": [Relationship(**r) for r in relationships]} if relationships is not None else {}),
        })

    async def _refuse_a_gap(self, current: Lesson) -> None:
        """A lesson whose history lacks versions below its current one (it has rows, but not
        1..N-1) is damaged, not merely unversioned: refining it would hide the gap behind rebuilt
        rows, so it is refused, and `mgcp db check` says what to do (as it says for such a lesson)."""
        held = {r[0] for r in await self.db.fetchall_tuples(
            "SELECT version FROM lesson_versions WHERE lesson_id = ?", [current.id])}
        missing = [v for v in range(1, current.version) if v not in held]
        if held and missing:
            shown = ", ".join(map(str, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise DatabaseError(f"lesson {current.id}'s history is incomplete (version {shown} missing from "
                                "lesson_versions); nothing was changed. `mgcp db check` says what to do")

    async def _backfill(self, current: Lesson, reason: str, session_id: str | None) -> None:
        """The rows of a lesson that has none for its current version, as the backfill writes them:
        versions 1..N-1 rebuilt from the legacy "[vK]" markers of its rationale (action text lost,
        marked reconstructed; a row already there is kept), then version N as it stands, with the
        reason for the refinement being made."""
        from mgcp.persistence.migrate import legacy_versions

        tags = dumps(current.tags)
        held = {r[0] for r in await self.db.fetchall_tuples(
            "SELECT version FROM lesson_versions WHERE lesson_id = ?", [current.id])}
        for version, rationale, made_next in legacy_versions(current.version, current.rationale):
            if version not in held:
                await self.db.insert("lesson_versions", {
                    "lesson_id": current.id, "version": version, "trigger": current.trigger, "action": "",
                    "rationale": rationale, "tags": tags, "timestamp": current.created_at,
                    "refinement_reason": made_next, "reconstructed": 1,
                })
        await self.db.insert("lesson_versions", {
            "lesson_id": current.id, "version": current.version, "trigger": current.trigger,
            "action": current.action, "rationale": current.rationale, "tags": tags,
            "timestamp": current.last_refined, "refinement_reason": reason, "session_id": session_id,
        })

    async def import_with_history(self, lesson: Lesson, versions: list[LessonVersion]) -> None:
        """Write a lesson with its full history exactly as given (timestamps included): for
        imports and the demo. The last version must equal the lesson's current text."""
        check_lesson_id(lesson.id)
        for v in versions:
            check_text("trigger", v.trigger, limit=MAX_SHORT)
            check_text("action", v.action)
            check_text("rationale", v.rationale, required=False)
        if not versions or versions[-1].version != lesson.version or versions[-1].action != lesson.action:
            raise InvalidInputError(f"lesson {lesson.id}: its last version must be its current state")
        async with self.db.transaction():
            if await self.exists(lesson.id):
                raise InvalidInputError(f"a lesson with id {lesson.id!r} already exists")
            await self.db.insert("lessons", {
                "id": lesson.id, "trigger": lesson.trigger, "action": lesson.action,
                "rationale": lesson.rationale, "examples": dumps(lesson.examples),
                "version": lesson.version, "created_at": lesson.created_at,
                "last_refined": lesson.last_refined, "last_used": lesson.last_used,
                "usage_count": lesson.usage_count, "tags": dumps(lesson.tags),
                "parent_id": lesson.parent_id,
                "relationships": dumps([r.model_dump() for r in lesson.relationships]),
            })
            for v in versions:
                await self.db.insert("lesson_versions", {
                    "lesson_id": lesson.id, "version": v.version, "trigger": v.trigger,
                    "action": v.action, "rationale": v.rationale, "tags": dumps(v.tags),
                    "timestamp": v.timestamp, "refinement_reason": v.refinement_reason,
                    "session_id": v.session_id,
                })
                if v.kind is not None or v.confidence is not None or v.version == lesson.version:
                    last = v.version == lesson.version
                    await self.write_traits(lesson.id, v.version, lesson.kind if last else v.kind,
                                            lesson.confidence if last else v.confidence, v.timestamp)
            await self.reindex(lesson.id)

    async def versions(self, lesson_id: str) -> list[LessonVersion]:
        await self.get(lesson_id)
        rows = await self.db.fetchall(
            """SELECT v.*, t.kind AS t_kind, t.confidence AS t_confidence FROM lesson_versions v
               LEFT JOIN lesson_traits t ON t.lesson_id = v.lesson_id AND t.version = v.version
               WHERE v.lesson_id = ? ORDER BY v.version""", [lesson_id])
        return [version_from_row(r) for r in rows]

    async def real_version_pairs(self) -> list[tuple[LessonVersion, LessonVersion]]:
        """Consecutive (older, newer) versions where both texts are real (never reconstructed)."""
        rows = await self.db.fetchall(
            """SELECT * FROM lesson_versions WHERE reconstructed = 0 ORDER BY lesson_id, version""")
        versions = [version_from_row(r) for r in rows]
        return [(a, b) for a, b in zip(versions, versions[1:])
                if a.lesson_id == b.lesson_id and b.version == a.version + 1]

    async def text_changed_at(self, lesson_id: str) -> str | None:
        """When the lesson's trigger or action was last changed: the time of its latest version whose
        trigger or action differs from the version before it (None: never, since version 1)."""
        rows = await self.db.fetchall_tuples(
            "SELECT trigger, action, timestamp FROM lesson_versions WHERE lesson_id = ? ORDER BY version",
            [lesson_id])
        return next((now[2] for before, now in zip(rows[::-1][1:], rows[::-1]) if before[:2] != now[:2]), None)

    async def set_lifecycle(self, lesson_id: str, status: LessonStatus, reason: str | None = None,
                            superseded_by: str | None = None) -> None:
        """Archive, delete (softly), supersede or reactivate a lesson; its rows and history stay."""
        reason = check_text("reason", reason, required=False, limit=MAX_SHORT)
        await self.get(lesson_id)
        await self.db.upsert("lesson_lifecycle", {"lesson_id": lesson_id}, {
            "status": status.value, "superseded_by": superseded_by, "reason": reason, "changed_at": utcnow(),
        })

    async def link(self, source: str, target: str, rel_type: str = "related",
                           weight: float = 0.5, context: list[str] | None = None) -> bool:
        """Link two lessons both ways, like the legacy format. False when already linked."""
        if source == target:
            raise InvalidInputError("a lesson cannot be linked to itself")
        async with self.db.transaction():
            a, b = await self.get(source), await self.get(target)
            added = False
            for lesson, other in ((a, b), (b, a)):
                rels = [r.model_dump() for r in lesson.relationships]
                if any(r["target"] == other.id for r in rels):
                    continue
                rels.append({"target": other.id, "type": rel_type, "weight": weight,
                             "context": context or [], "bidirectional": True})
                await self.db.update("lessons", {"id": lesson.id}, {"relationships": dumps(rels)})
                added = True
        return added

    async def relate(self, source: str, target: str, rel_type: str) -> tuple[bool, str | None]:
        """What a person asks for with `lesson link`: the two lessons linked both ways with this type,
        in one transaction. Already linked with another type, the link takes this one (weight and
        context kept). Returns (added, the type it had when it was changed, else None)."""
        async with self.db.transaction():
            added = await self.link(source, target, rel_type)  # adds whichever half is missing
            a, b = await self.get(source), await self.get(target)
            previous = None
            for lesson, other in ((a, b), (b, a)):
                rels = [r.model_dump() for r in lesson.relationships]
                changed = [r for r in rels if r["target"] == other.id and r["type"] != rel_type]
                for r in changed:
                    previous = previous or r["type"]
                    r["type"] = rel_type
                if changed:
                    await self.db.update("lessons", {"id": lesson.id}, {"relationships": dumps(rels)})
            return added and previous is None, previous

    async def set_relationships(self, lesson_id: str, relationships: list[dict]) -> None:
        await self.db.update("lessons", {"id": lesson_id}, {"relationships": dumps(relationships)})

    async def linking_to(self, lesson_id: str) -> list[Lesson]:
        """The lessons holding a link to this one."""
        rows = await self.db.fetchall(
            LESSON_SELECT + """ WHERE EXISTS (SELECT 1 FROM json_each(l.relationships)
                                WHERE json_extract(json_each.value, '$.target') = ?)""",
            [lesson_id])
        return [lesson_from_row(r) for r in rows]

    async def reindex(self, lesson_id: str, row: dict | None = None) -> None:
        """Put the lesson's current text into the search index (`row`: the text if known). The index
        holds active lessons only: triggers on `lesson_lifecycle` take a lesson out when it leaves
        `active` and put it back when it returns (migration 0010)."""
        if row is None:
            row = await self.db.fetchone("SELECT * FROM lessons WHERE id = ?", [lesson_id])
        doc = await self.db.fetchone("SELECT id FROM lesson_search_docs WHERE lesson_id = ?", [lesson_id])
        if doc is None:
            cur = await self.db.conn.execute("INSERT INTO lesson_search_docs (lesson_id) VALUES (?)", [lesson_id])
            doc_id = cur.lastrowid
        else:
            doc_id = doc["id"]
            await self.db.conn.execute("DELETE FROM lesson_search WHERE rowid = ?", [doc_id])
        if row is None:  # the lesson is gone (an undone add): its index entry goes with it
            await self.db.conn.execute("DELETE FROM lesson_search_docs WHERE id = ?", [doc_id])
        elif await self.db.fetchone("SELECT 1 FROM lesson_lifecycle WHERE lesson_id = ? AND status != 'active'",
                                    [lesson_id]) is None:
            await self.db.conn.execute(
                "INSERT INTO lesson_search (rowid, trigger, action, rationale, tags) VALUES (?, ?, ?, ?, ?)",
                [doc_id, row["trigger"], row["action"], row["rationale"] or "", row["tags"]])

    async def query(self, text: str, limit: int = 10, project_id: str | None = None) -> list[tuple[Lesson, float]]:
        """`ranked` without the score parts: (lesson, score) pairs, best first."""
        return [(lesson, score) for lesson, score, _ in await self.ranked(text, limit, project_id)]

    async def ranked(self, text: str, limit: int = 10, project_id: str | None = None,
                     weights: dict | None = None, reinforcement: dict | None = None) -> list[tuple[Lesson, float, dict]]:
        """Active lessons for a situation, best first, each with its score and the score's parts
        (mgcp.ranking: text relevance with confidence, use, success rate, importance and tier).
        The candidates are the CANDIDATES_PER_RESULT x `limit` (at least MIN_CANDIDATES) best text
        matches (FTS5 BM25; trigger and action weigh twice as much as the rationale and the tags:
        measured on benchmarks/quality). Each returned lesson's usage count and last_used advance,
        and the query is logged for the staleness scan. `reinforcement` (the config's, when its boost
        is on) adds the boost of reinforced lessons (`ranking.boosted`). The log keeps no secret:
        what looks like a credential in the query is logged as "[redacted]"."""
        match = self.match_expression(check_query(text))
        size = max(limit * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
        candidates = await self.db.fetchall(SEARCH, [match, size])
        best = max((float(r["relevance"]) for r in candidates), default=0.0)
        scored = []
        for row in candidates:
            value, parts, importance, _ = ranking.score(row, best, _tags(row["tags"]), weights, reinforcement)
            scored.append((value, row["id"], parts, importance))
        scored.sort(key=lambda item: ranking.order_key(item[0], item[3], item[1]))
        scored = scored[:limit]
        ids = [item[1] for item in scored]
        now = utcnow()
        try:
            async with self.db.transaction():
                await self.db.conn.executemany(
                    "UPDATE lessons SET usage_count = usage_count + 1, last_used = ? WHERE id = ?",
                    [(now, i) for i in ids])
                await self.db.insert("query_log", {"query": redacted(text), "project_id": project_id,
                                                 "result_ids": dumps(ids), "created_at": now})
        except sqlite3.OperationalError as exc:  # counters, not content: a full disk leaves them behind
            if self.db.in_transaction or not migrate.out_of_space(exc, self.db.path):
                raise  # inside a caller's transaction, which SQLite rolled back whole: theirs to handle
            print(NOT_COUNTED, file=sys.stderr)
        rows = {r["id"]: r for r in await self.db.fetchall(
            LESSON_SELECT + f" WHERE l.id IN ({', '.join('?' * len(ids))})", ids)} if ids else {}
        results = []
        for score, lesson_id, parts, importance in scored:
            lesson = lesson_from_row(rows[lesson_id])
            lesson.importance = importance
            results.append((lesson, score, parts))
        return results

    @staticmethod
    def match_expression(text: str, topical: bool = False) -> str:
        """The FTS5 query for a situation in words (its terms, OR-ed; `topical`: see `_matching`)."""
        match = _matching(text, topical)
        if not match:
            raise InvalidInputError("the query has no words to search for (common words such as "
                                    "'a' or 'the' match nothing on their own)")
        return match

    async def search(self, text: str, limit: int = 20) -> list[Lesson]:
        """The best text matches among active lessons, read only (no use counted, nothing logged)."""
        match = _matching(text)
        if not match:
            return []
        ids = [r["id"] for r in await self.db.fetchall(SEARCH, [match, limit])]
        if not ids:
            return []
        rows = await self.db.fetchall(LESSON_SELECT + f" WHERE l.id IN ({', '.join('?' * len(ids))})", ids)
        order = {lesson_id: n for n, lesson_id in enumerate(ids)}
        return sorted((lesson_from_row(r) for r in rows), key=lambda lesson: order[lesson.id])

    async def same_text(self, trigger: str, action: str) -> Lesson | None:
        """The active lesson whose trigger and action equal these once normalized
        (mgcp.quality.normalized), the oldest if several, or None."""
        found = await QueueReads(self.db).same_texts([(trigger, action)])
        return await self.get(found[(trigger, action)]) if found else None

    async def log_query(self, text: str, project_id: str | None, at: str) -> None:
        """Record a query without running it (imports and the demo)."""
        await self.db.insert("query_log", {"query": text, "project_id": project_id,
                                         "result_ids": "[]", "created_at": at})

    async def recent_queries(self, since: str) -> list[str]:
        rows = await self.db.fetchall("SELECT query FROM query_log WHERE created_at >= ?", [since])
        return [r["query"] for r in rows]

    async def content_digest(self, mark: str = "lesson_content") -> str:
        """A value that changes with every write to what the operations that compare lessons read
        of the lessons: ids, status, versions, triggers, actions, tags and links, but not their use
        (counts, times), which every query changes. `mark="lesson_use"`: one that also changes
        with their use, kind, confidence, outcomes and the query log (what the staleness scan
        reads). Triggers replace the mark by a random value in the transaction of each write
        (`change_marks`), so reading it costs one row however many lessons there are."""
        row = await self.db.fetchone("SELECT mark FROM change_marks WHERE name = ?", [mark])
        if row is None:
            raise ValueError(f"unknown change mark {mark!r}")
        return f"{mark}:{row[0]}"

    async def first_query_since(self, since: str) -> str | None:
        """When the oldest query logged at or after `since` was logged (None: no such query)."""
        row = await self.db.fetchone("SELECT min(created_at) FROM query_log WHERE created_at >= ?", [since])
        return row[0] if row else None

    async def unlink(self, source: str, target: str) -> list[str]:
        """Remove the link between two lessons, both directions, in one transaction. Returns the
        relationship types removed (empty when they were not linked)."""
        async with self.db.transaction():
            a, b = await self.get(source), await self.get(target)
            removed: list[str] = []
            for lesson, other in ((a, b), (b, a)):
                rels = [r.model_dump() for r in lesson.relationships]
                kept = [r for r in rels if r["target"] != other.id]
                if len(kept) != len(rels):
                    removed += [r["type"] for r in rels if r["target"] == other.id]
                    await self.db.update("lessons", {"id": lesson.id}, {"relationships": dumps(kept)})
        return list(dict.fromkeys(removed))
