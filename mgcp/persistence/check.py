"""Verify a database without changing it (`mgcp db check`), and make the few repairs that lose nothing.

`check(path)` opens the file read-only and runs every check in CHECKS. A check is a function of a
connection that yields `Problem`s, one per object that is wrong. A problem that can be fixed
without losing anything carries `fix`, which makes the change on a read-write connection;
`repair(report)` runs the repairable checks again under one write lock (BEGIN IMMEDIATE), so it fixes
what is wrong at that moment, and commits every fix at once. Nothing is repaired in a file that
fails SQLite's integrity check: writing into a damaged file can only make it worse.

What is checked:

- the file: `PRAGMA integrity_check` and `PRAGMA foreign_key_check`;
- migrations: the applied names are known, none is pending (only a warning: the next command
  that opens the database applies them) and the tables of each applied migration exist. With
  migrations pending, only the file and the migrations are checked: the rest reads what an upgrade
  has yet to make (an upgrade stopped half-way has lessons without their versions, which it makes);
- lessons: `lesson_versions` holds versions 1..N, each once, N being the `lessons` row's version,
  and version N has the row's text; a version after one with a kind and confidence has its own;
- context: each project's catalogue, replayed from its deltas, matches every recorded hash; history
  session numbers never go backwards nor past the project's session count; `project_sessions`
  numbers are unique, increase in the order the sessions were seen, and stay within the count;
- REM: an applied (or rejected) finding has a live action record, and a live action record's
  finding is applied or rejected;
- links: every lesson a link names exists (named, never removed);
- search: the full-text index holds every active lesson, with its current text, and no other;
- json: every column declared JSON holds JSON of the shape the store reads (at most 20 rows named
  per column).

Repairs: a lesson whose current version is missing from its history gets that version appended
from the `lessons` row; a lesson with no versions at all (an older tool's) gets them rebuilt as an
upgrade rebuilds a legacy lesson's (migration 0020, which reads the tags as mgcp does); a finding
marked stale while its action is live is marked applied (or rejected) again; a lesson the search
index holds wrongly (missing, stale text, or not active) is indexed again from its row, and an
index entry that belongs to no lesson is taken out; a version that lost its kind and confidence
gets those of the version before (so does a current version appended).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby, islice
from typing import Callable, Iterator

from mgcp import quality
from mgcp.errors import DatabaseError, MgcpError
from mgcp.models import REJECTING_ACTIONS
from mgcp.persistence import columns, migrate
from mgcp.persistence.context import apply_delta, canonical, catalogue_hash

# The tables each migration creates (0004 and 0005 only fill tables). FTS5's own shadow tables
# (lesson_search_data, ...) come with lesson_search; the integrity check covers them.
MIGRATION_TABLES = {
    "0001_legacy_tables": ("lessons", "telemetry_events", "lesson_usage", "project_contexts",
                           "workflows", "community_summaries"),
    "0002_history_tables": ("lesson_versions", "context_history", "project_sessions",
                            "lesson_lifecycle", "query_log"),
    "0003_rem_tables": ("rem_state", "rem_runs", "rem_findings", "rem_actions", "community_runs",
                        "context_summaries"),
    "0006_lesson_search": ("lesson_search_docs", "lesson_search"),
    "0007_lesson_quality": ("lesson_traits", "lesson_outcomes", "lesson_outcome_stats"),
    "0008_reinforced_patterns": ("reinforced_patterns", "decision_observations"),
    "0009_change_marks": ("change_marks",),
    "0011_kept_readings": (),  # its table, a cache, is dropped by 0015
    "0012_kept_pairs": ("kept_pairs",),
    "0013_community_kept": ("community_kept_runs",),  # its table community_kept, a cache, is dropped by 0019
    "0014_pattern_observations": ("pattern_observations", "pattern_observation_marks"),
    "0015_kept_corpora": ("kept_corpora",),
    "0016_community_kept_titles": ("community_kept_titles",),
    "0017_kept_indexes": ("kept_indexes",),
    "0018_community_kept_readings": ("community_kept_readings",),
    "0019_community_kept_lessons": (),
}
REBUILD = "0020_complete_lesson_histories"  # rebuilds the versions of a lesson that has none
ACTIVE_INDEX = "0010_search_active_only"  # from it on, the search index holds active lessons only
CONTENT = ("trigger", "action", "rationale", "tags")  # the text lessons and lesson_versions share
# Answering a finding stores its action record and one of these statuses in one transaction.
RESOLVED = ("applied", "rejected")
COUNTED = {"lessons": "lessons", "versions": "lesson_versions", "projects": "project_contexts",
           "history_rows": "context_history", "sessions": "project_sessions",
           "findings": "rem_findings", "actions": "rem_actions"}


@dataclass
class Problem:
    check: str
    subject: str  # the object that is wrong, e.g. "lesson retry-with-backoff"
    message: str  # what is wrong with it, and what the user could do when mgcp cannot
    level: str = "error"  # "warning": reported, but the database still counts as ok
    repair: str | None = None  # what `--repair --yes` would change
    fix: Callable[[sqlite3.Connection], None] | None = field(default=None, repr=False, compare=False)

    @property
    def repairable(self) -> bool:
        return self.fix is not None

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}"

    def to_dict(self) -> dict:
        return {"check": self.check, "subject": self.subject, "message": self.message,
                "repairable": self.repairable, "level": self.level, "repair": self.repair}


@dataclass
class Report:
    database: str
    problems: list[Problem]
    checked: dict[str, int | None]

    @property
    def ok(self) -> bool:
        return all(p.level == "warning" for p in self.problems)

    def to_dict(self) -> dict:
        return {"database": self.database, "ok": self.ok,
                "problems": [p.to_dict() for p in self.problems], "checked": self.checked}


# -- the checks ------------------------------------------------------------------------------------

def integrity(conn: sqlite3.Connection) -> Iterator[Problem]:
    try:
        messages = [m for (m,) in conn.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.DatabaseError as exc:  # damage that stops the check itself
        messages = [str(exc)]
    for line in "\n".join(messages).splitlines():
        if line != "ok" and not line.startswith("*** in database"):
            yield Problem("integrity", "database file", f"{line} (the file is damaged; restore a backup)")


def foreign_keys(conn: sqlite3.Connection) -> Iterator[Problem]:
    for table, rowid, parent, fk in conn.execute("PRAGMA foreign_key_check").fetchall():
        column = next(r[3] for r in conn.execute(f'PRAGMA foreign_key_list("{table}")') if r[0] == fk)
        value = conn.execute(f'SELECT "{column}" FROM "{table}" WHERE rowid = ?', [rowid]).fetchone()[0]
        yield Problem("foreign_keys", f"{table} row {rowid}", f"{column} {value!r} refers to no {parent} row")


def migrations(conn: sqlite3.Connection) -> Iterator[Problem]:
    known, tables = migrate.migration_names(), set(migrate.table_names(conn))
    applied = [name for name, _ in migrate.applied_migrations(conn)]
    for name in applied:
        if name not in known:
            yield Problem("migrations", f"migration {name}",
                          "is not known to this mgcp (a newer mgcp applied it); upgrade mgcp to use this database")
    pending = [name for name in known if name not in applied]
    if pending:
        yield Problem("migrations", "migrations",
                      f"{len(pending)} migration{'s' if len(pending) > 1 else ''} pending; run `mgcp db migrate`",
                      level="warning")
    for name in [n for n in known if n in applied]:
        for table in MIGRATION_TABLES.get(name, ()):
            if table not in tables:
                yield Problem("migrations", f"table {table}",
                              f"is missing, though {name} that creates it is applied; restore a backup")


def lesson_versions(conn: sqlite3.Connection) -> Iterator[Problem]:
    versions = defaultdict(list)
    for row in _rows(conn, "SELECT lesson_id, version, trigger, action, rationale, tags FROM lesson_versions"):
        versions[row["lesson_id"]].append(row)
    for lesson in _rows(conn, "SELECT id, version, trigger, action, rationale, tags FROM lessons ORDER BY id"):
        yield from _lesson_problems(lesson, versions.get(lesson["id"], []))


def _lesson_problems(lesson: dict, rows: list[dict]) -> Iterator[Problem]:
    subject, n = f"lesson {lesson['id']}", lesson["version"]
    tags = [] if columns.comma_separated(lesson["tags"]) else _json_list(lesson["tags"])  # words: read as tags
    if tags is None or not all(isinstance(tag, str) for tag in tags):
        what = "are not a JSON list" if tags is None else "hold a value that is not text"
        yield Problem("lessons", subject, f"its tags {lesson['tags']!r} {what}; "
                                          f"set them with `mgcp lesson refine {lesson['id']} --tag ...`")
    if not isinstance(n, int) or n < 1:  # the legacy table takes whatever an older writer put there
        yield Problem("lessons", subject, f"its row has version {n!r}, not a whole number from 1")
        return
    if not rows:
        yield Problem("lessons", subject, f"has no versions in lesson_versions (its row is at version {n})",
                      repair=f"rebuild its versions as an upgrade does ({REBUILD}): version {n} from its row"
                             + (", the earlier ones from the [vK] marks of its rationale, marked reconstructed "
                                "(their action text is lost)" if n > 1 else ""),
                      fix=partial(_rebuild, lesson["id"]))
        return
    twice, outside, missing = version_gaps(Counter(r["version"] for r in rows), n)
    if twice:
        yield Problem("lessons", subject, f"has version {_join(twice)} more than once in lesson_versions")
    if outside:
        yield Problem("lessons", subject, f"has version {_join(outside)} in lesson_versions, outside 1..{n} "
                                          f"(its row is at version {n}); see `mgcp lesson history {lesson['id']}`")
    if missing == [n] and n > 1 and not twice and not outside:
        yield Problem("lessons", subject, f"version {n}, its current one, is missing from lesson_versions",
                      repair=f"append version {n} from the lessons row",
                      fix=partial(_append_current, lesson["id"]))
    elif missing:
        yield Problem("lessons", subject, f"version {_join(missing)} missing from lesson_versions (expected 1..{n}); "
                                          "a lost version cannot be rebuilt: restore a backup to recover it")
    last = [r for r in rows if r["version"] == n]
    if len(last) != 1:
        return  # reported above: missing or recorded twice
    differs = content_differs(lesson, last[0])
    if differs:
        yield Problem("lessons", subject, f"its lessons row differs from its version {n} in {', '.join(differs)}; "
                                          f"compare them with `mgcp lesson history {lesson['id']}`")


def version_gaps(counted: Counter, n: int) -> tuple[list, list, list]:
    """Of a lesson at version `n` whose version rows hold each version `counted` times: the
    versions held more than once, those outside 1..n, and the first few missing (found without
    counting to n: a version may be huge). An import holds a file's lessons to the same rules."""
    twice = sorted(v for v, times in counted.items() if times > 1)
    outside = sorted((v for v in counted if not isinstance(v, int) or not 1 <= v <= n), key=repr)
    missing = list(islice((v for v in range(1, n + 1) if v not in counted), 20)) \
        if len(counted) - len(outside) < n else []
    return twice, outside, missing


