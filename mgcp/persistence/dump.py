"""The whole knowledge base as JSON Lines, back in again, and a consistent copy of the file.

`export_lines(path)` reads one snapshot (other processes may go on writing) and yields a header line,
one line per row, `{"row": {...}, "table": "..."}`, tables in the order of TABLES and rows in
each table's key order, columns sorted by name, values exactly as stored (JSON columns stay the text
SQLite holds), and a last line `{"end": true, "rows": N}`: a file cut short (a killed export, a
partial copy) lacks it or counts other rows, and is refused. The same knowledge therefore always
exports to the same bytes. An export of format version 1 (before the last line existed) still
imports.

`import_rows(store, rows)` reads the rows twice, never holding them all (`ExportReader`: one open
file, refused if it changed between the passes): first it checks every row (required columns, each
value of the type its column declares, JSON columns holding JSON of the shape the store reads, the
row read back by the store's own reader where it has one, a lesson's text as `lesson add` checks
it, every lesson with its versions), then it writes everything in one transaction; a row refused
is a one-line InvalidInputError naming its table, key and column:

- into an empty database (no row in any exported table), every row goes in as it was, ids included,
  so that exporting the result reproduces the file byte for byte;
- into a database that already holds knowledge, nothing is duplicated. A lesson whose id exists here
  is kept as it is here, with its versions and lifecycle; a project (by its id, a hash of its path)
  likewise, with its history, sessions and REM schedule; a finding whose id exists here, with its
  actions. A project whose path is here under another id is kept as it is here. A finding comes in only
  if every lesson it is about came in or is identical here, its project and run came in, and no
  finding with its fingerprint is pending or rejected here; a kept project's runs stay out. A lesson
  the file has merged into one whose id is another lesson here comes in active (with no finding to
  undo, the merge would hide it behind a lesson that does not say what it said). Rows with
  an integer id of their own (history rows, runs, actions) get new ids, and the rows that point at
  them (a finding's run, an action's recorded row images) are pointed at the new ones. Everything
  left out is reported (`ImportReport.skipped`), and so is a kept lesson or project whose versions,
  outcomes or context saves in the file outnumber those here (`ImportReport.beyond`: what it gained
  elsewhere since, which this import does not bring). A project here only as sessions the hook registered
  (no history of its own) is replaced by the file's project and history (`ImportReport.replaced`).

The lesson search index is derived, not exported: once the rows are in, the imported lessons that
are active are indexed.

TABLES lists each exported table with the columns that order its rows and, for merges, what a row
belongs to (OWNERS) and how a copy is recognised (NATURAL). A table a later migration adds goes into
TABLES (and, if its rows belong to a lesson or a project, into OWNERS); `tests/test_dump.py` fails
while a table is neither exported nor listed in NOT_EXPORTED.

`backup(path, dest)` copies the database with SQLite's online backup API: one consistent snapshot,
taken while other processes keep writing, written beside `dest` and renamed into place.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import groupby, islice
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator

from mgcp.errors import InvalidInputError, MgcpError
from mgcp.files import replace_with
from mgcp.persistence import check, migrate, sessions
from mgcp.persistence.columns import TAGS, comma_separated, json_list, json_shape
from mgcp.persistence.database import dumps
from mgcp.shown import json_escaped
from mgcp.validation import check_unicode

FORMAT = "mgcp-export"
BATCH = 5000  # rows inserted per executemany into an empty database
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1: no last line, so a cut is not seen

# table -> the columns that order its rows (a unique key)
TABLES: dict[str, tuple[str, ...]] = {
    "lessons": ("id",),
    "lesson_versions": ("lesson_id", "version"),
    "lesson_lifecycle": ("lesson_id",),
    "lesson_usage": ("lesson_id",),
    "lesson_traits": ("lesson_id", "version"),
    "lesson_outcomes": ("id",),
    "lesson_outcome_stats": ("lesson_id",),  # after lesson_outcomes: its streak_started names one
    "project_contexts": ("project_id",),
    "context_history": ("id",),
    "project_sessions": ("project_id", "session_number"),  # the order the sessions were seen
    "decision_observations": ("project_id", "session_number", "decision"),
    "reinforced_patterns": ("id",),
    "query_log": ("id",),
    "rem_state": ("project_id", "operation"),
    "rem_runs": ("id",),
    "rem_findings": ("id",),
    "rem_actions": ("id",),
    "community_runs": ("id",),
    "context_summaries": ("id",),
    "community_summaries": ("community_id",),
    "telemetry_events": ("id",),
    "workflows": ("id",),
}
# Derived or bookkeeping tables, never exported.
NOT_EXPORTED = {"_sqlite_migrations", "sqlite_sequence", "lesson_search", "lesson_search_docs"}
# What REM cycles keep of what they computed, to compute only what changed next time: caches,
# which a cycle rebuilds when they are missing (deleting them changes no result, only the time).
CACHES = {"kept_pairs", "community_kept_runs", "pattern_observations",
          "pattern_observation_marks"}
CACHES |= {"community_kept_titles", "kept_corpora", "kept_indexes"}
CACHES |= {"community_kept_readings"}
# Derived from the rows they watch or read; a database gets its own when it is created or cycled.
NOT_EXPORTED |= {"change_marks"} | CACHES
NOT_EXPORTED_PREFIXES = ("lesson_search_", "sqlite_")

# Tables whose integer `id` is only a row number: a merge gives their rows new ids.
ROW_NUMBERED = {"lesson_versions", "lesson_outcomes", "context_history", "query_log", "rem_runs", "rem_actions",
                "community_runs", "context_summaries"}
# table -> (owner table, the column naming the owner): a row goes in only with its owner.
OWNERS = {
    "lesson_versions": ("lessons", "lesson_id"),
    "lesson_lifecycle": ("lessons", "lesson_id"),
    "lesson_usage": ("lessons", "lesson_id"),
    "lesson_traits": ("lessons", "lesson_id"),
    "lesson_outcomes": ("lessons", "lesson_id"),
    "lesson_outcome_stats": ("lessons", "lesson_id"),
    "context_history": ("project_contexts", "project_id"),
    "project_sessions": ("project_contexts", "project_id"),
    "decision_observations": ("project_contexts", "project_id"),
    "rem_state": ("project_contexts", "project_id"),
    "context_summaries": ("project_contexts", "project_id"),
    "rem_actions": ("rem_findings", "finding_id"),
}
# For owner-less rows of a row-numbered table: the columns that recognise a copy already here.
NATURAL = {
    "query_log": ("query", "project_id", "created_at"),
    "rem_runs": ("project_id", "started_at"),
    "community_runs": ("run_id", "created_at"),
    "rem_actions": ("run_id", "action", "applied_at"),
}
# Columns that hold the id of a row-numbered table's row (renumbered by a merge): table -> {column: its table}.
ID_COLUMNS = {"rem_findings": {"run_id": "rem_runs"}, "rem_actions": {"run_id": "rem_runs"},
              "community_runs": {"run_id": "rem_runs"}, "lesson_outcome_stats": {"streak_started": "lesson_outcomes"}}
# History a kept owner may have gained in the file since it was last here (newer versions, outcomes,
# saves): left out with its owner, and counted by owner so that the report can say so.
COUNTED_HISTORY = ("lesson_versions", "lesson_outcomes", "context_history")
# A project's own history: a project with none of these rows here is only registered (by the hook).
PROJECT_HISTORY = ("context_history", "decision_observations", "rem_state", "context_summaries", "rem_runs",
                   "rem_findings")
# What the import reports a skipped owner as.
NOUNS = {"lessons": "lesson", "project_contexts": "project", "rem_findings": "finding"}


def header() -> str:
    return _line({"format": FORMAT, "version": FORMAT_VERSION})


def _line(obj: dict) -> str:
    """One line of an export: safe to show in a terminal (`mgcp export jsonl` to stdout, `cat` of
    the file), the same values."""
    return json_escaped(json.dumps(obj, ensure_ascii=False, sort_keys=True)) + "\n"


def _value(value):
    if isinstance(value, bytes):
        return {"$base64": base64.b64encode(value).decode("ascii")}
    return value


def _stored(value):
    if isinstance(value, dict) and set(value) == {"$base64"}:
        return base64.b64decode(value["$base64"])
    return value


def exported_tables(conn: sqlite3.Connection) -> list[str]:
    present = set(migrate.table_names(conn))
    return [t for t in TABLES if t in present]


def unlisted_tables(conn: sqlite3.Connection) -> list[str]:
    """Tables of the database that are neither exported nor deliberately left out."""
    return sorted(t for t in migrate.table_names(conn)
                  if t not in TABLES and t not in NOT_EXPORTED and not t.startswith(NOT_EXPORTED_PREFIXES))


def export_lines(path: str | os.PathLike) -> Iterator[str]:
    """The whole knowledge base as JSON Lines, from one read snapshot."""
    conn = migrate.connect_readonly(path)
    try:
        pending = migrate.pending_migrations(conn, path)
        if pending:
            raise MgcpError(f"{path} needs an upgrade first ({', '.join(pending)} pending): run `mgcp db migrate`")
        conn.row_factory = sqlite3.Row
        conn.execute("BEGIN")  # one snapshot for every table
        yield header()
        count = 0
        for table in exported_tables(conn):
            order = ", ".join(TABLES[table])
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY {order}'):
                yield _line({"table": table, "row": {k: _value(row[k]) for k in row.keys()}})
                count += 1
        conn.execute("COMMIT")
        yield _line({"end": True, "rows": count})
    except sqlite3.Error as exc:
        raise migrate.explain(exc, path) from None
    finally:
        conn.close()


def check_importable(path: str | os.PathLike, export: str | os.PathLike, name: str) -> None:
    """Read an export of the database at `path` (the file `export`, called `name` in messages) back
    as an import checks it: a row an import would refuse (a hand-edited column, say) raises
    MgcpError naming it, so that no export is kept that cannot be imported."""
    conn = migrate.connect_readonly(path)
    try:
        conn.row_factory = sqlite3.Row
        info = {t: [dict(r) for r in conn.execute(f'PRAGMA table_info("{t}")')] for t in TABLES}
    finally:
        conn.close()
    columns = {table: {c["name"] for c in cols} for table, cols in info.items()}
    with open(export, encoding="utf-8", newline="") as fh:
        try:
            check_rows(parse(fh, name), columns, info, name)
        except InvalidInputError as exc:
            reason = str(exc).removesuffix("; nothing was imported")
            raise MgcpError(f"{reason}: an import would refuse it, so no export was written; `mgcp db check` "
                            "finds such rows (`mgcp db backup` copies the database as it is)") from None


# -- import ----------------------------------------------------------------------------------------

@dataclass
class ImportReport:
    mode: str = "empty"  # "empty": rebuilt as exported; "merge": added beside what was there
    imported: dict[str, int] = field(default_factory=dict)
    skipped: list[dict] = field(default_factory=list)  # {"kind", "id", "reason"} per lesson, project, finding
    skipped_rows: dict[str, int] = field(default_factory=dict)
    replaced: list[dict] = field(default_factory=list)  # {"kind", "id", "reason"} per project taken from the file
    # {"kind", "id", "table", "rows"}: a kept owner's history rows the file holds beyond those here
    beyond: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"mode": self.mode, "imported": self.imported, "skipped": self.skipped,
                "skipped_rows": self.skipped_rows, "replaced": self.replaced, "beyond": self.beyond}


class ExportReader:
    """An export read as rows as often as the import needs, from one open text file: each call reads
    it from the start. A call that reads other bytes than the first (the file was changed in place
    while it was imported) raises InvalidInputError at its end, so what is written is what was
    checked: the writing pass then rolls back."""

    def __init__(self, handle: IO[str], source: str):
        self.handle, self.source, self.digest = handle, source, None

    def __call__(self) -> Iterator[tuple[str, dict]]:
        self.handle.seek(0)
        digest = hashlib.sha256()

        def lines() -> Iterator[str]:
            try:
                for line in self.handle:
                    digest.update(line.encode("utf-8", "surrogatepass"))
                    yield line
            except (OSError, UnicodeDecodeError) as exc:
                what = getattr(exc, "strerror", None) or exc
                if isinstance(exc, UnicodeDecodeError) and exc.object[:16] == b"SQLite format 3\x00":
                    what = ("it is an SQLite database, not an export (`mgcp db backup --db FILE ...` copies a "
                            "database; `mgcp export jsonl --db FILE` makes an export of it)")
                raise InvalidInputError(f"cannot read {self.source}: {what}; nothing was imported") from None

        yield from parse(lines(), self.source)
        if self.digest is None:
            self.digest = digest.digest()
        elif digest.digest() != self.digest:
            raise InvalidInputError(f"{self.source} changed while it was being imported; nothing was imported")


def parse(lines: Iterable[str], source: str) -> Iterator[tuple[str, dict]]:
    """Every row of an export, checked as it is read: a clear InvalidInputError names the first bad
    line."""
    version, rows, end = None, 0, None
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        where = f"{source} line {number}"
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise InvalidInputError(f"{where} is not JSON ({exc.msg}); nothing was imported") from None
        if not isinstance(obj, dict):
            raise InvalidInputError(f"{where} is not a JSON object; nothing was imported")
        if version is None:
            if obj.get("format") != FORMAT:
                raise InvalidInputError(f"{source} is not an mgcp export (its first line is not the "
                                        f"{FORMAT} header); nothing was imported")
            version = obj.get("version")
            if version not in READABLE_VERSIONS or isinstance(version, bool):
                raise InvalidInputError(f"{source} is export format version {version!r}; this mgcp reads "
                                        f"versions {', '.join(map(str, READABLE_VERSIONS))}; nothing was imported")
            continue
        if end is not None:
            raise InvalidInputError(f"{where} follows the export's last line; nothing was imported")
        if version >= 2 and "end" in obj:
            end = obj
            continue
        rows += 1
        table, row = obj.get("table"), obj.get("row")
        if table not in TABLES or not isinstance(row, dict):
            raise InvalidInputError(f"{where}: expected {{\"table\": one of mgcp's tables, \"row\": {{...}}}}, "
                                    f"got table {table!r}; nothing was imported")
        yield table, {k: _stored(v) for k, v in row.items()}
    if version is None:
        raise InvalidInputError(f"{source} is empty; nothing was imported")
    if version >= 2 and (end is None or end.get("rows") != rows):
        said = "it has no last line" if end is None else f"its last line counts {end.get('rows')!r} rows, it holds {rows}"
        raise InvalidInputError(f"{source} is cut short or altered ({said}); nothing was imported")


async def import_rows(store, rows: Callable[[], Iterable[tuple[str, dict]]], source: str) -> ImportReport:
    """Write an export's rows into the store in one transaction (see the module docstring). `rows`
    gives the rows afresh at each call: they are read twice (checked, then written), never held
    all at once, so an export larger than memory imports too."""
    db = store.db
    columns = {table: {r["name"] for r in await db.fetchall(f'PRAGMA table_info("{table}")')} for table in TABLES}
    info = {table: [dict(r) for r in await db.fetchall(f'PRAGMA table_info("{table}")')] for table in TABLES}
    with_history = check_rows(rows(), columns, info, source)
    try:
        return await _write(store, rows(), columns, with_history, source)
    except sqlite3.IntegrityError as exc:
        raise InvalidInputError(f"{source}: {exc}; nothing was imported") from None


def _key(table: str, row: dict) -> str:
    return ", ".join(f"{c}={row.get(c)!r}" for c in TABLES[table])


def _refusal(source: str, table: str, row: dict):
    return lambda message: InvalidInputError(f"{source}: {table} row ({_key(table, row)}): {message}; "
                                             "nothing was imported")


def check_rows(rows: Iterable[tuple[str, dict]], columns: dict[str, set], info: dict[str, list[dict]],
               source: str) -> set:
    """Every row checked before anything is written: its table and columns exist here, its key and
    required columns are there, each value is of its column's declared type (INTEGER, REAL, TEXT;
    NULL only where allowed), its JSON columns hold JSON of the shape the store reads, the store's
    reader of its table (READERS) reads it, a lesson's text passes the checks `lesson add` makes,
    every lesson comes with its version rows and says what its current version says, and each
    project's context history replays to the catalogue hashes it records (what `db check` verifies). Returns the projects the rows bring history for
    (what a merge needs to know up front)."""
    required = {t: set(TABLES[t]) | {c["name"] for c in cols if c["notnull"] and c["dflt_value"] is None}
                for t, cols in info.items()}
    declared = {t: {c["name"]: _Column.of(t, c) for c in cols} for t, cols in info.items()}
    defaults = {t: {c["name"]: _sql_literal(c["dflt_value"]) for c in cols} for t, cols in info.items()}
    lessons, versioned, with_history = [], set(), set()
    current: dict[str, tuple] = {}   # lesson id -> (its version, the digest of its content)
    said: dict[tuple, bytes] = {}    # (lesson id, version) -> the digest of that version's content
    held: dict[str, Counter] = defaultdict(Counter)  # lesson id -> how many rows of each version
    replays: dict[str, tuple] = {}  # project id -> (its last context_history id, its catalogue replayed so far)
    for table, row in rows:
        if not columns[table]:
            raise InvalidInputError(f"{source}: this database has no table {table!r} (run `mgcp db migrate`); "
                                    "nothing was imported")
        unknown = sorted(set(row) - columns[table])
        if unknown:
            raise InvalidInputError(f"{source}: table {table} has no column {unknown[0]!r} here (an export from a "
                                    "newer mgcp?); nothing was imported")
        if table == "context_history":
            with_history.add(row.get("project_id"))
        bad = _refusal(source, table, row)
        missing = sorted(c for c in required[table] if row.get(c) is None)
        if missing:
            raise bad(f"{missing[0]} is missing")
        for column, value in row.items():
            problem = _value_problem(declared[table][column], value)
            if problem:
                raise bad(f"{column} {problem}")
        _read_back(table, {**defaults[table], **row}, bad)
        if table == "context_history":
            _replay_row(replays, row, bad)
        if table in ("lessons", "lesson_versions"):
            # What was stored goes back as it was: the rules for new lessons (lengths, id format,
            # the secret screen) do not apply, or a database's own export could not come back. A
            # reconstructed version (its action lost before versioning) has no action.
            lost = table == "lesson_versions" and row.get("reconstructed")
            try:
                for column in ("trigger", "rationale") + (() if lost else ("action",)):
                    value = row.get(column)
                    if value is not None and not isinstance(value, str):
                        raise InvalidInputError(f"{column} must be text")
                    check_unicode(column, value or "")
                if not (row.get("trigger") or "").strip() or not (lost or (row.get("action") or "").strip()):
                    raise InvalidInputError("a lesson needs a trigger and an action")
            except InvalidInputError as exc:
                raise bad(str(exc)) from None
            if table == "lessons":
                lessons.append(row["id"])
                current[row["id"]] = (row.get("version"), _content_digest(row))
            else:
                versioned.add(row["lesson_id"])
                said[(row["lesson_id"], row.get("version"))] = _content_digest(row)
                held[row["lesson_id"]][row.get("version")] += 1
    unversioned = [lesson_id for lesson_id in lessons if lesson_id not in versioned]
    if unversioned:
        raise InvalidInputError(f"{source}: lesson {unversioned[0]} has no lesson_versions rows; nothing was imported")
    for lesson_id, (version, digest) in current.items():
        problem = _history_problem(held[lesson_id], version)
        if problem:
            raise InvalidInputError(f"{source}: lesson {lesson_id} {problem} (`db check` would fail); "
                                    "nothing was imported")
        if said.get((lesson_id, version), digest) != digest:
            raise InvalidInputError(f"{source}: lesson {lesson_id} says other than its version {version} "
                                    "(`db check` would fail); nothing was imported")
    return with_history


def _history_problem(versions: Counter, n) -> str | None:
    """What is wrong with a lesson's version rows (how many of each version) for a lesson at
    version `n`: every version from 1 to n, each once, and no other (as `db check` holds them)."""
    if not isinstance(n, int) or n < 1:
        return f"is at version {n!r}, not a whole number from 1"
    twice, outside, missing = check.version_gaps(versions, n)
    if twice:
        return f"has version {twice[0]} more than once"
    if outside:
        return f"has version {outside[0]!r}, outside 1..{n}"
    if missing:
        return f"is at version {n} but the file has no version {missing[0]} of it"
    return None


LARGEST = 2 ** 63  # SQLite's integers are 64-bit


@dataclass(frozen=True)
class _Column:
    """What a column takes, from its declaration: INTEGER, REAL, TEXT or JSON (text holding JSON of
    `shape`), and whether it may be NULL."""

    kind: str
    notnull: bool
    shape: type | None = None
    words: bool = False  # a tags column: comma-separated words are read too (`TAGS`)

    @classmethod
    def of(cls, table: str, info: dict) -> _Column:
        kind = (info["type"] or "").upper()
        shape = json_shape(table, info["name"], info["dflt_value"])
        return cls(kind, bool(info["notnull"]) or bool(info["pk"]), shape if kind == "JSON" else None,
                   (table, info["name"]) in TAGS)


_SHAPE_NAMES = {list: "a JSON list", dict: "a JSON object"}


def _value_problem(column: _Column, value) -> str | None:
    """What is wrong with `value` as this column's, as the store reads it back; None when nothing.
    (An export holds every value as SQLite gave it: an integer column's integers, a text column's
    text; a value of another type would go in as it is, and fail every read of its row.)"""
    if value is None:
        return "is missing (null), and this column cannot be null" if column.notnull else None
    if isinstance(value, bool) or not isinstance(value, (str, int, float, bytes)):
        return f"holds a {type(value).__name__}, not a stored value"
    if column.kind == "INTEGER":
        if not isinstance(value, int):
            return f"is not an integer ({_shown(value)})"
        if not -LARGEST <= value < LARGEST:
            return f"is {value}, past SQLite's 64-bit integers"
    elif column.kind == "REAL":
        if not isinstance(value, (int, float)):
            return f"is not a number ({_shown(value)})"
        if value != value or value in (float("inf"), float("-inf")):
            return f"is {value}, not a finite number"
    elif column.kind in ("TEXT", "JSON"):
        if not isinstance(value, str):
            return f"is not text ({_shown(value)})"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode text (it holds a lone surrogate)"
    if column.kind == "JSON" and not (column.words and comma_separated(value)):
        try:
            parsed = json.loads(value)
        except ValueError:
            return f"is not JSON ({_shown(value)})"
        if column.shape and not isinstance(parsed, column.shape):
            return f"is not {_SHAPE_NAMES[column.shape]} ({_shown(value)})"
    return None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _sql_literal(text: str | None):
    """A column's declared default as the value it gives (what a row without the column reads)."""
    if text is None or text.upper() == "NULL":
        return None
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1].replace("''", "'")
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None  # an expression (CURRENT_TIMESTAMP): nothing the readers below look at


