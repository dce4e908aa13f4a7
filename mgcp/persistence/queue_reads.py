"""What a review queue reads to tell which of its findings still hold, as plain rows: the project a
path names, and the state of the lessons the findings read (see `records.FindingMark`).

Nothing here builds a pydantic model, so `rem status` (the schedule and how many findings wait)
never imports pydantic. `Lessons.same_text`, the check at write, shares `same_texts`.
"""

from __future__ import annotations

from collections.abc import Iterable

from mgcp import quality
from mgcp.persistence import sessions
from mgcp.persistence.columns import relationships
from mgcp.persistence.database import Database, utcnow
from mgcp.records import LessonStatus, ProjectRef

SAME_TEXTS_AT_ONCE = 50  # texts looked up in one search by `same_texts`


def same_text_key(trigger: str | None, action: str | None) -> tuple[str, str] | None:
    key = (quality.normalized(trigger), quality.normalized(action))
    return key if key[0] and key[1] else None


class QueueReads:
    def __init__(self, db: Database):
        self.db = db

    async def project(self, path: str) -> ProjectRef:
        """The project at `path`, or (writing nothing) the project it would be, at session 0: its
        id, path and session count, without the rest of its context."""
        row = await self.db.fetchone(sessions.FIND_PROJECT, sessions.find_params(path))
        if row is None:
            row = sessions.new_project(sessions.normalize_path(path), utcnow())
        return ProjectRef(row["project_id"], row["project_path"], int(row["session_count"] or 0))

    async def lesson_states(self, lesson_ids: Iterable[str]) -> dict[str, tuple[int, LessonStatus, bool]]:
        """(version, status, linked) of each of the lessons that exist: what tells whether a
        finding about them still holds, read for many lessons at once. `linked`: whether it has a
        relationship, as `Lessons.get` reads them."""
        rows = await self.db.fetchall_in(
            """SELECT l.id, l.version, COALESCE(c.status, 'active'), l.relationships
               FROM lessons l LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id WHERE l.id IN ({marks})""",
            lesson_ids)
        return {lesson_id: (int(version), LessonStatus(status), bool(relationships(links)))
                for lesson_id, version, status, links in rows}

    async def drafted(self) -> dict[str, str]:
        """The text each answered draft was made from (its action as drafted, normalized:
        mgcp.quality.normalized) -> the id of the finding answered, the first: a decision drafted
        by two operations is made a lesson once, however the first answer edited it."""
        rows = await self.db.fetchall(
            """SELECT id, json_extract(data, '$.draft.action') FROM rem_findings
               WHERE status = 'applied' AND operation IN ('knowledge_extraction', 'pattern_reinforcement')
               AND kind IN ('uncaptured_decision', 'reinforced_draft', 'theme')
               ORDER BY resolved_at, id""")
        found: dict[str, str] = {}
        for finding_id, action in rows:
            text = quality.normalized(action) if isinstance(action, str) else ""
            if text:
                found.setdefault(text, finding_id)
        return found

    async def same_texts(self, texts: Iterable[tuple[str, str]], action_only: bool = False
                         ) -> dict[tuple[str, str], str]:
        """For each (trigger, action), the id of the active lesson whose trigger and action (with
        `action_only`, whose action: a lesson drafted twice under two triggers) equal these once
        normalized (mgcp.quality.normalized), the oldest if several, where there is one. The lessons
        holding the trigger (or the action) as a phrase are found through the search index (a few
        texts per search), then their texts compared."""
        def key_of(trigger: str, action: str):
            return (quality.normalized(action) or None) if action_only else same_text_key(trigger, action)

        column, phrase = ("action", lambda key: key) if action_only else ("trigger", lambda key: key[0])
        keys = {t: key_of(*t) for t in set(texts)}
        wanted = sorted({key for key in keys.values() if key is not None})
        found: dict = {}
        for at in range(0, len(wanted), SAME_TEXTS_AT_ONCE):
            phrases = " OR ".join('"{}"'.format(k.replace('"', '""'))
                                  for k in sorted({phrase(key) for key in wanted[at:at + SAME_TEXTS_AT_ONCE]}))
            for lesson_id, trigger, action in await self.db.fetchall(
                    """SELECT l.id, l.trigger, l.action FROM lesson_search
                       JOIN lesson_search_docs d ON d.id = lesson_search.rowid JOIN lessons l ON l.id = d.lesson_id
                       LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id
                       WHERE lesson_search MATCH ? AND COALESCE(c.status, 'active') = 'active'
                       ORDER BY l.created_at, l.id""", [f"{column} : ({phrases})"]):
                found.setdefault(key_of(trigger, action), lesson_id)  # the oldest
        return {t: found[key] for t, key in keys.items() if key in found}