def links(conn: sqlite3.Connection) -> Iterator[Problem]:
    """A link to a lesson that does not exist (a legacy writer's, or an edit by hand): the lessons
    are read as if it were not there; it is named, not removed (the id it names is all that is left
    of what it meant)."""
    ids = {row["id"] for row in _rows(conn, "SELECT id FROM lessons")}
    for row in _rows(conn, "SELECT id, relationships FROM lessons WHERE relationships NOT IN ('', '[]') ORDER BY id"):
        entries = columns.relationships(row["relationships"])
        odd = [n for n, r in enumerate(columns.json_list(row["relationships"]))
               if isinstance(r, dict) and "target" in r and not isinstance(r["target"], str)]
        if odd:
            yield Problem("links", f"lesson {row['id']}", f"its link {_join(odd)} names no lesson mgcp can read "
                                                          "(its target is not text): commands leave it out, and the "
                                                          "next change of the lesson's links drops it")
        gone = sorted({t for t in (r["target"] for r in entries) if isinstance(t, str) and t not in ids})
        if gone:
            yield Problem("links", f"lesson {row['id']}", f"links to {_join(gone)}, not a lesson here; "
                                                          f"`mgcp lesson show {row['id']}` lists its links")


def version_traits(conn: sqlite3.Connection) -> Iterator[Problem]:
    """Every version written since kinds and confidences are kept has its own: a version without,
    after one with, lost them (versions written before read as the defaults)."""
    for lesson_id, version in conn.execute(
            """SELECT v.lesson_id, v.version FROM lesson_versions v
               WHERE NOT EXISTS (SELECT 1 FROM lesson_traits t
                                 WHERE t.lesson_id = v.lesson_id AND t.version = v.version)
                 AND EXISTS (SELECT 1 FROM lesson_traits t
                             WHERE t.lesson_id = v.lesson_id AND t.version < v.version)
               ORDER BY v.lesson_id, v.version""").fetchall():
        yield Problem("traits", f"lesson {lesson_id}", f"version {version} has no kind and confidence, though an "
                                                       "earlier version has them",
                      repair="carry over the kind and confidence of the version before it",
                      fix=partial(_carry_traits, lesson_id, version))
    # what `lesson add` takes (an import refuses anything else, so an export could not come back)
    kinds = ", ".join(f"'{kind}'" for kind in quality.KINDS)
    for lesson_id, version, kind, confidence in conn.execute(
            f"""SELECT lesson_id, version, kind, confidence FROM lesson_traits
                WHERE (kind IS NOT NULL AND kind NOT IN ({kinds}))
                   OR (confidence IS NOT NULL AND (typeof(confidence) NOT IN ('integer', 'real')
                                                   OR confidence < 0 OR confidence > 1))
                ORDER BY lesson_id, version""").fetchall():
        yield Problem("traits", f"lesson {lesson_id}", f"version {version} has kind {kind!r} and confidence "
                                                       f"{confidence!r}, not a kind and a confidence from 0 to 1 "
                                                       "mgcp takes (an import refuses them, so no export is "
                                                       "written); restore a backup")


