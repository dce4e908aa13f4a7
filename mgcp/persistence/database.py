"""The async connection, transactions and row-level change capture that the store uses.

Every write that an undo may have to take back goes through `insert`, `update` or `delete`. While a `recording()` block is open they
also capture the before and after image of each row they touch, keyed by the table's natural key,
so that an applied REM action can later be undone exactly (`restore`), and refused where a later
change would be overwritten.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Iterable

import aiosqlite

from mgcp.errors import ConflictError, InvalidInputError
from mgcp.persistence import columns
from mgcp.persistence import migrate as migrations

# The natural key of each table an undoable action may touch.
BOUND = 500  # parameters bound at once by `fetchall_in`, well within SQLite's limit
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
    "lesson_traits": ("lesson_id", "version"),
    "reinforced_patterns": ("id",),
}

# Tables whose rows are only ever inserted (a run's history: each community partition, each context
# summary), with their bulky columns. A recorded insert into one holds the row without those as its
# after image: nothing changes such a row once written, so its other columns tell it from another
# row that took its id (an import's), and a cycle's record does not hold a second copy of a
# partition of 100k lessons.
APPEND_ONLY = {"community_runs": ("communities",), "context_summaries": ("narrative", "data")}


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _tags_json(text: str | None) -> str:
    """SQL's `mgcp_tags(tags)`: a tags column as the JSON list of the tags mgcp reads in it
    (`columns.tags`: comma-separated words too, as an older writer left some), for `json_each`."""
    return json.dumps(columns.tags(text))


class Database:
    """One aiosqlite connection with transactions (nested blocks are savepoints) and, inside
    `recording()`, row-level change capture."""

    def __init__(self, conn: aiosqlite.Connection, path: str):
        self.conn = conn
        self.path = path
        self._depth = 0
        self._changes: list[dict] | None = None

    @property
    def in_transaction(self) -> bool:
        """Whether a `transaction()` block is open."""
        return self._depth > 0

    @classmethod
    @asynccontextmanager
    async def open(cls, path, create: bool = True) -> AsyncIterator["Database"]:
        """Upgrade the database if needed (sync, in a worker thread, before the async connection
        opens), then open it. With `create=False` a missing file is an error, and nothing is made."""
        if not create:
            migrations.require_existing(path)
        report = await asyncio.to_thread(migrations.open_and_migrate, path)
        for name, failures in report.failures.items():
            # One line per migration, at every command until the records are fixed: a pointer, not
            # the list (`mgcp db migrate` prints every record it skipped).
            what = failures[0] if len(failures) == 1 else f"{len(failures)} records, the first {failures[0]}"
            print(f"mgcp: migration {name} skipped {what}; it stays pending and is retried "
                  "(`mgcp db migrate` lists what it skips)", file=sys.stderr)
        try:
            conn = await aiosqlite.connect(str(path), isolation_level=None)
        except sqlite3.Error as exc:  # pragma: no cover - the file changed between the two opens
            raise migrations.explain(exc, path) from None
        try:
            await conn.execute(f"PRAGMA busy_timeout = {migrations.BUSY_TIMEOUT_MS}")
            await conn.execute("PRAGMA foreign_keys = ON")
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.create_function("mgcp_tags", 1, _tags_json, deterministic=True)
            conn.row_factory = aiosqlite.Row
            yield cls(conn, str(path))
        except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:
            if isinstance(exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                raise  # a bug in mgcp, not a fault of the file: keep its traceback
            raise migrations.explain(exc, path) from None  # a full disk, a lock held too long, damage
        except UnicodeEncodeError as exc:  # text that SQLite cannot store (an unpaired surrogate)
            raise InvalidInputError(f"text is not valid Unicode (an unpaired surrogate at position "
                                    f"{exc.start}); nothing was stored") from None
        finally:
            await conn.close()

    # -- transactions -------------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One write transaction (BEGIN IMMEDIATE). A block opened inside another is a savepoint,
        as in sqlite-utils' `atomic()`: its failure rolls back only its own writes."""
        if self._depth:
            name = f"sp{self._depth}"
            await self.conn.execute(f"SAVEPOINT {name}")
            self._depth += 1
            try:
                yield
            except BaseException:
                if self.conn.in_transaction:  # SQLite rolls back by itself after some errors (disk full)
                    await self.conn.execute(f"ROLLBACK TO {name}")
                    await self.conn.execute(f"RELEASE {name}")
                raise
            finally:
                self._depth -= 1
            await self.conn.execute(f"RELEASE {name}")
            return
        await self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            if self.conn.in_transaction:
                await self.conn.execute("ROLLBACK")
            raise
        self._depth = 0
        commit = asyncio.ensure_future(self.conn.execute("COMMIT"))
        try:
            await asyncio.shield(commit)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                # Cancelled (Ctrl-C) while the COMMIT waits in SQLite's thread, where it goes on:
                # its outcome stands, and a ROLLBACK queued behind a COMMIT that succeeds would fail
                await asyncio.wait([commit])
                commit.exception()  # read here; a failed COMMIT is handled below as any other
            if self.conn.in_transaction:  # a failed COMMIT (disk full) leaves the transaction open
                await self.conn.execute("ROLLBACK")
            raise

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        """Reads in the block see one state of the database (a read transaction; inside a
        transaction already open, that one), however many statements they take."""
        if self._depth or self.conn.in_transaction:
            yield
            return
        await self.conn.execute("BEGIN")
        try:
            yield
        finally:
            if self.conn.in_transaction:
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
            if self.conn.in_transaction:
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

    async def fetchall_tuples(self, sql: str, params=()) -> list[tuple]:
        """`fetchall` as plain tuples, for reads of a row per lesson or snapshot (a `Row` object per
        row costs more than the row)."""
        async with self.conn.execute(sql, params) as cur:
            cur.row_factory = None
            return await cur.fetchall()

    async def fetchall_in(self, sql: str, values: Iterable) -> list[aiosqlite.Row]:
        """`fetchall(sql)` over many values, where `sql` says `IN ({marks})`: the distinct values
        are bound a chunk at a time (BOUND), within SQLite's limit on bound parameters."""
        values = list(dict.fromkeys(values))
        rows: list[aiosqlite.Row] = []
        for start in range(0, len(values), BOUND):
            chunk = values[start:start + BOUND]
            rows += await self.fetchall(sql.format(marks=",".join("?" * len(chunk))), chunk)
        return rows

    async def row(self, table: str, key: dict) -> dict | None:
        where = " AND ".join(f"{k} = ?" for k in key)
        row = await self.fetchone(f"SELECT * FROM {table} WHERE {where}", list(key.values()))
        return dict(row) if row else None

    @staticmethod
    def key_of(table: str, row: dict) -> dict:
        return {k: row[k] for k in KEYS[table]}

    async def insert(self, table: str, row: dict) -> int:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cur = await self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(row.values()))
        rowid = cur.lastrowid
        if self._changes is not None and table in KEYS:
            key = dict(row)
            if "id" in KEYS[table] and "id" not in key:
                key["id"] = rowid
            key = self.key_of(table, key)
            after = await self.row(table, key)
            if table in APPEND_ONLY:
                after = {c: v for c, v in after.items() if c not in APPEND_ONLY[table]}
            self._changes.append({"table": table, "key": key, "before": None, "after": after})
        return rowid

    async def update(self, table: str, key: dict, values: dict) -> None:
        before = await self.row(table, key) if self._changes is not None else None
        sets = ", ".join(f"{c} = ?" for c in values)
        where = " AND ".join(f"{k} = ?" for k in key)
        await self.conn.execute(f"UPDATE {table} SET {sets} WHERE {where}", [*values.values(), *key.values()])
        if self._changes is not None and before is not None:
            after = await self.row(table, key)
            if after != before:
                self._changes.append({"table": table, "key": key, "before": before, "after": after})

    async def delete(self, table: str, key: dict) -> None:
        before = await self.row(table, key) if self._changes is not None else None
        where = " AND ".join(f"{k} = ?" for k in key)
        await self.conn.execute(f"DELETE FROM {table} WHERE {where}", list(key.values()))
        if self._changes is not None and before is not None:
            self._changes.append({"table": table, "key": key, "before": before, "after": None})

    async def upsert(self, table: str, key: dict, values: dict) -> None:
        if await self.row(table, key) is None:
            await self.insert(table, {**key, **values})
        else:
            await self.update(table, key, values)

    async def upsert_many(self, table: str, rows: list[dict]) -> None:
        """Insert or replace whole rows of a table keyed by one column, in a few statements; inside
        `recording()` each row's before and after image is captured as `insert`/`update` would.
        Each row must name every column (its after image is the row as given)."""
        if not rows:
            return
        (key,) = KEYS[table]
        found = await self.fetchall_in(f"SELECT * FROM {table} WHERE {key} IN ({{marks}})", (r[key] for r in rows))
        current = {r[key]: dict(r) for r in found}
        cols = list(rows[0])
        await self.conn.executemany(
            f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [[r[c] for c in cols] for r in rows])
        if self._changes is not None:
            for r in rows:
                before = current.get(r[key])
                if before != r:
                    self._changes.append({"table": table, "key": {key: r[key]}, "before": before, "after": dict(r)})

    async def delete_many(self, table: str, keys: Iterable) -> None:
        """Delete the rows of a table keyed by one column whose key is among `keys`, in a few
        statements; inside `recording()` each row's before image is captured as `delete` would."""
        (key,) = KEYS[table]
        found = await self.fetchall_in(f"SELECT * FROM {table} WHERE {key} IN ({{marks}})", keys)
        gone = [dict(r) for r in found]
        await self.conn.executemany(f"DELETE FROM {table} WHERE {key} = ?", [[r[key]] for r in gone])
        if self._changes is not None:
            self._changes += [{"table": table, "key": {key: r[key]}, "before": r, "after": None} for r in gone]

    # -- undo -----------------------------------------------------------------------------------

    async def restore(self, changes: list[dict], force: bool = False) -> list[dict]:
        """Put every recorded row back as it was, newest change first; returns the keys touched.

        A row whose content no longer looks as the change left it was changed later: restoring it
        would overwrite that change, so the whole restore is refused (ConflictError listing every
        such row, nothing written) unless `force`. A row the change created that is gone since
        is no conflict: the undo wanted it gone; one an insert into an APPEND_ONLY table created is
        compared by the columns its record holds. Retrieval counters (COUNTERS) are not content:
        they never conflict and keep their current values. A row that rows written since depend on
        (a foreign key) cannot be put back, forced or not: ConflictError naming it.
        """
        conflicts, blocked, touched = [], [], []
        async with self.transaction():
            for change in reversed(changes):
                table, key = change["table"], change["key"]
                current = await self.row(table, key)
                before = change["before"]
                if before is None and current is None:
                    continue  # created by the change, gone since: as the undo would leave it
                after = change["after"]
                if current is not None and before is None and table in APPEND_ONLY:
                    current = {c: current[c] for c in after if c in current}  # the columns recorded
                if not same_content(table, current, after):
                    conflicts.append(_describe_conflict(table, key, after, current))
                if before is not None and current is not None:
                    before = {**before, **{c: current[c] for c in COUNTERS.get(table, ()) if c in current}}
                try:
                    if before is None:
                        await self.delete(table, key)
                    elif current is None:
                        await self.insert(table, before)
                    else:
                        await self.update(table, key, {c: v for c, v in before.items() if c not in key})
                except sqlite3.IntegrityError as exc:  # the statement alone is undone; the rest goes on
                    blocked.append(f"{table} row {', '.join(str(v) for v in key.values())} cannot be put back "
                                   f"({exc}: rows written since depend on it)")
                    continue
                touched.append({"table": table, "key": key})
            if blocked or (conflicts and not force):
                found = blocked + ([] if force else conflicts)
                raise ConflictError("undo would overwrite a later change: " + "; ".join(found), details=found)
        return touched


# Columns that count retrievals rather than hold content: an undo neither checks nor restores them.
# Neither is a project's session bookkeeping, which the hook advances on its own.
COUNTERS = {"lessons": ("usage_count", "last_used"),
            "project_contexts": ("last_accessed", "session_count", "last_session_id")}


def same_content(table: str, a: dict | None, b: dict | None) -> bool:
    """Whether two images of a row hold the same content (retrieval counters aside)."""
    return _content(table, a) == _content(table, b)


def _content(table: str, row: dict | None) -> dict | None:
    if row is None:
        return None
    return {k: v for k, v in row.items() if k not in COUNTERS.get(table, ())}


def _describe_conflict(table: str, key: dict, expected: dict | None, current: dict | None) -> str:
    name = f"{table} row {', '.join(str(v) for v in key.values())}"
    if current is None:
        return f"{name} was deleted since"
    if expected is None:
        return f"{name} was created since"
    changed = sorted(c for c in current if c not in COUNTERS.get(table, ()) and current.get(c) != expected.get(c))
    return f"{name} changed since ({', '.join(changed)})"
