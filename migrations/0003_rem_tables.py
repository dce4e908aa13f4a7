"""Add the tables of the REM cycle: per-project schedule state, the run ledger, stored findings,
applied actions (for undo; an action with no finding is a run's automatic output, such as
community summaries), community runs and context summaries.

Why: REM operations run on per-project schedules, their findings are reviewed across processes and
sessions, and every applied action must be undoable. Only new tables; nothing existing is touched.
"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS rem_state (
    project_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    last_run_session INTEGER NOT NULL DEFAULT 0,
    last_run_timestamp TEXT NOT NULL,
    last_run_result JSON,
    next_due_session INTEGER,
    PRIMARY KEY (project_id, operation)
);

CREATE TABLE IF NOT EXISTS rem_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL,
    session_number INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    duration_ms REAL,
    operations JSON NOT NULL DEFAULT '[]',
    finding_count INTEGER NOT NULL DEFAULT 0,
    errors JSON NOT NULL DEFAULT '[]',
    auto INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_rem_runs_project ON rem_runs(project_id, id);

CREATE TABLE IF NOT EXISTS rem_findings (
    id TEXT PRIMARY KEY,
    run_id INTEGER,
    project_id TEXT,
    operation TEXT NOT NULL,
    kind TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    options JSON NOT NULL,
    recommended INTEGER NOT NULL DEFAULT 1,
    data JSON NOT NULL DEFAULT '{}',
    subject JSON NOT NULL DEFAULT '{}',
    status TEXT NOT NULL DEFAULT 'pending',
    chosen_option INTEGER,
    input TEXT,
    created_at TEXT NOT NULL,
    resolved_at TEXT,
    FOREIGN KEY (run_id) REFERENCES rem_runs(id)
);
CREATE INDEX IF NOT EXISTS idx_rem_findings_fingerprint ON rem_findings(fingerprint);
CREATE INDEX IF NOT EXISTS idx_rem_findings_status ON rem_findings(status, operation, project_id);

CREATE TABLE IF NOT EXISTS rem_actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    finding_id TEXT,
    run_id INTEGER,
    action TEXT NOT NULL,
    changes JSON NOT NULL DEFAULT '[]',
    applied_at TEXT NOT NULL,
    auto INTEGER NOT NULL DEFAULT 0,
    undone_at TEXT,
    FOREIGN KEY (finding_id) REFERENCES rem_findings(id)
);
CREATE INDEX IF NOT EXISTS idx_rem_actions_finding ON rem_actions(finding_id);
CREATE INDEX IF NOT EXISTS idx_rem_actions_run ON rem_actions(run_id);

CREATE TABLE IF NOT EXISTS community_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER,
    graph_hash TEXT NOT NULL,
    modularity REAL,
    communities JSON NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS context_summaries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL,
    from_session INTEGER NOT NULL,
    to_session INTEGER NOT NULL,
    narrative TEXT NOT NULL,
    data JSON NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_context_summaries_project ON context_summaries(project_id, to_session);
"""


def migrate(db):
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
