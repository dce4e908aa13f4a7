"""What REM operations keep of the indexes they build over the lessons (`kept_indexes`, migration
0017).

A row holds one state (`name` names it: "lesson_words", the index of which lessons hold which word;
"pattern_reinforcement", what pattern reinforcement's last run decided) as bytes that only its
owner reads and checks. It is a cache: nothing else refers to it, it is replaced whole, it is not exported
and no undo touches it; deleting it only costs the next cycle the time to build the index anew.
"""

from __future__ import annotations

from mgcp.persistence.database import Database


class KeptIndexes:
    def __init__(self, db: Database):
        self.db = db

    async def load(self, name: str) -> bytes | None:
        """The state kept for `name`, or None."""
        row = await self.db.fetchone("SELECT state FROM kept_indexes WHERE name = ?", [name])
        return bytes(row[0]) if row else None

    async def keep(self, name: str, state: bytes) -> None:
        """Keep `state` for `name`, replacing what was kept, in one transaction."""
        async with self.db.transaction():
            await self.db.conn.execute("INSERT OR REPLACE INTO kept_indexes (name, state) VALUES (?, ?)",
                                       [name, state])