def context_history(conn: sqlite3.Connection) -> Iterator[Problem]:
    projects = _projects(conn)
    rows = _rows(conn, """SELECT id, project_id, session_number, catalogue_hash, catalogue_delta
                          FROM context_history ORDER BY project_id, id""")
    for project_id, history in groupby(rows, key=lambda r: r["project_id"]):
        if project_id in projects:  # rows of an unknown project: the foreign key check names them
            yield from _history_problems(projects[project_id], list(history))


def _history_problems(project: dict, rows: list[dict]) -> Iterator[Problem]:
    path, count = project["project_path"], project["session_count"]
    previous = None
    for row in rows:
        subject, n = f"context_history row {row['id']} of {path}", row["session_number"]
        if previous is not None and n < previous["session_number"]:
            yield Problem("context_history", subject,
                          f"is session {n} but comes after row {previous['id']} of session "
                          f"{previous['session_number']}: session numbers must not go backwards")
        if n > count:
            yield Problem("context_history", subject, f"is session {n}, past the project's session count {count}")
        previous = row
    yield from _replay(path, rows)


def _replay(path: str, rows: list[dict]) -> Iterator[Problem]:
    """Rebuild the catalogue from the deltas, as `Contexts.at` does, checking each recorded hash.

    (`Contexts._replay` needs the async store and stops at the first mismatch with an error, so the
    loop is repeated here over the same pure helpers.) It stops at the first row that fails: the
    rows after it cannot be verified."""
    replay = CatalogueReplay()
    for row in rows:
        problem = replay.step(row)
        if problem:
            yield Problem("context_history", f"context_history row {row['id']} of {path}", problem)
            return


