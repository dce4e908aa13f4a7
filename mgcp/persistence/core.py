"""The async connection, transactions and row-level change capture that every store method uses.

Every write goes through `_insert`, `_update` or `_delete`. While a `recording()` block is open they
also capture the before and after image of each row they touch, keyed by the table's natural key,
so that an applied REM action can later be undone exactly (`restore`), and refused where a later
change would be overwritten.
"""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any, AsyncIterator

import aiosqlite

from mgcp.errors import ConflictError, DatabaseError
from mgcp.persistence import migrate as migrations

# The natural key of each table an undoable action may touch.
KEYS = {
    "lessons": ("id",),
    "lesson_versions": ("id",),
    "lesson_lifecycle": ("lesson_id",),
    "project_contexts": ("project_id",),
    "context_history": ("id",),
    "project_sessions": ("project_id", "session_id"),
    "community_summaries": ("community_id",),
    "rem_findings": ("id",),
    "community_runs": ("id",),
    "context_summaries": ("id",),
}


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class StoreCore:
    def __init__(self, conn: aiosqlite.Connection, path: str):
        self.conn = conn
        self.path = path
        self._depth = 0
        self._changes: list[dict] | None = None

    @classmethod
    @asynccontextmanager
    async def open(cls, path) -> AsyncIterator["StoreCore"]:
        """Upgrade the database if needed (sync, before the async connection), then open it."""
        report = migrations.open_and_migrate(path)
        for name, failures in report.failures.items():
            for failure in failures:
                print(f"mgcp: migration {name} skipped {failure}; it will be retried", file=sys.stderr)
        try:
            conn = await aiosqlite.connect(str(path), isolation_level=None)
        except Exception as exc:  # pragma: no cover - file vanished between the two opens
            raise DatabaseError(f"cannot open {path}: {exc}") from None
        try:
            await conn.execute(f"PRAGMA busy_timeout = {migrations.BUSY_TIMEOUT_MS}")
            await conn.execute("PRAGMA foreign_keys = ON")
            await conn.execute("PRAGMA synchronous = NORMAL")
            conn.row_factory = aiosqlite.Row
            yield cls(conn, str(path))
        finally:
            await conn.close()

    # -- transactions -------------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One write transaction (BEGIN IMMEDIATE); nested blocks join the outermost one."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        await self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            await self.conn.execute("ROLLBACK")
            raise
        self._depth = 0
        await self.conn.execute("COMMIT")

    @asynccontextmanager
    async def preview(self) -> AsyncIterator[None]:
        """Run the block in one transaction and roll all of it back: for dry runs."""
        if self._depth:
            raise RuntimeError("preview() cannot run inside another transaction")
        await self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            await self.conn.execute("ROLLBACK")

    @asynccontextmanager
    async def recording(self) -> AsyncIterator[list[dict]]:
        """Capture every row change made inside the block (within one transaction)."""
        async with self.transaction():
            outer, self._changes = self._changes, []
            try:
                yield self._changes
            finally:
                if outer is not None:
                    outer.extend(self._changes)
                self._changes = outer

    # -- row helpers --------------------------------------------------------------------------

    async def fetchone(self, sql: str, params=()) -> aiosqlite.Row | None:
        async with self.conn.execute(sql, params) as cur:
            return await cur.fetchone()

    async def fetchall(self, sql: str, params=()) -> list[aiosqlite.Row]:
        async with self.conn.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def _row(self, table: str, key: dict) -> dict | None:
        where = " AND ".join(f"{k} = ?" for k in key)
        row = await self.fetchone(f"SELECT * FROM {table} WHERE {where}", list(key.values()))
        return dict(row) if row else None

    def _key(self, table: str, row: dict) -> dict:
        return {k: row[k] for k in KEYS[table]}

    async def _insert(self, table: str, row: dict) -> int:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cur = await self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(row.values()))
        rowid = cur.lastrowid
        if self._changes is not None and table in KEYS:
            key = dict(row)
            if "id" in KEYS[table] and "id" not in key:
                key["id"] = rowid
            after = await self._row(table, self._key(table, key))
            self._changes.append({"table": table, "key": self._key(table, key), "before": None, "after": after})
        return rowid

    async def _update(self, table: str, key: dict, values: dict) -> None:
        before = await self._row(table, key) if self._changes is not None else None
        sets = ", ".join(f"{c} = ?" for c in values)
        where = " AND ".join(f"{k} = ?" for k in key)
        await self.conn.execute(f"UPDATE {table} SET {sets} WHERE {where}", [*values.values(), *key.values()])
        if self._changes is not None and before is not None:
            after = await self._row(table, key)
            if after != before:
                self._changes.append({"table": table, "key": key, "before": before, "after": after})

    async def _delete(self, table: str, key: dict) -> None:
        before = await self._row(table, key) if self._changes is not None else None
        where = " AND ".join(f"{k} = ?" for k in key)
        await self.conn.execute(f"DELETE FROM {table} WHERE {where}", list(key.values()))
        if self._changes is not None and before is not None:
            self._changes.append({"table": table, "key": key, "before": before, "after": None})

    async def _upsert(self, table: str, key: dict, values: dict) -> None:
        if await self._row(table, key) is None:
            await self._insert(table, {**key, **values})
        else:
            await self._update(table, key, values)

    async def restore(self, changes: list[dict]) -> None:
        """Put every recorded row back as it was, newest change first.

        Refuses (ConflictError, nothing written) when a row no longer looks as the change left it:
        undoing then would overwrite a later change.
        """
        async with self.transaction():
            for change in reversed(changes):
                table, key = change["table"], change["key"]
                current = await self._row(table, key)
                if current != change["after"]:
                    raise ConflictError(
                        f"{table} row {', '.join(str(v) for v in key.values())} changed after this "
                        "action; undo would overwrite that change"
                    )
                if change["before"] is None:
                    await self._delete(table, key)
                elif current is None:
                    await self._insert(table, change["before"])
                else:
                    values = {c: v for c, v in change["before"].items() if c not in key}
                    await self._update(table, key, values)
                if table == "lessons":
                    await self._reindex_lesson(key["id"])

    async def _reindex_lesson(self, lesson_id: str) -> None:  # provided by LessonStore
        raise NotImplementedError