def _lesson(row: dict):
    from mgcp.persistence.lessons import lesson_from_row

    # the columns lesson_from_row reads from the other tables, as a lesson without those rows has them
    return lesson_from_row({"status": "active", "superseded_by": None, "lc_project_id": None, "kind": "pattern",
                            "confidence": 0.8, "helped": 0, "failed": 0, "streak": 0, **row})


def _traits(row: dict):
    """A version's kind and confidence, held to what `lesson add` takes."""
    from mgcp.persistence.lessons import check_confidence, check_kind

    check_kind(row.get("kind"))
    check_confidence(row.get("confidence"))


def _status(row: dict):
    from mgcp.models import LessonStatus

    try:
        return LessonStatus(row["status"])
    except ValueError:
        raise InvalidInputError(f"status {row['status']!r} is not one of "
                                f"{', '.join(s.value for s in LessonStatus)}") from None


def _reader(module: str, name: str) -> Callable[[dict], object]:
    """The store's reader `name` in `module`, imported when it is first called (the models are not
    on every command's path)."""
    def read(row: dict):
        return getattr(importlib.import_module(module), name)(row)

    return read


# table -> the store's own reader of its rows (what `lesson list`, `context show`, `rem review`...
# build from a row): a row they cannot read is refused, whatever its column types.
READERS: dict[str, Callable[[dict], object]] = {
    "lessons": _lesson, "lesson_versions": _reader("mgcp.persistence.lessons", "version_from_row"),
    "lesson_lifecycle": _status, "lesson_traits": _traits,
    "project_contexts": _reader("mgcp.persistence.context", "project_from_row"),
    "context_history": _reader("mgcp.persistence.context", "snapshot_from_row"),
    "rem_findings": _reader("mgcp.persistence.rem", "finding_from_row"),
    "reinforced_patterns": _reader("mgcp.persistence.patterns", "pattern_from_row"),
}