class CatalogueReplay:
    """A project's catalogue rebuilt from its context_history rows, one row at a time, in order."""

    def __init__(self):
        self.catalogue: dict = {}
        self.verified: str | None = None  # the hash of `catalogue`, once a row's hash matched it

    def step(self, row: dict) -> str | None:
        """Apply the row's delta; what is wrong with the row, or None."""
        delta = _delta(row["catalogue_delta"])
        if delta is None:
            return "holds a catalogue delta that is not a delta object; later rows were not verified"
        if not any(delta.values()) and row["catalogue_hash"] in (None, "", self.verified):
            return None  # nothing changed, and the row records the hash already verified
        self.catalogue = apply_delta(self.catalogue, delta)
        self.verified = None
        if row["catalogue_hash"]:
            if catalogue_hash(self.catalogue) != row["catalogue_hash"]:
                return (f"session {row['session_number']}: the catalogue replayed from the deltas does not "
                        "match the recorded hash (`mgcp context at` refuses it); later rows were not verified")
            self.verified = row["catalogue_hash"]
        return None


def project_sessions(conn: sqlite3.Connection) -> Iterator[Problem]:
    projects = _projects(conn)
    rows = _rows(conn, """SELECT project_id, session_id, session_number FROM project_sessions
                          ORDER BY project_id, rowid""")
    for project_id, sessions in groupby(rows, key=lambda r: r["project_id"]):
        project = projects.get(project_id)
        if project is None:
            yield Problem("sessions", f"project {project_id}",
                          "has rows in project_sessions but no project_contexts row")
            continue
        path, count = project["project_path"], project["session_count"]
        seen: dict[int, str] = {}
        for s in sessions:
            subject, n = f"session {s['session_id']} of {path}", s["session_number"]
            if n in seen:
                yield Problem("sessions", subject, f"has number {n}, as session {seen[n]} does")
            elif seen and n < max(seen):
                yield Problem("sessions", subject, f"has number {n}, below an earlier session's {max(seen)}: "
                                                   "numbers must increase")
            if n > count:
                yield Problem("sessions", subject, f"has number {n}, past the project's session count {count}")
            seen.setdefault(n, s["session_id"])


