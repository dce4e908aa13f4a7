"""The only package that speaks SQL.

`Store` is the async (aiosqlite) store used by the engine and the surfaces: open it with
`async with Store.open(path) as store:`; the database is checked and upgraded by the sync migration
runner (`persistence.migrate`) before the async connection opens. `persistence.sessions` is the
stdlib-only part the SessionStart hook uses.
"""

from mgcp.persistence.context import ContextStore
from mgcp.persistence.lessons import LessonStore
from mgcp.persistence.rem import RemStore


class Store(LessonStore, ContextStore, RemStore):
    """Lessons, context and REM state in one SQLite database."""


__all__ = ["Store"]