def _read_back(table: str, row: dict, bad: Callable[[str], InvalidInputError]) -> None:
    """Read the row as the store would, once it is in; a row the store could not read is refused,
    naming the column (and the place in its JSON) the reader stopped at."""
    from pydantic import ValidationError

    reader = READERS.get(table)
    if reader is None:
        return
    try:
        reader(row)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
        raise bad(f"{where} cannot be read back: {error['msg']}") from None
    except InvalidInputError as exc:
        raise bad(str(exc)) from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise bad(f"cannot be read back ({type(exc).__name__}: {exc})") from None


def _replay_row(replays: dict, row: dict, bad: Callable[[str], InvalidInputError]) -> None:
    """Replay one context_history row onto its project's catalogue (rows come in id order, as
    `export jsonl` writes them), refusing it as `db check` would."""
    last, replay = replays.get(row.get("project_id")) or (None, check.CatalogueReplay())
    if last is not None and not (isinstance(row["id"], int) and row["id"] > last):
        raise bad(f"comes after row {last} of its project: a project's history must be in id order")
    problem = replay.step(row)
    if problem:
        raise bad(problem)
    replays[row.get("project_id")] = (row["id"], replay)


def _content_digest(row: dict) -> bytes:
    """What `db check` compares of a lesson and its current version, as one digest."""
    return hashlib.blake2b(repr(check.content(row)).encode(), digest_size=16).digest()


