"""What REM operations read from each text, kept between cycles (`kept_readings`, migration 0011).

A row maps a digest (of a text and of the rules it was read by) to one reading of it (`reading`
names which: "words", "screen", "claims") as text. It is a cache: rows are added when a cycle reads
a text anew and dropped when nothing reads them any more; nothing else refers to them, and deleting
them all only costs time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from mgcp.persistence.database import Database


class KeptReadings:
    def __init__(self, db: Database):
        self.db = db

    async def load(self) -> dict[bytes, str]:
        """Every kept reading's value by digest."""
        return dict(await self.db.fetchall("SELECT digest, value FROM kept_readings"))

    async def keep(self, new: Mapping[bytes, tuple[str, str]], complete: Collection[str] = (),
                   seen: Collection[bytes] = ()) -> None:
        """Add the `new` readings (digest -> (reading, value)) and drop the kept readings of the
        `complete` kinds (those read for every text that has one) whose digest is not `seen`,
        in one transaction."""
        dropped: list[bytes] = []
        for reading in complete:
            rows = await self.db.fetchall("SELECT digest FROM kept_readings WHERE reading = ?", [reading])
            dropped += [key for (key,) in rows if key not in seen]
        if not new and not dropped:
            return
        async with self.db.transaction():
            # in the key's order: a B-tree takes sorted keys at its edge, not at a random page each
            await self.db.conn.executemany(
                "INSERT OR IGNORE INTO kept_readings (digest, reading, value) VALUES (?, ?, ?)",
                [(key, reading, value) for key, (reading, value) in sorted(new.items())])
            await self.db.conn.executemany("DELETE FROM kept_readings WHERE digest = ?",
                                           [(key,) for key in sorted(dropped)])
