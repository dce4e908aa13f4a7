"""Add change marks: a value that every write to what a REM operation reads replaces, in the write's
own transaction.

Why: a REM cycle skips an operation whose inputs did not change since its last run. Telling that
by reading and hashing every lesson costs a second at 100,000 lessons; a mark kept by triggers
costs one row. `change_marks` holds one row per mark, each a random 64-bit value replaced by a new
random value whenever a row it watches is inserted, updated or deleted (random rather than a
counter, so two copies of a database changed apart never show the same mark):

- `lesson_content`: the lessons' ids, versions, triggers, actions, tags and links, and their
  lifecycle status (not their use counts, which every query changes);
- `lesson_use`: everything of the lessons, their lifecycle, kind and confidence, outcome counts and
  the query log (what the staleness scan reads).

Only a new table and triggers; no existing table or row is touched. Idempotent: the table, its
rows and the triggers are created only when missing.
"""

MARKS = {
    "lesson_content": [
        ("lessons", "INSERT", ""), ("lessons", "DELETE", ""),
        ("lessons", "UPDATE", 'OF id, version, "trigger", action, tags, relationships'),
        ("lesson_lifecycle", "INSERT", ""), ("lesson_lifecycle", "DELETE", ""),
        ("lesson_lifecycle", "UPDATE", ""),
    ],
    "lesson_use": [
        (table, event, "")
        for table in ("lessons", "lesson_lifecycle", "lesson_traits", "lesson_outcome_stats", "query_log")
        for event in ("INSERT", "UPDATE", "DELETE")
    ],
}


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS change_marks (name TEXT PRIMARY KEY, mark INTEGER NOT NULL)")
    for name, watched in MARKS.items():
        db.execute("INSERT OR IGNORE INTO change_marks (name, mark) VALUES (?, random())", [name])
        for table, event, columns in watched:
            db.execute(
                f"CREATE TRIGGER IF NOT EXISTS mark_{name}_{table}_{event.lower()} "
                f"AFTER {event} {columns} ON {table} FOR EACH ROW "
                f"BEGIN UPDATE change_marks SET mark = random() WHERE name = '{name}'; END")
