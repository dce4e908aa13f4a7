"""Open-time checks and the migration runner (sync, sqlite3 + sqlite-utils).

Migrations are the files `migrations/NNNN_slug.py`, each with `migrate(db)` taking a
`sqlite_utils.Database`. They are tracked in sqlite-utils' `_sqlite_migrations` table under the set
name "mgcp" and applied in order, each in its own `BEGIN IMMEDIATE` transaction with its record, so a
crash leaves either the whole migration or none of it, and two processes starting at once never
apply one twice. A migration may return a list of per-record failures: its good records are kept,
the failures are reported, and it stays pending so the next start resumes it (backfills insert only
what is missing).

Refused, never modified: a file that is not SQLite, an SQLite file of another application, and a
database with mgcp migrations this version does not know (made by a newer mgcp).

The fast path (`pending_migrations`) uses only sqlite3 and the file names, so commands that find the
schema current never import sqlite-utils.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from mgcp.errors import DatabaseError, NotFoundError
from mgcp.resources import migrations_dir

MIGRATION_SET = "mgcp"
MIGRATIONS_TABLE = "_sqlite_migrations"
SQLITE_HEADER = b"SQLite format 3\x00"
LEGACY_MARKER_TABLE = "lessons"
BUSY_TIMEOUT_MS = 10_000


class MigrationReport:
    """What one upgrade did: migrations applied, and per-record failures by migration."""

    def __init__(self):
        self.applied: list[str] = []
        self.failures: dict[str, list[str]] = {}

    def __repr__(self):
        return f"MigrationReport(applied={self.applied}, failures={self.failures})"


def migration_names() -> list[str]:
    return sorted(p.stem for p in migrations_dir().glob("[0-9][0-9][0-9][0-9]_*.py"))


def connect(path: str | os.PathLike) -> sqlite3.Connection:
    """A raw connection with mgcp's pragmas, after checking the file is an mgcp database (or new).

    The checks come before any pragma that writes (WAL mode changes the file header), so a file
    that is refused is never modified.
    """
    check_file(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        pending_migrations(conn)  # refuses foreign, corrupt and newer files
        conn.execute("PRAGMA foreign_keys = ON")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise DatabaseError(f"{path} is not a usable SQLite database ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn


def check_file(path: str | os.PathLike) -> None:
    p = Path(path)
    if p.is_dir():
        raise DatabaseError(f"{path} is a directory, not a database file")
    if p.exists() and p.stat().st_size > 0:
        with open(p, "rb") as fh:
            if fh.read(16) != SQLITE_HEADER:
                raise DatabaseError(f"{path} is not an SQLite database; refusing to touch it")


def require_existing(path: str | os.PathLike) -> None:
    """For commands that only read: a missing database is an error (NotFoundError), never made."""
    if not Path(path).is_file():
        raise NotFoundError(f"no database at {path} (create one with `mgcp db migrate` or a first save)")


def _applied(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    try:
        return conn.execute(
            f"SELECT name, applied_at FROM {MIGRATIONS_TABLE} WHERE migration_set = ? ORDER BY rowid",
            [MIGRATION_SET],
        ).fetchall()
    except sqlite3.OperationalError:
        return []  # no migrations table yet


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def pending_migrations(conn: sqlite3.Connection) -> list[str]:
    """Known migrations not applied yet. Refuses foreign, corrupt and newer databases."""
    try:
        tables = _tables(conn)
        applied = {name for name, _ in _applied(conn)}
    except sqlite3.DatabaseError as exc:
        raise DatabaseError(f"the database file is corrupt or not SQLite ({exc})") from None
    user_tables = [t for t in tables if not t.startswith("sqlite_")]
    if user_tables and LEGACY_MARKER_TABLE not in tables and MIGRATIONS_TABLE not in tables:
        raise DatabaseError(
            "this SQLite file belongs to another application (it has no 'lessons' table); "
            "refusing to modify it"
        )
    known = migration_names()
    unknown = sorted(applied - set(known))
    if unknown:
        raise DatabaseError(
            f"this database was upgraded by a newer mgcp (unknown migrations: {', '.join(unknown)}); "
            "upgrade mgcp to use it"
        )
    return [name for name in known if name not in applied]


def _load(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"mgcp_migration_{name}", migrations_dir() / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.migrate


def apply_migrations(conn: sqlite3.Connection) -> MigrationReport:
    """Apply every pending migration in order; see the module docstring for the guarantees."""
    report = MigrationReport()
    pending = pending_migrations(conn)
    if not pending:
        return report
    # Only when there is work: these are slow to import, and the hook imports this module.
    from datetime import datetime, timezone

    import sqlite_utils
    from sqlite_utils.migrations import Migrations

    db = sqlite_utils.Database(conn)
    Migrations(MIGRATION_SET).ensure_migrations_table(db)
    for name in pending:
        migrate = _load(name)
        conn.execute("BEGIN IMMEDIATE")
        try:
            if name not in {n for n, _ in _applied(conn)}:  # another process may have won the race
                failures = migrate(db) or []
                if failures:
                    report.failures[name] = failures
                else:
                    conn.execute(
                        f"INSERT INTO {MIGRATIONS_TABLE} (migration_set, name, applied_at) VALUES (?, ?, ?)",
                        [MIGRATION_SET, name, str(datetime.now(timezone.utc))],
                    )
                    report.applied.append(name)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return report


def open_and_migrate(path: str | os.PathLike) -> MigrationReport:
    """Check and upgrade the database at `path` (creating it if missing), then close it."""
    conn = connect(path)
    try:
        return apply_migrations(conn)
    finally:
        conn.close()


def status(path: str | os.PathLike) -> dict:
    """Applied and pending migrations and row counts per table, without modifying anything."""
    check_file(path)
    require_existing(path)
    conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    try:
        pending = pending_migrations(conn)
        tables = {
            t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
            for t in sorted(_tables(conn))
            if not t.startswith("sqlite_") and not t.startswith("lesson_search_")
        }
        applied = [{"name": n, "applied_at": at} for n, at in _applied(conn)]
    except sqlite3.DatabaseError as exc:
        raise DatabaseError(f"{path} is corrupt or not SQLite ({exc})") from None
    finally:
        conn.close()
    return {"applied": applied, "pending": pending, "tables": tables}
