"""What community detection keeps between cycles (`community_kept`, `community_kept_runs`,
migration 0013; `community_kept_titles`, migration 0016; `community_kept_readings`, migration 0018).

A row per active lesson (see `mgcp.operations.community_detection`, "Kept between runs"), one row
for the settings the state holds under, a row per title of the last run's communities (keyed by
what it was drawn from), and a row per reading of what the titles are drawn from (a binary state
by name, which community detection makes and reads; written only by a run that drew a title). It
is a cache: nothing else refers to it, and deleting it only makes the next run a full one (and read
the texts the readings held). Saving writes only the lesson rows that changed, and drops those of
lessons no longer in it, in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from mgcp.persistence.database import Database


class CommunityKept:
    def __init__(self, db: Database):
        self.db = db

    async def load(self) -> tuple[str, int, dict[str, tuple[str, tuple[str, ...], int, str]], dict[str, str],
                                  dict[str, bytes]] | None:
        """(settings, runs since the last full run, lesson id -> (content, candidates, label,
        edges), sample -> title, name -> reading), or None when nothing is kept."""
        head = await self.db.fetchone("SELECT settings, runs_since_full FROM community_kept_runs WHERE id = 1")
        if head is None:
            return None
        rows = await self.db.fetchall("SELECT lesson_id, content, candidates, label, edges FROM community_kept")
        # every row's candidates read in one go: one JSON document instead of 100k
        candidates = json.loads("[" + ",".join([row[2] for row in rows]) + "]")
        if len(candidates) != len(rows) or not all(isinstance(found, list) for found in candidates):
            candidates = [json.loads(row[2]) for row in rows]  # a row that is not one list: read alone
        lessons = {lid: (content, tuple(found), label, edges)
                   for (lid, content, _, label, edges), found in zip(rows, candidates)}
        titles = dict(await self.db.fetchall("SELECT sample, title FROM community_kept_titles"))
        readings = dict(await self.db.fetchall("SELECT name, state FROM community_kept_readings"))
        return head[0], head[1], lessons, titles, readings

    async def save(self, settings: str, runs_since_full: int,
                   lessons: dict[str, tuple[str, tuple[str, ...], int, str]], titles: dict[str, str],
                   dropped: Collection[str] | None = None, readings: dict[str, bytes] | None = None) -> None:
        """Make the kept state `titles` and `lessons`, in one transaction (a savepoint of the
        caller's, when one is open). `dropped`: None when `lessons` are all the rows; else
        `lessons` are the rows that changed from the kept state and `dropped` the lessons whose
        rows go. `readings`: the readings to write by name (the others stay as they are kept)."""
        async with self.db.transaction():
            if dropped is None:
                await self.db.conn.execute("DELETE FROM community_kept")
            else:
                await self.db.conn.executemany("DELETE FROM community_kept WHERE lesson_id = ?",
                                               [(lid,) for lid in dropped])
            await self.db.conn.execute(
                "INSERT INTO community_kept_runs (id, settings, runs_since_full) VALUES (1, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET settings = excluded.settings, "
                "runs_since_full = excluded.runs_since_full",
                [settings, runs_since_full])
            await self.db.conn.executemany(
                "INSERT OR REPLACE INTO community_kept (lesson_id, content, candidates, label, edges) "
                "VALUES (?, ?, ?, ?, ?)",
                ((lid, content, json.dumps(list(candidates)), label, edges)  # rows made as they are written
                 for lid, (content, candidates, label, edges) in lessons.items()))
            await self.db.conn.execute("DELETE FROM community_kept_titles")
            await self.db.conn.executemany("INSERT INTO community_kept_titles (sample, title) VALUES (?, ?)",
                                           list(titles.items()))
            await self.db.conn.executemany("INSERT OR REPLACE INTO community_kept_readings (name, state) VALUES (?, ?)",
                                           sorted((readings or {}).items()))

    async def clear(self) -> None:
        async with self.db.transaction():
            await self.db.conn.execute("DELETE FROM community_kept")
            await self.db.conn.execute("DELETE FROM community_kept_runs")
            await self.db.conn.execute("DELETE FROM community_kept_titles")
            await self.db.conn.execute("DELETE FROM community_kept_readings")
