"""A legacy (pre-versioning) database with the cases the upgrade must honour."""

import hashlib
import json
import sqlite3

from conftest import ROOT

LEGACY_SQL = (ROOT / "migrations" / "0001_legacy_tables.py")


def legacy_schema() -> str:
    namespace = {}
    exec(LEGACY_SQL.read_text(), namespace)
    return namespace["LEGACY_SCHEMA"]


def pid(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:12]


def rel(target):
    return {"target": target, "type": "related", "weight": 0.5, "context": [], "bidirectional": True}


LESSONS = [
    # id, trigger, action, rationale, version, tags
    ("plain-v1", "before calling an unfamiliar API", "Read its signature first.", "Guessing wastes time.", 1, ["api"]),
    ("three-versions", "when a test is flaky", "Quarantine it and file a ticket.",
     "Flaky tests erode trust.\n\n[v2] did not say how to find the cause\n\n[v3] quarantining alone hid real bugs", 3,
     ["testing"]),
    ("from-empty", "when committing generated files", "Regenerate in CI and diff.",
     "generated files drifted from their sources", 2, ["git"]),
]


def build_legacy(path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(legacy_schema())
    for lesson_id, trigger, action, rationale, version, tags in LESSONS:
        conn.execute(
            """INSERT INTO lessons (id, trigger, action, rationale, examples, version, created_at,
               last_refined, last_used, usage_count, tags, parent_id, related_ids, relationships)
               VALUES (?, ?, ?, ?, '[]', ?, '2026-01-10T14:03:11+00:00', '2026-02-01T09:00:00+00:00',
               NULL, 4, ?, NULL, '[]', ?)""",
            [lesson_id, trigger, action, rationale, version, json.dumps(tags),
             json.dumps([rel("plain-v1")] if lesson_id != "plain-v1" else [])])
    for path_, catalogue, count in (("/home/dev/alpha", {"stack": ["python"], "db": {"engine": "sqlite"}}, 57),
                                    ("/home/dev/beta", {"ci": "github"}, 3)):
        conn.execute(
            """INSERT INTO project_contexts (project_id, project_name, project_path, catalogue, todos,
               active_files, recent_decisions, last_session_id, last_accessed, session_count, notes)
               VALUES (?, ?, ?, ?, ?, '["src/app.py"]', '["use WAL"]', 'legacy-session', '2026-02-02T10:00:00+00:00', ?, 'legacy notes')""",
            [pid(path_), path_.rsplit("/", 1)[1], path_, json.dumps(catalogue),
             json.dumps([{"content": "ship it", "status": "pending", "priority": "high",
                          "created_at": "2026-02-01T00:00:00+00:00", "notes": None}]), count])
    conn.execute("""INSERT INTO workflows VALUES ('wf', 'Release', 'Cut a release', 'releasing', '[]', '[]',
                    '2026-01-01T00:00:00+00:00', 1)""")
    conn.commit()
    conn.close()
