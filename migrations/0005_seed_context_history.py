"""Seed context_history with one row per existing project (the design's Migration 6).

Why: history should have a starting point for projects that existed before versioning. Each project
without history gets its current state as session 0: notes, active files, todos and decisions in
full, the catalogue's SHA-256 (canonical JSON: sorted keys, compact separators) and a delta that adds
every top-level key. Its last session id is registered as a known session at the project's current
session number, so resuming that session does not count as a new one.

Existing rows are not modified; only missing rows are inserted, so re-running does nothing. A project
whose stored JSON cannot be parsed is reported and skipped, and the migration stays pending.
"""

import hashlib
import json


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def migrate(db):
    failures = []
    rows = db.execute(
        """SELECT p.project_id, p.catalogue, p.todos, p.active_files, p.recent_decisions,
                  p.last_session_id, p.last_accessed, p.session_count, p.notes
           FROM project_contexts p
           WHERE NOT EXISTS (SELECT 1 FROM context_history h WHERE h.project_id = p.project_id)"""
    ).fetchall()
    for (project_id, catalogue, todos, active_files, decisions, last_session_id, last_accessed,
         session_count, notes) in rows:
        try:
            cat = json.loads(catalogue or "{}")
            if not isinstance(cat, dict):
                raise ValueError("catalogue is not a JSON object")
            values = [json.loads(v or "[]") for v in (active_files, todos, decisions)]
            if not all(isinstance(v, list) for v in values):
                raise ValueError("todos, active_files or recent_decisions is not a JSON list")
        except (ValueError, TypeError) as exc:
            failures.append(f"project {project_id!r}: {exc}")
            continue
        db.execute(
            """INSERT INTO context_history
               (project_id, session_number, session_id, timestamp, notes, active_files, todos,
                recent_decisions, catalogue_hash, catalogue_delta)
               VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [project_id, last_session_id, last_accessed, notes,
             json.dumps(values[0]), json.dumps(values[1]), json.dumps(values[2]),
             hashlib.sha256(canonical(cat).encode()).hexdigest(),
             json.dumps({"added": cat, "removed": {}, "changed": {}})],
        )
        if last_session_id:
            db.execute(
                """INSERT OR IGNORE INTO project_sessions
                   (project_id, session_id, session_number, source, first_seen_at)
                   VALUES (?, ?, ?, 'legacy', ?)""",
                [project_id, last_session_id, int(session_count or 0), last_accessed],
            )
    return failures
