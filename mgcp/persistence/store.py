"""The async store: lessons, context and REM state in one SQLite database."""

from mgcp.persistence.context import ContextStore
from mgcp.persistence.lessons import LessonStore
from mgcp.persistence.rem import RemStore


class Store(LessonStore, ContextStore, RemStore):
    """Open with `async with Store.open(path) as store:`."""
