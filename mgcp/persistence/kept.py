"""The words REM's text comparisons read, kept between cycles (`kept_words`, migration 0011).

A row maps a digest (of a text and of the rules it was read by) to the text's words joined by
spaces (no word holds a space). It is a cache: rows are added when a cycle reads a text anew and
dropped when no lesson reads them any more; nothing else refers to them, and deleting them all only
costs time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from mgcp.persistence.database import Database

_CHUNK = 500  # SQLite's limit on bound parameters


class KeptWords:
    def __init__(self, db: Database):
        self.db = db

    async def load(self) -> dict[bytes, str]:
        return dict(await self.db.fetchall("SELECT digest, words FROM kept_words"))

    async def keep(self, new: Mapping[bytes, str], dropped: Collection[bytes] = ()) -> None:
        """Add `new` rows and drop the `dropped` digests, in one transaction."""
        if not new and not dropped:
            return
        async with self.db.transaction():
            await self.db.conn.executemany("INSERT OR IGNORE INTO kept_words (digest, words) VALUES (?, ?)",
                                           list(new.items()))
            dropped = list(dropped)
            for start in range(0, len(dropped), _CHUNK):
                chunk = dropped[start:start + _CHUNK]
                await self.db.conn.execute(f"DELETE FROM kept_words WHERE digest IN ({','.join('?' * len(chunk))})",
                                           chunk)