async def _write(store, rows: Iterable[tuple[str, dict]], columns: dict[str, set], with_history: set,
                 source: str) -> ImportReport:
    db = store.db
    async with db.transaction():
        await db.conn.execute("PRAGMA defer_foreign_keys = ON")
        empty = True
        for table in TABLES:
            if columns[table] and await db.fetchone(f'SELECT 1 FROM "{table}" LIMIT 1'):
                empty = False
                break
        report = ImportReport(mode="empty" if empty else "merge")
        if empty:
            lessons_in = await _rebuild(db, rows, report)
        else:
            merge = _Merge(db, report, with_history)
            for table, row in rows:
                await merge.add(table, row)
            await merge.drop_links_to_others()
            await merge.count_beyond()
            lessons_in = merge.lessons_in
        for lesson_id in lessons_in:
            await store.lessons.reindex(lesson_id)
        problems = await db.fetchall("PRAGMA foreign_key_check")
        if problems:
            first = dict(problems[0])
            raise InvalidInputError(f"{source}: a {first['table']} row points at a missing {first['parent']} row; "
                                    "nothing was imported")
    return report


async def _rebuild(db, rows: Iterable[tuple[str, dict]], report: ImportReport) -> list[str]:
    """Every row as it was, ids included, in batches of one table and one set of columns (at most
    BATCH rows at a time). Returns the ids of the lessons inserted."""
    lessons_in: list[str] = []
    for (table, cols), run in groupby(rows, key=lambda item: (item[0], tuple(item[1]))):
        names, marks = ", ".join(f'"{c}"' for c in cols), ", ".join("?" for _ in cols)
        sql = f'INSERT INTO "{table}" ({names}) VALUES ({marks})'
        while values := [list(row.values()) for _, row in islice(run, BATCH)]:
            await db.conn.execute("SAVEPOINT mgcp_import_batch")
            try:
                await db.conn.executemany(sql, values)
            except sqlite3.IntegrityError:
                await db.conn.execute("ROLLBACK TO mgcp_import_batch")
                for value in values:  # one at a time, to name the row that cannot go in
                    await _insert(db, table, dict(zip(cols, value)))
                raise
            await db.conn.execute("RELEASE mgcp_import_batch")
            report.imported[table] = report.imported.get(table, 0) + len(values)
            if table == "lessons":
                lessons_in += [v[cols.index("id")] for v in values]
    return lessons_in