def rem_actions(conn: sqlite3.Connection) -> Iterator[Problem]:
    live = defaultdict(list)  # actions with no finding are a run's automatic output: not checked here
    for action in _rows(conn, """SELECT id, finding_id, action, applied_at FROM rem_actions
                                 WHERE undone_at IS NULL AND finding_id IS NOT NULL ORDER BY id"""):
        live[action["finding_id"]].append(action)
    for finding in _rows(conn, "SELECT id, status FROM rem_findings ORDER BY created_at, rowid"):
        subject, status, actions = f"finding {finding['id']}", finding["status"], live.get(finding["id"])
        if actions and len(actions) > 1:
            yield Problem("rem", subject, f"has {len(actions)} live actions (#{', #'.join(str(a['id']) for a in actions)}): "
                                          "it was applied more than once; `mgcp rem undo` takes them back")
        if status in RESOLVED and not actions:
            yield Problem("rem", subject, f"is {status} but has no live action record (it was undone or never "
                                          "recorded), so `mgcp rem undo` cannot take it back")
        elif status == "pending" and actions:
            # Not repaired: marking it answered would take it out of the review queue behind the
            # user's back. Undo restores what the action changed and leaves it pending.
            yield Problem("rem", subject, f"is pending but its action #{actions[0]['id']} ({actions[0]['action']}) "
                                          f"is live; `mgcp rem undo {finding['id']}` takes the action back")
        elif status == "stale" and actions:
            settled = "rejected" if actions[0]["action"] in REJECTING_ACTIONS else "applied"
            yield Problem("rem", subject, f"is both applied and stale: marked stale while its action "
                                          f"#{actions[0]['id']} ({actions[0]['action']}) is live",
                          repair=f"mark it {settled} again (its action stays live and undoable)",
                          fix=partial(_settle, finding["id"], settled, actions[0]["applied_at"]))


