"""Complete the history of lessons whose first versions have no lesson_versions rows.

Why: every lesson must have one lesson_versions row per version it has had. Two kinds of lesson
were left without their first rows:
- a legacy lesson whose tags column is not a JSON list (an older writer left comma-separated
  words, which mgcp reads as the tags): 0004 reported it and skipped it, before it read such tags;
- a lesson written without versions (by an older mgcp after 0004 ran, or skipped as above) and
  then refined: the refinement wrote rows only for its current version and the new one, so 0004,
  which backfills lessons that have no rows at all, never rebuilt versions 1..N-1.

What it does: for each lesson without a version-1 row, rows 1..E-1 are rebuilt as 0004 rebuilds
them (reasons and rationale prefixes parsed from the "[vK]" markers, action text lost: '' and
`reconstructed = 1`), E being its earliest row, from that row's rationale and tags (the legacy text,
which still holds the markers); a lesson with no rows at all gets rows 1..N from the lessons row,
as 0004 would write them. Tags are read as mgcp reads the column (a JSON list, else comma-separated
words), so the history agrees with the lesson. Existing rows are not modified (insert only what is
missing): re-running does nothing, an interrupted run resumes. A lesson whose version is not a
number of at least 1 is reported and skipped; the migration stays pending and retries it.

`mgcp db check --repair` runs it again for one lesson at a time (`only`).
"""

import importlib.util
import json
from pathlib import Path


def _reconstruct():
    """0004's `reconstruct(version, rationale)`: the one reading of the legacy markers."""
    path = Path(__file__).with_name("0004_backfill_lesson_versions.py")
    spec = importlib.util.spec_from_file_location("mgcp_migration_0004_backfill_lesson_versions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reconstruct


def _tags(text):
    """The tags column as mgcp reads it: a JSON list, or comma-separated words; else none."""
    if text and not text.lstrip().startswith("["):
        return [t.strip() for t in text.split(",") if t.strip()]
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [str(t) for t in value] if isinstance(value, list) else []


def migrate(db, only=None):
    reconstruct = _reconstruct()
    failures = []
    rows = db.execute(
        """SELECT l.id, l.trigger, l.action, l.rationale, l.tags, l.version, l.created_at, l.last_refined,
                  e.version, e.trigger, e.rationale, e.tags
           FROM lessons l
           LEFT JOIN lesson_versions e ON e.lesson_id = l.id
                AND e.version = (SELECT min(version) FROM lesson_versions WHERE lesson_id = l.id)
           WHERE NOT EXISTS (SELECT 1 FROM lesson_versions v WHERE v.lesson_id = l.id AND v.version = 1)"""
        + ("" if only is None else " AND l.id = ?"), [] if only is None else [only]
    ).fetchall()
    batch = []
    for (lesson_id, trigger, action, rationale, tags, version, created_at, last_refined,
         earliest, earliest_trigger, earliest_rationale, earliest_tags) in rows:
        try:
            if earliest is None:  # no rows at all: the lesson as it stands is version N
                earliest = int(version or 1)
                if earliest < 1:
                    raise ValueError(f"version {earliest} is below 1")
                tags_json = json.dumps(_tags(tags))
                batch.append((lesson_id, earliest, trigger, action, rationale, tags_json,
                              last_refined or created_at, None, 0))
            else:
                trigger, rationale, tags_json = earliest_trigger, earliest_rationale, earliest_tags
            for k, prefix, reason in reconstruct(earliest, rationale):
                batch.append((lesson_id, k, trigger, "", prefix, tags_json, created_at, reason, 1))
        except (ValueError, TypeError) as exc:
            failures.append(f"lesson {lesson_id!r}: {exc}")
    db.conn.executemany(
        """INSERT OR IGNORE INTO lesson_versions
           (lesson_id, version, trigger, action, rationale, tags, timestamp, refinement_reason,
            reconstructed)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        batch,
    )
    return failures