class _Merge:
    """Rows added beside the knowledge already here, one at a time in file order (owners come
    before what they own): nothing duplicated, everything left out counted in the report.

    A finding comes in only when every lesson it is about came in or is identical here, and its
    project was not kept as it is here: answering it must change only what it was found about. A
    kept project's runs stay out too, and so do the findings and actions of a run left out.

    A project here that holds nothing but the sessions the SessionStart hook registered (no saved
    context, observations, REM state, runs or findings) is no history to keep: when the file brings
    that project's history, the file's project replaces it, and the report says so."""

    def __init__(self, db, report: ImportReport, with_history: set):
        self.db, self.report = db, report
        self.with_history = with_history
        self.imported: dict[str, set] = {t: set() for t in NOUNS}  # owners this import added
        self.skipped: dict[str, set] = {t: set() for t in NOUNS}  # owners kept as they are here
        self.identical: set[str] = set()  # lessons skipped because the same lesson is here
        self.runs_out: set[int] = set()  # ids (in the file) of the REM runs left out
        self.new_ids: dict[str, dict[int, int]] = {t: {} for t in ROW_NUMBERED}
        self.lessons_in: list[str] = []
        self.history_out: dict[str, Counter] = {t: Counter() for t in COUNTED_HISTORY}  # kept owner -> rows

    async def count_beyond(self) -> None:
        """Report each kept owner whose history rows in the file outnumber those here (its newer
        versions, outcomes or saves were left out with it)."""
        for table, counts in self.history_out.items():
            if not counts:
                continue
            owner_table, column = OWNERS[table]
            here = dict(await self.db.fetchall_tuples(f'SELECT "{column}", count(*) FROM "{table}" GROUP BY 1'))
            for owner, n in sorted(counts.items()):
                if n > here.get(owner, 0):
                    self.report.beyond.append({"kind": NOUNS[owner_table], "id": owner, "table": table,
                                               "rows": n - here.get(owner, 0)})

    def _skip(self, table: str) -> None:
        self.report.skipped_rows[table] = self.report.skipped_rows.get(table, 0) + 1

    def _skip_owner(self, table: str, ident, reason: str) -> None:
        self.skipped[table].add(ident)
        self.report.skipped.append({"kind": NOUNS[table], "id": ident, "reason": reason})
        self._skip(table)

    async def _project_kept(self, project_id) -> bool:
        """The project is kept as it is here (its history did not come in)."""
        if project_id is None or project_id in self.imported["project_contexts"]:
            return False
        return project_id in self.skipped["project_contexts"] or await _exists(self.db, "project_contexts", project_id)

    async def _registered_only(self, project_id: str) -> bool:
        for table in PROJECT_HISTORY:
            if await self.db.fetchone(f'SELECT 1 FROM "{table}" WHERE project_id = ? LIMIT 1', [project_id]):
                return False
        return True

    async def _replace_project(self, project_id: str) -> None:
        sessions = await self.db.fetchone("SELECT count(*) AS n FROM project_sessions WHERE project_id = ?",
                                          [project_id])
        await self.db.conn.execute("DELETE FROM project_sessions WHERE project_id = ?", [project_id])
        await self.db.conn.execute("DELETE FROM project_contexts WHERE project_id = ?", [project_id])
        self.report.replaced.append({"kind": "project", "id": project_id, "reason": (
            f"here only as {sessions['n']} session(s) the SessionStart hook registered, with no saved context; "
            "replaced by the imported project, its history and sessions")})

    async def _finding_out(self, row: dict, run_out: bool) -> str | None:
        """Why a new finding stays out, or None."""
        if run_out:
            return "its REM run was not imported"
        try:
            subject = json.loads(row.get("subject") or "{}")
        except ValueError:
            subject = {}
        others = sorted(str(lesson_id) for lesson_id in (subject if isinstance(subject, dict) else {})
                        if lesson_id not in self.imported["lessons"] and lesson_id not in self.identical)
        if others:
            return f"it is about lesson(s) {', '.join(others)}, not imported (this database's kept)"
        if await self._project_kept(row.get("project_id")):
            return f"its project {row['project_id']} was not imported (this database's kept)"
        same = await self.db.fetchone(
            "SELECT id, status FROM rem_findings WHERE fingerprint = ? AND status IN ('pending', 'rejected') "
            "ORDER BY id LIMIT 1", [row.get("fingerprint")])
        if same is not None:
            return f"the same finding is here as {same['id']} ({same['status']})"
        return None

    async def _pattern_out(self, row: dict) -> str | None:
        """Why a reinforced pattern stays out, or None: it must be derived only from what came in
        (or is the same here), or it would stamp a lesson here with another's reinforcement; the
        next pattern_reinforcement run finds again what the history here holds."""
        try:
            sources = json.loads(row.get("derived_from") or "[]")
        except ValueError:
            sources = []
        lessons = [str(s).removeprefix("lesson:") for s in sources if str(s).startswith("lesson:")]
        lessons += [row["lesson_id"]] if row.get("lesson_id") else []
        others = sorted({lesson_id for lesson_id in lessons
                         if lesson_id not in self.imported["lessons"] and lesson_id not in self.identical})
        if others:
            return f"it reinforces lesson(s) {', '.join(others)}, not imported (this database's kept)"
        projects = sorted({str(s).split(":")[1] for s in sources if str(s).startswith("session:")})
        kept = [project_id for project_id in projects if await self._project_kept(project_id)]
        if kept:
            return f"it is derived from sessions of project(s) {', '.join(kept)}, not imported (this database's kept)"
        if await self.db.fetchone("SELECT 1 FROM reinforced_patterns WHERE cluster_key = ?", [row.get("cluster_key")]):
            return "the same pattern is here"
        return None

    async def add(self, table: str, row: dict) -> None:
        run_out = table in ID_COLUMNS and row.get("run_id") in self.runs_out
        if run_out and table == "rem_actions" and row.get("finding_id") is None:
            return self._skip(table)
        if run_out and table != "rem_findings":
            row = {**row, "run_id": None}
        for column, target in ID_COLUMNS.get(table, {}).items():
            if row.get(column) is not None:
                row = {**row, column: self.new_ids[target].get(row[column], row[column])}
        owner_is_new = False
        if table in OWNERS and row.get(OWNERS[table][1]) is not None:
            owner_table, column = OWNERS[table]
            owner_is_new = row[column] in self.imported[owner_table]
            if not owner_is_new and (row[column] in self.skipped[owner_table]
                                     or await _exists(self.db, owner_table, row[column])):
                if table in self.history_out:
                    self.history_out[table][row[column]] += 1
                return self._skip(table)
        if table in NOUNS:
            ident = row[TABLES[table][0]]
            existing = await self.db.row(table, {TABLES[table][0]: ident})
            if existing is not None and table == "project_contexts" and ident in self.with_history \
                    and await self._registered_only(ident):
                await self._replace_project(ident)
                existing = None
            if existing is not None:
                differs = _differs(existing, row)
                if not differs and table == "lessons":
                    self.identical.add(ident)
                return self._skip_owner(table, ident, "already here" if not differs else
                                        f"here, differing in {', '.join(differs)} (this database's kept)")
            if table == "project_contexts":
                # in any form a row may hold its path in (see `sessions.find_params`)
                here = await self.db.fetchone(sessions.FIND_PROJECT,
                                              sessions.find_params(str(row.get("project_path"))))
                if here is not None:
                    return self._skip_owner(table, ident, f"its path {row.get('project_path')} is here as project "
                                                          f"{here['project_id']} (this database's kept)")
            if table == "rem_findings":
                reason = await self._finding_out(row, run_out)
                if reason:
                    return self._skip_owner(table, ident, reason)
            self.imported[table].add(ident)
        elif not owner_is_new and (table in NATURAL or table not in ROW_NUMBERED):
            match = {c: row.get(c) for c in NATURAL.get(table, TABLES[table])}
            existing = await _find(self.db, table, match)
            if existing is not None:
                if table in ROW_NUMBERED:
                    self.new_ids[table][row["id"]] = existing["id"]
                return self._skip(table)
        if table == "lesson_lifecycle" and owner_is_new and row.get("superseded_by") in (
                self.skipped["lessons"] - self.identical):
            # merged into a lesson whose id is another lesson here: hidden behind a lesson that does
            # not say what it said, with no finding to undo; it comes in active instead
            self.report.skipped.append({"kind": "merge", "id": f"{row['lesson_id']} -> {row['superseded_by']}",
                                        "reason": f"lesson {row['superseded_by']} here is another lesson (this "
                                                  f"database's kept); {row['lesson_id']} comes in active"})
            return self._skip(table)
        if table == "reinforced_patterns":
            reason = await self._pattern_out(row)
            if reason:
                self.report.skipped.append({"kind": "pattern", "id": row["id"], "reason": reason})
                return self._skip(table)
        if table == "rem_runs" and await self._project_kept(row.get("project_id")):
            self.runs_out.add(row["id"])
            return self._skip(table)
        if table == "rem_actions":
            row = {**row, "changes": _renumber_changes(row.get("changes"), self.new_ids)}
        if table in ROW_NUMBERED:
            self.new_ids[table][row["id"]] = await _insert(self.db, table, {k: v for k, v in row.items() if k != "id"})
        else:
            await _insert(self.db, table, row)
        self.report.imported[table] = self.report.imported.get(table, 0) + 1
        if table == "lessons":
            self.lessons_in.append(row["id"])


    async def drop_links_to_others(self) -> None:
        """An imported lesson's links to a lesson left out because another lesson has its id here
        would point at that other lesson: they are left out too, as is its parent when that is
        such a lesson (each reported)."""
        others = self.skipped["lessons"] - self.identical
        if not others:
            return
        for row in await self.db.fetchall_in(
                "SELECT id, relationships, parent_id FROM lessons WHERE id IN ({marks}) ORDER BY id", self.lessons_in):
            if row["parent_id"] in others:
                await self.db.update("lessons", {"id": row["id"]}, {"parent_id": None})
                self.report.skipped.append({"kind": "parent", "id": f"{row['id']} -> {row['parent_id']}", "reason": (
                    f"lesson {row['parent_id']} here is another lesson (this database's kept)")})
            links = json_list(row["relationships"])
            out = [link for link in links if isinstance(link, dict) and link.get("target") in others]
            if not out:
                continue
            await self.db.update("lessons", {"id": row["id"]},
                                 {"relationships": dumps([link for link in links if link not in out])})
            for link in out:
                self.report.skipped.append({"kind": "link", "id": f"{row['id']} -> {link['target']}", "reason": (
                    f"lesson {link['target']} here is another lesson (this database's kept)")})


