"""Add the tables of pattern reinforcement: reinforced patterns, and the decisions each session stated.

Why: what recurs across sessions (a lesson added again, a decision made again, a note sentence
written again) is stamped with how often it recurred, when it was last reinforced and the sources
it is derived from; ranking may weigh reinforced lessons higher. A project's context keeps a
decision once in its recent decisions, so a decision stated again in a later session leaves no
trace in the context history: `decision_observations` records each (project, session, decision)
as it is saved. Only new tables; nothing existing is touched.
"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS reinforced_patterns (
    id TEXT PRIMARY KEY,
    cluster_key TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL,
    text TEXT NOT NULL,
    lesson_id TEXT,
    canonical TEXT NOT NULL,
    reinforcement_count INTEGER NOT NULL,
    last_reinforced_at TEXT NOT NULL,
    derived_from JSON NOT NULL DEFAULT '[]',
    derived_via TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_reinforced_patterns_lesson ON reinforced_patterns(lesson_id);

CREATE TABLE IF NOT EXISTS decision_observations (
    project_id TEXT NOT NULL,
    session_number INTEGER NOT NULL,
    decision TEXT NOT NULL,
    observed_at TEXT NOT NULL,
    PRIMARY KEY (project_id, session_number, decision)
);
"""


def migrate(db):
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
