"""Reinforced patterns: their rows, the counts ranking reads, and what pattern reinforcement observes.

A pattern row is written by the REM run that found it (inside the run's recorded transaction, so
`rem undo --run` takes it back) and read by `patterns list|explain` and by ranking
(`reinforcement_counts`). The observations are read-only views of the context history of every
project and of `decision_observations` (written by `Contexts.save`).
"""

from __future__ import annotations

import json
from typing import NamedTuple

from mgcp.errors import PatternNotFoundError
from mgcp.models import PatternMember, ReinforcedPattern
from mgcp.persistence.database import Database, dumps, utcnow


def pattern_from_row(row) -> ReinforcedPattern:
    d = dict(row)
    return ReinforcedPattern(**{**d, "derived_from": json.loads(d["derived_from"] or "[]")})


class PatternRow(NamedTuple):
    """A pattern as stored: `ReinforcedPattern`'s fields, `derived_from` its JSON text."""

    id: str
    cluster_key: str
    category: str
    text: str
    lesson_id: str | None
    canonical: str
    reinforcement_count: int
    last_reinforced_at: str
    derived_from: str
    derived_via: str
    created_at: str
    updated_at: str


class Patterns:
    def __init__(self, db: Database):
        self.db = db

    async def rows(self) -> dict[str, PatternRow]:
        """Every pattern by cluster key, as stored (`derived_from` its JSON text)."""
        rows = await self.db.fetchall_tuples(f"SELECT {', '.join(PatternRow._fields)} FROM reinforced_patterns")
        return {row[1]: PatternRow(*row) for row in rows}

    async def mark(self) -> str:
        """A value every write to the patterns replaces (see migration 0017)."""
        row = await self.db.fetchone("SELECT mark FROM change_marks WHERE name = 'reinforced_patterns'")
        return f"reinforced_patterns:{row[0] if row else None}"

    async def save(self, patterns: list[ReinforcedPattern]) -> None:
        """Insert the patterns, or replace the rows with their ids (recorded inside `recording()`)."""
        await self.db.upsert_many("reinforced_patterns", [
            {**p.model_dump(), "derived_from": dumps(p.derived_from)} for p in patterns])

    async def repoint(self, pattern_id: str, gone: list[str], kept: str) -> None:
        """The pattern reinforces (and stands by) `kept` where it named a lesson among `gone`
        (recorded inside `recording()`, so an undo puts it back)."""
        row = await self.db.row("reinforced_patterns", {"id": pattern_id})
        if row is None:
            return
        values = {column: kept for column in ("lesson_id", "canonical") if row[column] in gone}
        if values:
            await self.db.update("reinforced_patterns", {"id": pattern_id}, {**values, "updated_at": utcnow()})

    async def reinforcement_counts(self, lesson_ids: list[str]) -> dict[str, int]:
        """Each lesson's reinforcement count (the largest of the patterns reinforcing it); lessons
        never reinforced are left out."""
        rows = await self.db.fetchall_in(
            """SELECT lesson_id, max(reinforcement_count) AS n FROM reinforced_patterns
               WHERE lesson_id IN ({marks}) GROUP BY lesson_id""", lesson_ids)
        return {r["lesson_id"]: r["n"] for r in rows if r["n"] > 0}

    async def list(self, limit: int = 50, categories: list[str] | None = None,
                   since: str | None = None) -> list[ReinforcedPattern]:
        """Patterns by count (highest first), then most recently reinforced; `since`: reinforced at
        or after that ISO timestamp."""
        sql, params = "SELECT * FROM reinforced_patterns WHERE reinforcement_count > 0", []
        if categories:
            sql += f" AND category IN ({','.join('?' * len(categories))})"
            params += categories
        if since:
            sql += " AND last_reinforced_at >= ?"
            params.append(since)
        sql += " ORDER BY reinforcement_count DESC, last_reinforced_at DESC, id LIMIT ?"
        return [pattern_from_row(r) for r in await self.db.fetchall(sql, [*params, limit])]

    async def get(self, ident: str) -> ReinforcedPattern:
        """The pattern with this id, or the one reinforcing the lesson with this id (its highest)."""
        row = await self.db.fetchone("SELECT * FROM reinforced_patterns WHERE id = ?", [ident])
        if row is None:
            row = await self.db.fetchone(
                """SELECT * FROM reinforced_patterns WHERE lesson_id = ?
                   ORDER BY reinforcement_count DESC, id LIMIT 1""", [ident])
        if row is None or row["reinforcement_count"] <= 0:
            known = await self.db.fetchone("SELECT 1 FROM lessons WHERE id = ?", [ident])
            raise PatternNotFoundError(
                f"lesson {ident!r} has not been reinforced (no pattern holds it)" if known
                else f"no reinforced pattern or lesson with id {ident!r} (see `mgcp patterns list`)")
        return pattern_from_row(row)

    async def superseded_into(self, lesson_id: str) -> list[PatternMember]:
        """The lessons superseded by this one, oldest change first."""
        rows = await self.db.fetchall(
            """SELECT l.id, l.action, c.status, c.changed_at FROM lesson_lifecycle c
               JOIN lessons l ON l.id = c.lesson_id
               WHERE c.superseded_by = ? AND c.status = 'superseded' ORDER BY c.changed_at, l.id""", [lesson_id])
        return [PatternMember(id=r["id"], status=r["status"], superseded_at=r["changed_at"], action=r["action"])
                for r in rows]

    # -- what the operation observes (read by mgcp.persistence.pattern_observations) -------------

    async def observations_mark(self) -> tuple:
        """How many decisions sessions stated, and the newest one's row: a new statement changes it."""
        return tuple(await self.db.fetchone("SELECT count(*), max(rowid) FROM decision_observations"))

    async def project_paths(self) -> dict[str, str]:
        rows = await self.db.fetchall("SELECT project_id, project_path FROM project_contexts")
        return {r["project_id"]: r["project_path"] for r in rows}
