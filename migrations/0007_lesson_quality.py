"""Add what recall, ranking and outcome feedback need: each lesson version's kind and confidence,
the log of reported outcomes, and each lesson's outcome counts.

Why: a lesson can be a constraint, a preference, an error solution and so on, with a confidence;
both are versioned like its text, so `lesson_traits` holds one row per version written from now
on (keyed by lesson and version). A lesson without a row for its current version (every lesson
written before this migration) reads as kind `pattern` with confidence 0.8. Agents report whether a
lesson helped or failed (`lesson_outcomes`, one row per report, never rewritten);
`lesson_outcome_stats` keeps each lesson's counts and current failure streak in step with that log,
so that ranking reads one row per lesson. Only new tables; no existing table or row is touched.
"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS lesson_traits (
    lesson_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'pattern',
    confidence REAL NOT NULL DEFAULT 0.8,
    created_at TEXT NOT NULL,
    PRIMARY KEY (lesson_id, version),
    FOREIGN KEY (lesson_id) REFERENCES lessons(id)
);
CREATE INDEX IF NOT EXISTS idx_lesson_traits_kind ON lesson_traits(kind, confidence);

CREATE TABLE IF NOT EXISTS lesson_outcomes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('helped', 'failed')),
    note TEXT,
    session_id TEXT,
    project_id TEXT,
    created_at TEXT NOT NULL,
    FOREIGN KEY (lesson_id) REFERENCES lessons(id)
);
CREATE INDEX IF NOT EXISTS idx_lesson_outcomes_lesson ON lesson_outcomes(lesson_id, id);

CREATE TABLE IF NOT EXISTS lesson_outcome_stats (
    lesson_id TEXT PRIMARY KEY,
    helped INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    streak INTEGER NOT NULL DEFAULT 0,
    streak_started INTEGER,
    last_outcome_at TEXT,
    FOREIGN KEY (lesson_id) REFERENCES lessons(id)
);
"""


def migrate(db):
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