def _differs(existing: dict, row: dict) -> list[str]:
    """The columns whose values differ between a row here and the file's, use counters aside."""
    return sorted(k for k, v in row.items() if existing.get(k) != v
                  and k not in ("usage_count", "last_used", "last_accessed", "session_count", "last_session_id"))


async def _exists(db, table: str, ident) -> bool:
    column = TABLES[table][0]
    return await db.fetchone(f'SELECT 1 FROM "{table}" WHERE "{column}" = ?', [ident]) is not None


async def _find(db, table: str, match: dict):
    where = " AND ".join(f'"{c}" IS ?' for c in match)
    return await db.fetchone(f'SELECT * FROM "{table}" WHERE {where}', list(match.values()))


async def _insert(db, table: str, row: dict) -> int:
    cols = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    try:
        cur = await db.conn.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', list(row.values()))
    except sqlite3.IntegrityError as exc:
        raise InvalidInputError(f"a {table} row ({_key(table, row)}) cannot go in: {exc}; "
                                "nothing was imported") from None
    return cur.lastrowid


def _renumber_changes(changes, new_ids: dict[str, dict[int, int]]):
    """An action's recorded row images, pointed at the ids their rows got in this database."""
    if not isinstance(changes, str):
        return changes
    try:
        items = json.loads(changes)
    except ValueError:
        return changes
    if not isinstance(items, list):
        return changes
    for change in items:
        ids = new_ids.get(change.get("table")) if isinstance(change, dict) else None
        if not ids:
            continue
        for part in ("key", "before", "after"):
            image = change.get(part)
            if isinstance(image, dict) and image.get("id") in ids:
                image["id"] = ids[image["id"]]
    return json.dumps(items, ensure_ascii=False)


