"""The words of the corpora REM operations compare, kept between cycles (`kept_corpora`, migration 0015).

A row holds one corpus under its name as bytes that only `mgcp.operations.kept_words` reads and
checks. It is a cache: nothing else refers to it, a corpus is replaced whole, and deleting them all
only costs the next cycle the time to read the texts again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from mgcp.persistence.database import Database


class KeptCorpora:
    def __init__(self, db: Database):
        self.db = db

    async def load(self) -> dict[str, bytes]:
        """Every kept corpus by name."""
        return {name: bytes(state) for name, state in await self.db.fetchall("SELECT name, state FROM kept_corpora")}

    async def keep(self, write: Mapping[str, bytes], drop: Collection[str] = ()) -> None:
        """Keep the corpora `write` (by name, replacing what was kept under it) and drop those named
        in `drop`, in one transaction."""
        if not write and not drop:
            return
        async with self.db.transaction():
            await self.db.conn.executemany("INSERT OR REPLACE INTO kept_corpora (name, state) VALUES (?, ?)",
                                           list(write.items()))
            await self.db.conn.executemany("DELETE FROM kept_corpora WHERE name = ?", [(name,) for name in drop])
