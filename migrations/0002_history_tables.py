"""Add the tables that keep history: lesson versions, context snapshots, sessions, lesson
lifecycle and the query log.

The history index is on project_id alone, as in the design: SQLite keys it by row id too, so "the
latest snapshot of a project" is one index probe, with no sort.

Why: before versioning, a refinement overwrote a lesson's action and every context save overwrote
the project's state. These new tables record every version and every save from now on. Existing
tables and rows are not touched; the backfills that describe existing data are separate migrations.
"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS lesson_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    trigger TEXT NOT NULL,
    action TEXT NOT NULL,
    rationale TEXT,
    tags JSON NOT NULL DEFAULT '[]',
    timestamp TEXT NOT NULL,
    refinement_reason TEXT,
    session_id TEXT,
    reconstructed INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (lesson_id) REFERENCES lessons(id)
);
CREATE INDEX IF NOT EXISTS idx_lesson_versions_lesson ON lesson_versions(lesson_id);
CREATE UNIQUE INDEX IF NOT EXISTS idx_lesson_versions_unique ON lesson_versions(lesson_id, version);

CREATE TABLE IF NOT EXISTS context_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL,
    session_number INTEGER NOT NULL,
    session_id TEXT,
    timestamp TEXT NOT NULL,
    notes TEXT,
    active_files JSON NOT NULL DEFAULT '[]',
    todos JSON NOT NULL DEFAULT '[]',
    recent_decisions JSON NOT NULL DEFAULT '[]',
    catalogue_hash TEXT,
    catalogue_delta JSON,
    FOREIGN KEY (project_id) REFERENCES project_contexts(project_id)
);
CREATE INDEX IF NOT EXISTS idx_context_history_project ON context_history(project_id);
CREATE INDEX IF NOT EXISTS idx_context_history_time ON context_history(timestamp);

CREATE TABLE IF NOT EXISTS project_sessions (
    project_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    session_number INTEGER NOT NULL,
    source TEXT,
    first_seen_at TEXT NOT NULL,
    PRIMARY KEY (project_id, session_id)
);

CREATE TABLE IF NOT EXISTS lesson_lifecycle (
    lesson_id TEXT PRIMARY KEY,
    status TEXT NOT NULL DEFAULT 'active',
    superseded_by TEXT,
    project_id TEXT,
    reason TEXT,
    changed_at TEXT NOT NULL,
    FOREIGN KEY (lesson_id) REFERENCES lessons(id)
);
CREATE INDEX IF NOT EXISTS idx_lesson_lifecycle_status ON lesson_lifecycle(status);

CREATE TABLE IF NOT EXISTS query_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    query TEXT NOT NULL,
    project_id TEXT,
    result_ids JSON NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_query_log_time ON query_log(created_at);
"""


def migrate(db):
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
