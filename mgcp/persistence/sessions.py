"""Projects and sessions: the one definition of a project's identity and of session numbering,
shared by the async store and the SessionStart hook (which must stay light: this module imports
only the stdlib, mgcp.config and mgcp.validation, and speaks plain sqlite3).

- A project is named by its path: absolute, normalized, and with symlinks resolved when the path
  exists (`config.normalize_path`). A row is found by that path, or by the unresolved path older
  versions stored, or by either as an older writer may have stored it (with a trailing slash, or
  under the home directory as "~/..."); a new project's id is `sha256(path)[:12]` (the legacy rule).
- A session id never seen for the project advances `session_count` by one and is recorded with
  its number. A known id (a resumed or compacted session) does not advance it: the session
  continues at the project's *current* number, since history is a timeline.
"""

from __future__ import annotations

import os
import sqlite3

from mgcp.config import SHARED_KINDS, SHARED_OPERATIONS, normalize_path, plain_path
from mgcp.validation import check_project_path

FIND_PROJECT = """SELECT * FROM project_contexts WHERE project_path IN (?, ?, ?, ?, ?, ?, ?, ?)
                  ORDER BY project_path = ? DESC, project_path = ? DESC LIMIT 1"""
FIND_SESSION = "SELECT session_number FROM project_sessions WHERE project_id = ? AND session_id = ?"
INSERT_SESSION = """INSERT INTO project_sessions (project_id, session_id, session_number, source, first_seen_at)
                    VALUES (?, ?, ?, ?, ?)"""
ADVANCE_PROJECT = """UPDATE project_contexts SET session_count = ?, last_session_id = ?, last_accessed = ?
                     WHERE project_id = ?"""
# The rem_findings a review of a project shows (parameter: its id): its own, and every finding
# about the lessons all projects share.
_SHARED_KINDS = ", ".join(map(repr, SHARED_KINDS))
VISIBLE_TO_PROJECT = (f"(project_id = ? OR operation IN ({', '.join(repr(op) for op in SHARED_OPERATIONS)})"
                      f" OR kind IN ({_SHARED_KINDS})"
                      f" OR (kind = 'summary' AND json_extract(data, '$.of_kind') IN ({_SHARED_KINDS})))")
PENDING_FINDINGS = f"SELECT count(*) FROM rem_findings WHERE status = 'pending' AND {VISIBLE_TO_PROJECT}"


def project_id_for(path: str) -> str:
    import hashlib  # here, not at the top: the hook rarely needs it and it costs ~5 ms to import

    return hashlib.sha256(path.encode("utf-8")).hexdigest()[:12]


def find_params(path: str) -> list[str]:
    """Parameters of FIND_PROJECT for a path as the user gave it: the forms a row may hold it in,
    its key and its unresolved path first."""
    key, plain = normalize_path(path), plain_path(path)
    home = os.path.expanduser("~")
    forms = [key, plain]
    forms += ["~" + p[len(home):] if home not in ("/", "~") and (p == home or p.startswith(home + "/")) else p
              for p in forms]
    forms += [p.rstrip("/") + "/" for p in forms]
    return forms + [key, plain]


def new_project(path: str, now: str) -> dict:
    """The project_contexts row of a project seen for the first time (`path` normalized; refused
    when too long or holding a secret: `validation.check_project_path`)."""
    check_project_path(path)
    return {"project_id": project_id_for(path), "project_name": os.path.basename(path) or path,
            "project_path": path, "last_accessed": now, "session_count": 0}


def register_session(conn: sqlite3.Connection, path: str, session_id: str, source: str | None,
                     now: str) -> tuple[str, int, bool]:
    """Register a session for the project at `path` (created if new), in one transaction.

    Returns (project_id, the project's current session number, is_new). `conn` must be in
    autocommit mode.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        cur = conn.cursor()
        cur.row_factory = sqlite3.Row
        row = cur.execute(FIND_PROJECT, find_params(path)).fetchone()
        if row is None:
            project = new_project(normalize_path(path), now)
            conn.execute(f"INSERT INTO project_contexts ({', '.join(project)}) VALUES ({', '.join('?' * len(project))})",
                         list(project.values()))
            project_id, count = project["project_id"], 0
        else:
            project_id, count = row["project_id"], int(row["session_count"] or 0)
        if conn.execute(FIND_SESSION, [project_id, session_id]).fetchone():
            conn.execute("COMMIT")
            return project_id, count, False
        count += 1
        conn.execute(INSERT_SESSION, [project_id, session_id, count, source, now])
        conn.execute(ADVANCE_PROJECT, [count, session_id, now, project_id])
        conn.execute("COMMIT")
        return project_id, count, True
    except BaseException:
        if conn.in_transaction:  # SQLite has rolled back by itself after some errors (disk full)
            conn.execute("ROLLBACK")
        raise


def last_runs(conn: sqlite3.Connection, project_id: str) -> dict[str, int]:
    """The session at which each REM operation last ran for the project."""
    rows = conn.execute(
        "SELECT operation, last_run_session FROM rem_state WHERE project_id = ?", [project_id])
    return {op: int(last or 0) for op, last in rows}


def pending_findings(conn: sqlite3.Connection, project_id: str) -> int:
    """Findings awaiting review for the project (lesson findings are shared by every project)."""
    return conn.execute(PENDING_FINDINGS, [project_id]).fetchone()[0]


def open_current(path: str, timeout: float, known_migrations: set[str] | None = None) -> sqlite3.Connection | None:
    """An autocommit connection to an existing database for quick work (the SessionStart hook).

    `timeout` (seconds) is the busy timeout, kept short so a locked database fails fast. Returns None
    -- without creating anything -- when the file does not exist, or when `known_migrations` is given
    and the database's applied mgcp migrations are not exactly those (pending, unknown, or a legacy
    file without the migrations table): the caller then goes through persistence.migrate, which
    upgrades or refuses. Other errors (a corrupt file, a lock) raise sqlite3 errors.
    """
    if not os.path.isfile(path):
        return None
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")  # as persistence.migrate.connect: safe in WAL mode
        if known_migrations is not None:
            try:
                applied = {r[0] for r in conn.execute(
                    "SELECT name FROM _sqlite_migrations WHERE migration_set = 'mgcp'")}
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                applied = None
            if applied != set(known_migrations):
                conn.close()
                return None
    except BaseException:
        conn.close()
        raise
    return conn