# -- backup ----------------------------------------------------------------------------------------

def is_database_file(path: str | os.PathLike, other: str | os.PathLike) -> bool:
    """`other` is the database at `path` or its -wal or -shm file: by name, or, for files that
    exist, by identity (a hard link, another spelling on a case-insensitive file system)."""
    database, target = Path(path).resolve(), Path(other).resolve()
    files = (database, Path(f"{database}-wal"), Path(f"{database}-shm"))
    if target in files:
        return True
    try:
        return target.exists() and any(f.exists() and os.path.samefile(f, target) for f in files)
    except OSError:
        return False


def backup(path: str | os.PathLike, dest: str | os.PathLike, overwrite: bool = False) -> dict:
    """Copy the database to `dest` as one consistent snapshot (SQLite's online backup API).

    The copy is written beside `dest` and put in its place whole (`mgcp.files.replace_with`: a
    symlink followed, permissions kept, a file another backup put there meanwhile not replaced
    without `overwrite`). A database left at `dest` with its write-ahead log or rollback journal (a crash, or a
    program that has it open) is settled first, and a log left without its database refuses: that
    log would otherwise be replayed onto the new file."""
    dest = Path(dest)
    try:
        if os.path.lexists(dest):
            os.stat(dest)  # a loop of symlinks (or a link to a path that cannot be read) says so here
        target = Path(os.path.realpath(dest, strict=False))
        same = is_database_file(path, dest)
    except (OSError, RuntimeError) as exc:
        if isinstance(exc, FileNotFoundError):  # a link to a file not there yet: the backup makes it
            target, same = Path(os.path.realpath(dest, strict=False)), False
        else:
            raise InvalidInputError(f"cannot follow {dest} to a file ({exc})") from None
    if same:
        raise InvalidInputError("the backup must go to another file than the database")
    if dest.exists() and not overwrite:
        raise InvalidInputError(f"{dest} exists; choose another path or pass --force to replace it")
    if dest.exists() and dest.is_dir():
        raise InvalidInputError(f"{dest} is a directory; name the backup file")
    src = migrate.connect_readonly(path)

    def copy(name: str) -> dict:
        out = sqlite3.connect(name)
        try:
            src.backup(out)  # every page in one step: a single snapshot, writers are not blocked in WAL
            out.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            verdict = out.execute("PRAGMA integrity_check").fetchone()[0]
            present = set(migrate.table_names(out))  # a legacy database lacks the newer tables
            counts = {t: out.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                      for t in ("lessons", "lesson_versions", "context_history", "rem_findings") if t in present}
        finally:
            out.close()
        if verdict != "ok":
            raise MgcpError(f"the backup failed its integrity check ({verdict}); {dest} was not written")
        return {"bytes": os.path.getsize(name), "rows": counts}

    try:
        migrate.pending_migrations(src, path)  # refuses a file that is not an mgcp database
        _settle_log(target, dest)
        copied = replace_with(target, copy, overwrite=overwrite)
    except FileExistsError:
        raise InvalidInputError(f"{dest} exists (written meanwhile); choose another path or pass --force to "
                                "replace it") from None
    except sqlite3.Error as exc:
        raise migrate.explain(exc, path) from None
    except OSError as exc:
        raise MgcpError(f"cannot write {dest}: {exc.strerror or exc}") from None
    finally:
        src.close()
    return {"database": str(path), "backup": str(dest), **copied}