def search_index(conn: sqlite3.Connection) -> Iterator[Problem]:
    def words(row: dict) -> tuple:  # what the index reads: tags in any order, or form, are the same words
        tags = columns.tags(row["tags"])
        return row["trigger"], row["action"], row["rationale"] or "", sorted(tags) if tags else row["tags"]

    # Before migration 0010 the index kept every lesson: an inactive one there is no fault yet.
    active_only = ACTIVE_INDEX in {name for name, _ in migrate.applied_migrations(conn)}
    triggers = {row["name"] for row in _rows(conn, "SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    if active_only and not {f"lesson_search_on_lifecycle_{e}" for e in ("insert", "update", "delete")} <= triggers:
        yield Problem("search", "search index", "the triggers that keep it to active lessons are missing, so "
                                                "an archived or restored lesson would not leave or rejoin it",
                      repair="create them again (migration 0010)", fix=_retrigger)
    indexed = {row["lesson_id"]: words(row) for row in _rows(conn, f"""
        SELECT d.lesson_id, {', '.join(f's.{c}' for c in CONTENT)} FROM lesson_search s
        JOIN lesson_search_docs d ON d.id = s.rowid""")}
    for lesson in _rows(conn, f"""SELECT l.id, {', '.join(f'l.{c}' for c in CONTENT)},
                                  COALESCE(c.status, 'active') AS status FROM lessons l
                                  LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id ORDER BY l.id"""):
        text = words(lesson)
        found = indexed.pop(lesson["id"], None)
        if lesson["status"] == "active" and found != text:
            message = "is active but missing from the search index" if found is None else \
                "has other text in the search index than its current version"
        elif lesson["status"] != "active" and found is not None and active_only:
            message = f"is {lesson['status']} but still in the search index"
        else:
            continue
        yield Problem("search", f"lesson {lesson['id']}", message + " (queries read the index)",
                      repair="index it again from its row", fix=partial(_reindex, lesson["id"]))
    for lesson_id in indexed:
        yield Problem("search", f"lesson {lesson_id}", "is in the search index but not in the lessons table",
                      repair="take it out of the index", fix=partial(_reindex, lesson_id))
    unowned = _rows(conn, "SELECT count(*) AS n FROM lesson_search WHERE rowid NOT IN (SELECT id FROM lesson_search_docs)")
    if unowned[0]["n"]:
        n = unowned[0]["n"]
        yield Problem("search", "search index", f"{n} {'entry belongs' if n == 1 else 'entries belong'} to no lesson "
                                                "(they take places among a query's best matches)",
                      repair="take them out of the index", fix=_drop_unowned)


def json_columns(conn: sqlite3.Connection) -> Iterator[Problem]:
    """Every column declared JSON holds JSON of the shape the store reads (a list or an object): an
    import refuses anything else, so an export of such a row could not be restored, and the commands
    that read some of them fail. A lesson's tags are the lessons check's; a tags column may hold
    comma-separated words instead (`columns.TAGS`)."""
    tables = [row["name"] for row in _rows(conn, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                                 "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'lesson_search%' "
                                                 "ORDER BY name")]
    for table in tables:
        info = _rows(conn, f'PRAGMA table_info("{table}")')
        key = " || '/' || ".join(f'"{c["name"]}"' for c in sorted(info, key=lambda c: c["pk"]) if c["pk"]) or "rowid"
        for column in info:
            name = column["name"]
            if (column["type"] or "").upper() != "JSON" or (table, name) == ("lessons", "tags"):
                continue
            want = {list: "array", dict: "object"}.get(columns.json_shape(table, name, column["dflt_value"]))
            bad = f'NOT json_valid("{name}")' + (f""" OR json_type("{name}") != '{want}'""" if want else "")
            if (table, name) in columns.TAGS:  # comma-separated words are read as the tags
                bad = f"""ltrim("{name}", ' ' || char(9, 10, 13)) LIKE '[%' AND ({bad})"""
            for row in _rows(conn, f'SELECT {key} AS key, "{name}" AS value FROM "{table}" '
                                   f'WHERE "{name}" IS NOT NULL AND ({bad}) ORDER BY 1 LIMIT 20'):
                if _read_as(row["value"], want):  # NaN or Infinity, as Python writes them: mgcp reads them
                    continue
                shown = repr(row["value"]) if len(repr(row["value"])) <= 40 else repr(row["value"])[:37] + "..."
                yield Problem("json", f"{table} {row['key']}",
                              f"its {name} is not {'a JSON ' + want if want else 'JSON'} ({shown}): an import of "
                              "an export refuses it, and a command reading it may fail; restore a backup")


CHECKS = [  # (name, check, the tables it reads: a check whose tables are missing is skipped)
    ("integrity", integrity, ()),
    ("foreign_keys", foreign_keys, ()),
    ("migrations", migrations, ()),
    ("lessons", lesson_versions, ("lessons", "lesson_versions")),
    ("context_history", context_history, ("project_contexts", "context_history")),
    ("sessions", project_sessions, ("project_contexts", "project_sessions")),
    ("rem", rem_actions, ("rem_findings", "rem_actions")),
    ("links", links, ("lessons",)),
    ("search", search_index, ("lessons", "lesson_search", "lesson_search_docs")),
    ("traits", version_traits, ("lesson_versions", "lesson_traits")),
    ("json", json_columns, ()),
]
REPAIRABLE = ("lessons", "rem", "search", "traits")
STRUCTURE = ("integrity", "foreign_keys", "migrations")  # the checks of a file with migrations pending


def _pending(conn: sqlite3.Connection) -> bool:
    """Migrations this mgcp knows are not all applied (a file a newer mgcp upgraded is not pending:
    the migrations check names it)."""
    try:
        return bool(migrate.pending_migrations(conn))
    except MgcpError:
        return False


# -- the repairs -----------------------------------------------------------------------------------

def _append_current(lesson_id: str, conn: sqlite3.Connection) -> None:
    """The lesson's current version appended from its row, with the kind and confidence of the
    version before it (as a refinement carries them over), so that one repair leaves it whole."""
    conn.execute("""INSERT INTO lesson_versions (lesson_id, version, trigger, action, rationale, tags, timestamp)
                    SELECT id, version, trigger, action, rationale, tags, last_refined FROM lessons
                    WHERE id = ? AND NOT EXISTS (SELECT 1 FROM lesson_versions v
                                                 WHERE v.lesson_id = lessons.id AND v.version = lessons.version)""",
                 [lesson_id])
    row = conn.execute("SELECT version FROM lessons WHERE id = ?", [lesson_id]).fetchone()
    if row is not None and conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'lesson_traits'").fetchone():
        _carry_traits(lesson_id, row[0], conn)


def _carry_traits(lesson_id: str, version: int, conn: sqlite3.Connection) -> None:
    conn.execute("""INSERT OR IGNORE INTO lesson_traits (lesson_id, version, kind, confidence, created_at)
                    SELECT lesson_id, ?, kind, confidence, created_at FROM lesson_traits
                    WHERE lesson_id = ? AND version < ? ORDER BY version DESC LIMIT 1""",
                 [version, lesson_id, version])


def _rebuild(lesson_id: str, conn: sqlite3.Connection) -> None:
    """Migration 0020 again, for one lesson that has no versions: it inserts only missing rows."""
    import sqlite_utils

    failures = migrate.load_migration(REBUILD)(sqlite_utils.Database(conn), lesson_id)
    if failures:  # its version is checked above: this is not expected
        raise DatabaseError(f"the versions of lesson {lesson_id} could not be rebuilt: {'; '.join(failures)}")


def _settle(finding_id: str, status: str, applied_at: str, conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE rem_findings SET status = ?, resolved_at = ? WHERE id = ? AND status = 'stale'",
                 [status, applied_at, finding_id])


def _retrigger(conn: sqlite3.Connection) -> None:
    """Migration 0010 again: it creates only the triggers that are missing."""
    import sqlite_utils

    migrate.load_migration(ACTIVE_INDEX)(sqlite_utils.Database(conn))


def _drop_unowned(conn: sqlite3.Connection) -> None:
    """The index entries no lesson_search_docs row names (no lesson's) taken out."""
    conn.execute("DELETE FROM lesson_search WHERE rowid NOT IN (SELECT id FROM lesson_search_docs)")


def _reindex(lesson_id: str, conn: sqlite3.Connection) -> None:
    """The lesson's index entry made again from its row: its text when it is active, none otherwise."""
    conn.execute("DELETE FROM lesson_search WHERE rowid IN (SELECT id FROM lesson_search_docs WHERE lesson_id = ?)",
                 [lesson_id])
    conn.execute("INSERT OR IGNORE INTO lesson_search_docs (lesson_id) SELECT id FROM lessons WHERE id = ?", [lesson_id])
    conn.execute("""DELETE FROM lesson_search_docs WHERE lesson_id = ?
                    AND NOT EXISTS (SELECT 1 FROM lessons WHERE id = ?)""", [lesson_id, lesson_id])
    conn.execute(f"""INSERT INTO lesson_search (rowid, {', '.join(CONTENT)})
                     SELECT d.id, l.trigger, l.action, COALESCE(l.rationale, ''), l.tags
                     FROM lesson_search_docs d JOIN lessons l ON l.id = d.lesson_id
                     LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id
                     WHERE d.lesson_id = ? AND COALESCE(c.status, 'active') = 'active'""", [lesson_id])


# -- running ---------------------------------------------------------------------------------------

def check(path) -> Report:
    """Run every check on the database at `path`, read-only. A missing, foreign or unreadable file
    raises the same errors as the other commands."""
    conn = _open_readonly(path)
    try:
        conn.execute("BEGIN")  # one read transaction: every check sees the same snapshot, even
        try:                   # while other processes write
            return Report(str(path), run_checks(conn), _counts(conn))
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.Error as exc:  # not damage (that is reported): a lock, a read error
        raise migrate.explain(exc, path) from None
    finally:
        conn.close()


def run_checks(conn: sqlite3.Connection, only: tuple[str, ...] | None = None) -> list[Problem]:
    try:
        tables = set(migrate.table_names(conn))
    except sqlite3.DatabaseError:  # a damaged schema: only the checks that need no table run
        tables = set()
    problems = []
    upgrading = _pending(conn)
    for name, run, needs in CHECKS:
        if (only and name not in only) or not tables.issuperset(needs) or (upgrading and name not in STRUCTURE):
            continue
        try:
            for problem in run(conn):
                problems.append(problem)
        except sqlite3.DatabaseError as exc:  # e.g. a damaged page under the rows it reads
            problems.append(Problem(name, "database file", f"the {name} check could not finish: {exc}"))
    if any(p.check == "integrity" for p in problems):
        for problem in problems:
            problem.fix = problem.repair = None
    return problems


def repair(report: Report) -> list[Problem]:
    """Make the repairs `report` offers, in one transaction; returns the problems repaired.

    The repairable checks run again once the write lock is held, so what is fixed is what is wrong
    then, even if another process wrote since the report."""
    if not any(p.repairable for p in report.problems):
        return []
    path = report.database
    if any(p.check == "migrations" and p.subject.startswith("migration ") for p in report.problems):
        raise DatabaseError(f"{path} was upgraded by a newer mgcp; this version repairs nothing in it")
    migrate.require_existing(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=migrate.BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise migrate.explain(exc, path) from None
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN IMMEDIATE")
        try:
            fixed = [p for p in run_checks(conn, REPAIRABLE) if p.repairable]
            for problem in fixed:
                problem.fix(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:  # a lock held too long, a read-only file, a full disk
        raise migrate.explain(exc, path) from None
    finally:
        conn.close()
    return fixed


def _open_readonly(path) -> sqlite3.Connection:
    """A read-only connection, after the checks every command makes: a missing, foreign or newer
    file is refused with their errors. A file whose schema cannot be read is opened all the same:
    the integrity check then says what it can about the damage."""
    conn = migrate.connect_readonly(path)
    try:
        migrate.table_names(conn)
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            return conn
        conn.close()
        raise migrate.explain(exc, path) from None
    try:
        migrate.pending_migrations(conn, path)
    except DatabaseError:
        # A newer mgcp's database, or damage where the migrations are recorded: reported as
        # problems (the migrations and integrity checks) rather than refused.
        if not _unknown_migrations(conn) and not _damaged(conn):
            conn.close()
            raise
    return conn


def _damaged(conn: sqlite3.Connection) -> bool:
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0] != "ok"
    except sqlite3.DatabaseError:
        return True


def _unknown_migrations(conn: sqlite3.Connection) -> bool:
    try:
        return any(name not in migrate.migration_names() for name, _ in migrate.applied_migrations(conn))
    except sqlite3.DatabaseError:
        return False


# -- helpers ---------------------------------------------------------------------------------------

def _rows(conn: sqlite3.Connection, sql: str) -> list[dict]:
    cur = conn.cursor()
    cur.row_factory = sqlite3.Row
    return [dict(r) for r in cur.execute(sql)]


def _projects(conn: sqlite3.Connection) -> dict[str, dict]:
    return {p["project_id"]: p for p in _rows(conn, """SELECT project_id, project_path,
                                                       CAST(COALESCE(session_count, 0) AS INTEGER) AS session_count
                                                       FROM project_contexts""")}


def _counts(conn: sqlite3.Connection) -> dict[str, int | None]:
    """Rows of each kind checked: 0 for a table not there (yet), None for one that cannot be read."""
    try:
        tables = set(migrate.table_names(conn))
    except sqlite3.DatabaseError:
        return dict.fromkeys(COUNTED)
    return {name: _count(conn, table) if table in tables else 0 for name, table in COUNTED.items()}


def _count(conn: sqlite3.Connection, table: str) -> int | None:
    try:
        return conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    except sqlite3.DatabaseError:  # a damaged table (the checks report it)
        return None


def content_differs(lesson: dict, version: dict) -> list[str]:
    """The content columns in which a lessons row and a lesson_versions row differ."""
    return [c for c, a, b in zip(CONTENT, content(lesson), content(version)) if a != b]


def content(row: dict) -> tuple:
    """A lessons or lesson_versions row's content as compared (tags as the set they hold)."""
    return tuple(_text(c, row.get(c)) for c in CONTENT)


def _text(column: str, value):
    """A content column as compared: tags as the set of tags mgcp reads in them (see `columns.tags`),
    the rest as stored."""
    if column != "tags":
        return value
    return sorted(canonical(t) for t in columns.tags(value))


def _json_list(value) -> list | None:
    try:
        parsed = json.loads(value) if value else []
    except (TypeError, ValueError):
        return None
    return parsed if isinstance(parsed, list) else None


def _read_as(value, want: str | None) -> bool:
    """Whether mgcp's readers (Python's json, which also takes NaN and Infinity, unlike SQLite's
    json_valid) read the text as JSON of the shape wanted ("array", "object" or None: any)."""
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return False
    return isinstance(value, str) and (want is None or isinstance(parsed, {"array": list, "object": dict}[want]))


def _delta(text: str | None) -> dict | None:
    """A stored catalogue delta, or None when it is not one (NULL means no change)."""
    try:
        delta = json.loads(text) if text else {}
    except ValueError:
        return None
    delta = {} if delta is None else delta
    parts = ("added", "removed", "changed")
    return delta if isinstance(delta, dict) and all(isinstance(delta.get(k, {}), dict) for k in parts) else None


def _join(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers))
