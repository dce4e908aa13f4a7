"""What a REM pair search keeps between cycles (`kept_pairs`, migration 0012).

A row holds one search's state (`search` names it: "duplicate_detection", "contradiction_scan") as
bytes that only the search itself reads and checks. It is a cache: nothing else refers to it, it is
replaced whole, and deleting it only costs the next cycle a full search.
"""

from __future__ import annotations

from mgcp.persistence.database import Database


class KeptPairs:
    def __init__(self, db: Database):
        self.db = db

    async def load(self, search: str) -> bytes | None:
        """The state kept for `search`, or None."""
        rows = await self.db.fetchall("SELECT state FROM kept_pairs WHERE search = ?", [search])
        return bytes(rows[0][0]) if rows else None

    async def keep(self, search: str, state: bytes) -> None:
        """Keep `state` for `search`, replacing what was kept, in one transaction."""
        async with self.db.transaction():
            await self.db.conn.execute("INSERT OR REPLACE INTO kept_pairs (search, state) VALUES (?, ?)",
                                       [search, state])
