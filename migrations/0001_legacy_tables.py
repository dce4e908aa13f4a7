"""Create the tables of an MGCP database from before versioning (MGCP v1.2).

Why: a fresh database must have exactly the legacy tables that existing users already have, so that
every later migration sees the same starting point. On an existing legacy database every statement
is `IF NOT EXISTS` and does nothing: no existing table or row is touched.
"""

LEGACY_SCHEMA = """
CREATE TABLE IF NOT EXISTS lessons (
    id TEXT PRIMARY KEY,
    trigger TEXT NOT NULL,
    action TEXT NOT NULL,
    rationale TEXT,
    examples JSON NOT NULL DEFAULT '[]',
    version INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    last_refined TEXT NOT NULL,
    last_used TEXT,
    usage_count INTEGER NOT NULL DEFAULT 0,
    tags JSON NOT NULL DEFAULT '[]',
    parent_id TEXT,
    related_ids JSON NOT NULL DEFAULT '[]',
    relationships JSON NOT NULL DEFAULT '[]',
    FOREIGN KEY (parent_id) REFERENCES lessons(id)
);
CREATE INDEX IF NOT EXISTS idx_lessons_parent ON lessons(parent_id);
CREATE INDEX IF NOT EXISTS idx_lessons_usage ON lessons(usage_count DESC);

CREATE TABLE IF NOT EXISTS telemetry_events (
    id TEXT PRIMARY KEY,
    timestamp TEXT NOT NULL,
    session_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    payload JSON NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_telemetry_session ON telemetry_events(session_id);
CREATE INDEX IF NOT EXISTS idx_telemetry_type ON telemetry_events(event_type);
CREATE INDEX IF NOT EXISTS idx_telemetry_time ON telemetry_events(timestamp);

CREATE TABLE IF NOT EXISTS lesson_usage (
    lesson_id TEXT PRIMARY KEY,
    total_retrievals INTEGER DEFAULT 0,
    last_retrieved TEXT,
    avg_score REAL DEFAULT 0.0,
    sessions_count INTEGER DEFAULT 0,
    FOREIGN KEY (lesson_id) REFERENCES lessons(id)
);

CREATE TABLE IF NOT EXISTS project_contexts (
    project_id TEXT PRIMARY KEY,
    project_name TEXT NOT NULL,
    project_path TEXT NOT NULL UNIQUE,
    catalogue JSON NOT NULL DEFAULT '{}',
    todos JSON NOT NULL DEFAULT '[]',
    active_files JSON NOT NULL DEFAULT '[]',
    recent_decisions JSON NOT NULL DEFAULT '[]',
    last_session_id TEXT,
    last_accessed TEXT NOT NULL,
    session_count INTEGER DEFAULT 0,
    notes TEXT
);
CREATE INDEX IF NOT EXISTS idx_project_path ON project_contexts(project_path);

CREATE TABLE IF NOT EXISTS workflows (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    trigger TEXT NOT NULL,
    steps JSON NOT NULL DEFAULT '[]',
    tags JSON NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS idx_workflow_tags ON workflows(tags);

CREATE TABLE IF NOT EXISTS community_summaries (
    community_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    member_ids JSON NOT NULL DEFAULT '[]',
    member_count INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"""


def migrate(db):
    for statement in LEGACY_SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
