"""What REM operations read from each text, kept between cycles (`kept_readings`, migration 0011).

A row maps a digest (of a text and of the rules it was read by) to one reading of it (`reading`
names which: "screen", "claims") as text; a cycle loads only the readings its operations ask for.
It is a cache: rows are added when a cycle reads a text anew and dropped when a cycle that asked
for a reading of every text did not ask for them; nothing else refers to them, and deleting them
all only costs time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from mgcp.persistence.database import Database


class KeptReadings:
    def __init__(self, db: Database):
        self.db = db

    async def load(self, readings: Collection[str]) -> dict[str, dict[bytes, str]]:
        """The kept values of each of `readings` (by name) by digest."""
        out: dict[str, dict[bytes, str]] = {name: {} for name in readings}
        for name in out:
            out[name] = dict(await self.db.fetchall("SELECT digest, value FROM kept_readings WHERE reading = ?", [name]))
        return out

    async def keep(self, new: Mapping[bytes, tuple[str, str]], dropped: Collection[bytes] = ()) -> None:
        """Add the `new` readings (digest -> (reading, value)) and drop those kept under the digests
        `dropped`, in one transaction."""
        if not new and not dropped:
            return
        async with self.db.transaction():
            # in the key's order: a B-tree takes sorted keys at its edge, not at a random page each
            await self.db.conn.executemany(
                "INSERT OR IGNORE INTO kept_readings (digest, reading, value) VALUES (?, ?, ?)",
                [(key, reading, value) for key, (reading, value) in sorted(new.items())])
            await self.db.conn.executemany("DELETE FROM kept_readings WHERE digest = ?",
                                           [(key,) for key in sorted(dropped)])
