"""What community detection keeps between cycles (`community_kept_runs`, migrations 0013 and 0019;
`community_kept_titles`, migration 0016; `community_kept_readings`, migration 0018).

One row for the settings the state holds under, with the lessons' state (one binary value that
community detection makes and reads: see `mgcp.operations.community_detection`, "Kept between
runs"), a row per title of the last run's communities (keyed by what it was drawn from), and a row
per reading of what the titles are drawn from (a binary state by name, which community detection
makes and reads; written only by a run that drew a title). It is a cache: nothing else refers to
it, and deleting it only makes the next run a full one (and read the texts the readings held).
"""

from __future__ import annotations

from mgcp.persistence.database import Database


class CommunityKept:
    def __init__(self, db: Database):
        self.db = db

    async def load(self) -> tuple[str, int, bytes | None, dict[str, str], dict[str, bytes]] | None:
        """(settings, runs since the last full run, the lessons' state (None: none kept), sample ->
        title, name -> reading), or None when nothing is kept."""
        head = await self.db.fetchone("SELECT settings, runs_since_full, lessons FROM community_kept_runs WHERE id = 1")
        if head is None:
            return None
        titles = dict(await self.db.fetchall("SELECT sample, title FROM community_kept_titles"))
        readings = dict(await self.db.fetchall("SELECT name, state FROM community_kept_readings"))
        return head[0], head[1], head[2], titles, readings

    async def save(self, settings: str, runs_since_full: int, lessons: bytes, titles: dict[str, str],
                   readings: dict[str, bytes] | None = None) -> None:
        """Make the kept state `lessons` and `titles`, in one transaction (a savepoint of the
        caller's, when one is open). `readings`: the readings to write by name (the others stay as
        they are kept)."""
        async with self.db.transaction():
            await self.db.conn.execute(
                "INSERT INTO community_kept_runs (id, settings, runs_since_full, lessons) VALUES (1, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET settings = excluded.settings, "
                "runs_since_full = excluded.runs_since_full, lessons = excluded.lessons",
                [settings, runs_since_full, lessons])
            await self.db.conn.execute("DELETE FROM community_kept_titles")
            await self.db.conn.executemany("INSERT INTO community_kept_titles (sample, title) VALUES (?, ?)",
                                           list(titles.items()))
            await self.db.conn.executemany("INSERT OR REPLACE INTO community_kept_readings (name, state) VALUES (?, ?)",
                                           sorted((readings or {}).items()))

    async def clear(self) -> None:
        async with self.db.transaction():
            await self.db.conn.execute("DELETE FROM community_kept_runs")
            await self.db.conn.execute("DELETE FROM community_kept_titles")
            await self.db.conn.execute("DELETE FROM community_kept_readings")
