"""The async store: lessons, context and REM state in one SQLite database.

`Store` composes three plain classes over one `Database` (connection and transactions):
`store.lessons`, `store.context` and `store.rem`. Open it with
`async with Store.open(path) as store:`; the database is checked and upgraded by the sync migration
runner first. Writes that belong together share `store.transaction()` (nested blocks are
savepoints).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

from mgcp.persistence.context import Contexts
from mgcp.persistence.database import Database
from mgcp.persistence.lessons import Lessons
from mgcp.persistence.rem import RemLedger


class Store:
    def __init__(self, db: Database):
        self.db = db
        self.lessons = Lessons(db)
        self.context = Contexts(db)
        self.rem = RemLedger(db)

    @classmethod
    @asynccontextmanager
    async def open(cls, path, create: bool = True) -> AsyncIterator["Store"]:
        """`create=False` for commands that only read: a missing database is then an error."""
        async with Database.open(path, create) as db:
            yield cls(db)

    @property
    def path(self) -> str:
        return self.db.path

    def transaction(self):
        return self.db.transaction()

    def preview(self):
        return self.db.preview()

    def recording(self):
        return self.db.recording()

    async def restore(self, changes: list[dict], force: bool = False) -> None:
        """Undo recorded changes (see Database.restore), keeping the search index in step."""
        async with self.db.transaction():
            touched = await self.db.restore(changes, force)
            for lesson_id in dict.fromkeys(t["key"]["id"] for t in touched if t["table"] == "lessons"):
                await self.lessons.reindex(lesson_id)

    async def query(self, text: str, limit: int = 10, project_path: str | None = None):
        """Lessons for a situation (see Lessons.query), the query attributed to the project at
        `project_path` when it is known."""
        project = await self.context.find_project(project_path) if project_path else None
        return await self.lessons.query(text, limit, project.project_id if project else None)

    async def count(self, table: str) -> int:
        return (await self.db.fetchone(f"SELECT count(*) FROM {table}"))[0]
