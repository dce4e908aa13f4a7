"""Open-time checks and the migration runner (sync, sqlite3 + sqlite-utils).

Migrations are the files `migrations/NNNN_slug.py`, each with `migrate(db)` taking a
`sqlite_utils.Database`. They are tracked in sqlite-utils' `_sqlite_migrations` table under the set
name "mgcp" and applied in order, each in its own `BEGIN IMMEDIATE` transaction with its record, so a
crash leaves either the whole migration or none of it, and two processes starting at once never
apply one twice. A migration may return a list of per-record failures: its good records are kept,
the failures are reported, and it stays pending so the next start resumes it (backfills insert only
what is missing).

Refused, never modified: a directory, an empty file, a file that is not SQLite, an SQLite file of
another application, and a database with mgcp migrations this version does not know (made by a newer
mgcp). A new database is built beside its path and linked into place, so a crash never leaves an
empty file behind. `explain` turns file-system and SQLite faults into what the user can act on
(read-only file or directory, full disk, a lock held too long, damage).

The fast path (`pending_migrations`) uses only sqlite3 and the file names, so commands that find the
schema current never import sqlite-utils.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path

from mgcp.errors import DatabaseError, NotFoundError, StorageError
from mgcp.resources import migrations_dir

MIGRATION_SET = "mgcp"
MIGRATIONS_TABLE = "_sqlite_migrations"
LEGACY_MARKER_TABLE = "lessons"
# The columns of an MGCP v1.2 lessons table (the upgrade and the store read them all)
LEGACY_COLUMNS = ("id", "trigger", "action", "rationale", "examples", "version", "created_at", "last_refined",
                  "last_used", "usage_count", "tags", "parent_id", "related_ids", "relationships")
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


def connect(path: str | os.PathLike, allow_empty: bool = False) -> sqlite3.Connection:
    """A raw connection with mgcp's pragmas, after checking the file is an mgcp database (or new).

    The checks come before any pragma that writes (WAL mode changes the file header), so a file
    that is refused is never modified. `allow_empty`: an empty file is made a new database (what
    `mgcp db migrate` asks for explicitly; everything else refuses one).
    """
    check_file(path, allow_empty)
    try:
        if not Path(path).exists():
            _create(Path(path))
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    except (OSError, sqlite3.Error) as exc:
        raise explain(exc, path) from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        pending_migrations(conn, path)  # refuses foreign, corrupt and newer files
        conn.execute("PRAGMA foreign_keys = ON")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        conn.close()
        raise explain(exc, path) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _create(path: Path) -> None:
    """A new, empty database in WAL mode at `path`. It is made beside `path` and linked into place,
    so that no crash ever leaves a zero-byte file there (which every later start would refuse). On a
    file system without hard links it is copied into a file created exclusively instead."""
    import secrets  # here: it costs the hook several milliseconds to import, and this runs once

    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name[:200]}.{secrets.token_hex(4)}.new")
    try:
        conn = sqlite3.connect(scratch)
        try:
            conn.execute("PRAGMA journal_mode = WAL")  # writes the header: the file is a database now
        finally:
            conn.close()
        try:
            os.link(scratch, path)
        except FileExistsError:
            return  # another process created it first: use theirs
        except OSError:  # no hard links here (vfat, some network file systems)
            with open(path, "xb") as fh:
                fh.write(scratch.read_bytes())
    except FileExistsError:
        return
    finally:
        scratch.unlink(missing_ok=True)


def check_file(path: str | os.PathLike, allow_empty: bool = False) -> None:
    """Refuse, before anything opens it, a path that cannot be an mgcp database: a directory or
    anything else that is not a regular file, an empty file (unless `allow_empty`), a file that is
    not SQLite, a path through a file."""
    p = Path(path)
    try:
        for parent in p.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise DatabaseError(f"cannot use {path}: {parent} is a file, not a directory")
                break
        info = os.stat(p) if p.exists() else None
    except OSError as exc:  # a folder we may not enter, a name too long
        raise explain(exc, path) from None
    if info is None:
        return
    if stat.S_ISDIR(info.st_mode):
        raise DatabaseError(f"{path} is a directory, not a database file")
    if not stat.S_ISREG(info.st_mode):
        raise DatabaseError(f"{path} is not a regular file (a device, a pipe or a socket), not a database file")
    if info.st_size == 0:
        if allow_empty:
            return
        raise DatabaseError(f"{path} is an empty file (0 bytes), not an mgcp database; nothing was changed "
                            "(`mgcp db migrate` makes it a new database)")
    if not _read_by_sqlite(p):
        raise DatabaseError(f"{path} is not an SQLite database; refusing to touch it")


def _read_by_sqlite(p: Path) -> bool:
    """Whether SQLite takes the file for a database, asked of SQLite in read-only mode (it writes
    nothing) rather than read with open(): closing any other descriptor of a file drops every POSIX
    lock this process holds on it, those of its open connections included (a server's other calls).
    Another process would then take itself for the file's last user, checkpoint and remove the WAL
    under them, and the file is damaged. SQLite shares its own descriptors of a file it holds and
    closes them only once no lock needs them."""
    try:
        conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise explain(exc, p) from None
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB":
            return False
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_CANTOPEN":
            raise explain(exc, p) from None
        # busy, locked, damaged past its header: a database all the same, for what opens it next
    finally:
        conn.close()
    return True


_ERRNO_KINDS = {errno.ENOSPC: "FULL", errno.EDQUOT: "FULL", errno.EFBIG: "FULL", errno.EROFS: "READONLY",
                errno.EACCES: "DENIED", errno.EPERM: "DENIED", errno.ENOTDIR: "NOTDIR"}


def out_of_space(exc: BaseException, path: str | os.PathLike) -> bool:
    """Whether a write to the database at `path` failed for want of space."""
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith("SQLITE_FULL") or _ERRNO_KINDS.get(getattr(exc, "errno", None)) == "FULL":
        return True
    # a write that failed for want of space is often reported as an I/O error
    return name.startswith("SQLITE_IOERR") and _free_bytes(Path(path).parent) < 64 * 1024


def explain(exc: BaseException, path: str | os.PathLike) -> DatabaseError:
    """A fault of the file system or of SQLite as the user can act on it: what is wrong, where."""
    name = getattr(exc, "sqlite_errorname", "")
    kind = _ERRNO_KINDS.get(getattr(exc, "errno", None), "")
    folder = Path(path).parent
    if out_of_space(exc, path):
        return StorageError(f"the disk is full (writing {path}); the change was not made")
    if name.startswith("SQLITE_READONLY") or name.startswith("SQLITE_CANTOPEN") or kind in ("READONLY", "DENIED"):
        if Path(path).exists() and not os.access(path, os.W_OK):
            return DatabaseError(f"{path} is read-only; mgcp needs to write to it")
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            return DatabaseError(f"the directory {folder} is read-only; mgcp needs to write {Path(path).name} "
                                 "and its -wal and -shm files there")
        return DatabaseError(f"cannot open {path} for writing ({exc})")
    if getattr(exc, "errno", None) == errno.ENAMETOOLONG:
        return DatabaseError(f"cannot use {path}: the name is too long for the file system")
    if kind == "NOTDIR":
        return DatabaseError(f"cannot use {path}: a part of the path is a file, not a directory")
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED"):
        return StorageError(f"{path} is locked by another process; try again")
    if name.startswith("SQLITE_CORRUPT") or name.startswith("SQLITE_NOTADB"):
        return DatabaseError(f"{path} is corrupt ({exc}); `mgcp db check` says what is damaged")
    if name.startswith("SQLITE_IOERR") or isinstance(exc, OSError):
        return StorageError(f"cannot read or write {path} ({exc})")
    return DatabaseError(f"database error on {path}: {exc}")


def require_existing(path: str | os.PathLike) -> None:
    """For commands that only read: a missing database is an error (NotFoundError), never made."""
    check_file(path)
    if not Path(path).is_file():
        raise NotFoundError(f"no database at {path} (create one with `mgcp db migrate` or a first save)")


def _free_bytes(folder: Path) -> int:
    try:
        stats = os.statvfs(folder)
    except (OSError, AttributeError):  # no such folder, or no statvfs on this system
        return 1 << 62
    return stats.f_bavail * stats.f_frsize


def applied_migrations(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    try:
        return conn.execute(
            f"SELECT name, applied_at FROM {MIGRATIONS_TABLE} WHERE migration_set = ? ORDER BY rowid",
            [MIGRATION_SET],
        ).fetchall()
    except sqlite3.OperationalError:
        return []  # no migrations table yet


def table_names(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def pending_migrations(conn: sqlite3.Connection, path: str | os.PathLike = "the database") -> list[str]:
    """Known migrations not applied yet. Refuses foreign, corrupt and newer databases."""
    try:
        tables = table_names(conn)
        applied = {name for name, _ in applied_migrations(conn)}
    except sqlite3.Error as exc:
        raise explain(exc, path) from None
    user_tables = {t for t in tables if not t.startswith("sqlite_")}
    # mgcp's: one it upgraded, one it is making (its migrations table alone), or an MGCP v1.2
    # database (a lessons table with the legacy columns); any other file is another application's
    if not applied and not user_tables <= {MIGRATIONS_TABLE}:
        if LEGACY_MARKER_TABLE not in tables:
            raise DatabaseError("this SQLite file belongs to another application (it has no 'lessons' table); "
                                "mgcp neither reads nor changes it")
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({LEGACY_MARKER_TABLE})")}
        missing = [c for c in LEGACY_COLUMNS if c not in columns]
        if missing:
            raise DatabaseError(f"this SQLite file belongs to another application (its 'lessons' table has no "
                                f"{', '.join(missing)} column{'s' if len(missing) > 1 else ''}); "
                                "mgcp neither reads nor changes it")
    known = migration_names()
    unknown = sorted(applied - set(known))
    if unknown:
        raise DatabaseError(
            f"this database was upgraded by a newer mgcp (unknown migrations: {', '.join(unknown)}); "
            "upgrade mgcp to use it"
        )
    return [name for name in known if name not in applied]


def load_migration(name: str):
    return _migration_module(name).migrate


def _migration_module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"mgcp_migration_{name}", migrations_dir() / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def legacy_versions(version: int, rationale: str | None) -> list[tuple[int, str | None, str | None]]:
    """The versions 1..version-1 of a legacy lesson, read from its rationale's "[vK]" markers as the
    backfill reads them (migration 0004): (version, its rationale, the reason that made the next)."""
    return _migration_module("0004_backfill_lesson_versions").reconstruct(version, rationale)


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
    conn.execute("BEGIN IMMEDIATE")  # two processes creating one database at once: one makes it
    try:
        Migrations(MIGRATION_SET).ensure_migrations_table(db)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    for name in pending:
        migrate = load_migration(name)
        conn.execute("BEGIN IMMEDIATE")
        try:
            if name not in {n for n, _ in applied_migrations(conn)}:  # another process may have won the race
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
            if conn.in_transaction:  # SQLite has rolled back by itself after some errors (disk full)
                conn.execute("ROLLBACK")
            raise
    return report


def open_and_migrate(path: str | os.PathLike, allow_empty: bool = False) -> MigrationReport:
    """Check and upgrade the database at `path` (creating it if missing), then close it."""
    conn = connect(path, allow_empty)
    try:
        return apply_migrations(conn)
    except sqlite3.Error as exc:
        raise explain(exc, path) from None
    finally:
        conn.close()


def connect_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    """A read-only connection to an existing mgcp database (checked first; nothing is created)."""
    require_existing(path)
    try:
        return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise explain(exc, path) from None


def status(path: str | os.PathLike) -> dict:
    """Applied and pending migrations and row counts per table, without modifying anything."""
    conn = connect_readonly(path)
    try:
        pending = pending_migrations(conn, path)
        tables = {
            t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
            for t in sorted(table_names(conn))
            if not t.startswith("sqlite_") and not t.startswith("lesson_search_")
        }
        applied = [{"name": n, "applied_at": at} for n, at in applied_migrations(conn)]
    except sqlite3.Error as exc:
        raise explain(exc, path) from None
    finally:
        conn.close()
    return {"applied": applied, "pending": pending, "tables": tables}