def _settle_log(target: Path, dest: Path) -> None:
    """Leave no write-ahead log or hot rollback journal beside the database at `target` that a
    backup is to replace: SQLite checkpoints or rolls back and removes it when the last connection
    closes, which this one is unless another program has the file open, and then nothing is
    written."""
    logs = [Path(f"{target}-wal"), Path(f"{target}-journal")]  # an -shm alone replays nothing
    if not any(log.exists() for log in logs + [Path(f"{target}-shm")]):
        return
    if not target.exists():  # the database was moved or removed without its log
        if not any(log.exists() for log in logs):
            return
        left = next(log for log in logs if log.exists())
        raise MgcpError(f"{left.name} is left beside {dest} from a database that is no longer there, and "
                        f"would be replayed onto the backup: move it (and {dest.name}-shm) away, then try again; "
                        f"{dest} was not written")
    busy = MgcpError(f"{dest} is open in another program (or the log beside it cannot be settled); close it "
                     f"and try again; {dest} was not written")
    try:
        conn = sqlite3.connect(target, timeout=0)
        try:
            conn.execute("PRAGMA locking_mode = EXCLUSIVE")
            conn.execute("BEGIN EXCLUSIVE")  # refused while another connection has the file open
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a read rolls back a hot journal
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise busy from None
        raise MgcpError(f"{dest} is not a database mgcp can settle ({exc}), and its {dest.name}-wal would be "
                        f"replayed onto the backup: move {dest} and its -wal and -shm files away, then try "
                        f"again; {dest} was not written") from None
    if any(log.exists() and log.stat().st_size for log in logs):
        raise busy
