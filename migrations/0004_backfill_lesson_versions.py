"""Backfill lesson_versions for lessons written before versioning (the design's Migration 5).

Why: every lesson must have one lesson_versions row per version it has had. Legacy data:
`refine_lesson` overwrote `action` and appended "\\n\\n[vN] <reason>" to `rationale`, or, when the
rationale was empty, set it to the bare reason. So for a lesson at version N:

- row N is the current state (trigger, action, rationale, tags, last_refined);
- row k < N gets the reason that created version k+1 and its exact rationale: the prefix of the
  current rationale before the "[v(k+1)]" marker (empty when version 2 came from an empty rationale);
- the action text of rows k < N is lost: they are stored with action '' and `reconstructed = 1`;
- tags are copied as a JSON list: an older writer left comma-separated words in some lessons'
  column, which mgcp reads as the tags.

Existing data is not modified: only rows missing from lesson_versions are inserted (insert only what
is missing), so re-running does nothing and an interrupted run resumes. A lesson that cannot be
parsed is reported and skipped; the migration stays pending so the next start retries it.
"""

import json
import re

MARKER = re.compile(r"\n\n\[v(\d+)\] ")


def reconstruct(version, rationale):
    """Return [(version, rationale, reason_that_created_next)] for versions 1..version-1."""
    rationale = rationale or ""
    markers = {}  # version -> (start of "\n\n[vK] ", start of its reason)
    for match in MARKER.finditer(rationale):
        k = int(match.group(1))
        if 2 <= k <= version and k not in markers:
            markers[k] = (match.start(), match.end())
    rows = []
    for k in range(1, version):
        nxt = k + 1
        if nxt in markers:
            prefix = rationale[: markers[nxt][0]]
            later = [s for v, (s, _) in markers.items() if v > nxt]
            reason = rationale[markers[nxt][1]: min(later) if later else len(rationale)]
        elif nxt == 2:
            # Version 2 came from an empty rationale: the reason *became* the rationale, up to the
            # next marker.
            later = [s for v, (s, _) in markers.items() if v > 2]
            reason = rationale[: min(later) if later else len(rationale)] or None
            prefix = ""
        else:
            prefix, reason = None, None  # the marker is missing: nothing honest to recover
        rows.append((k, prefix, reason))
    return rows


def migrate(db):
    failures = []
    missing = db.execute(
        """SELECT l.id, l.trigger, l.action, l.rationale, l.tags, l.version, l.created_at,
                  l.last_refined
           FROM lessons l
           WHERE NOT EXISTS (SELECT 1 FROM lesson_versions v WHERE v.lesson_id = l.id)"""
    ).fetchall()
    batch = []
    for lesson_id, trigger, action, rationale, tags, version, created_at, last_refined in missing:
        try:
            version = int(version or 1)
            if version < 1:
                raise ValueError(f"version {version} is below 1")
            if tags and not tags.lstrip().startswith("["):  # comma-separated words, as mgcp reads them
                tag_list = [t.strip() for t in tags.split(",") if t.strip()]
            else:
                tag_list = json.loads(tags or "[]")
            if not isinstance(tag_list, list):
                raise ValueError("tags is not a JSON list")
            tags_json = json.dumps(tag_list)
            for k, prefix, reason in reconstruct(version, rationale):
                batch.append((lesson_id, k, trigger, "", prefix, tags_json, created_at, reason, 1))
            batch.append(
                (lesson_id, version, trigger, action, rationale, tags_json,
                 last_refined or created_at, None, 0)
            )
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
