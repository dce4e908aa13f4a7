"""Add `kept_indexes`, and a change mark of the reinforced patterns: what REM operations keep of the
indexes they build over every lesson between cycles.

Why: the index of which lessons hold which word (read by knowledge extraction and pattern
reinforcement) cost a second per cycle at 100,000 lessons, and pattern reinforcement looked again
for the lesson holding each of 10,000 patterns, although only the lessons changed since the last
cycle need reading again. A `kept_indexes` row holds one index (`name`) as bytes that only its
operation reads and checks (each lesson known by a digest of what it was read from, and the rules it
was made by). It is a cache: nothing else refers to it, it is replaced whole, and deleting it only
costs the next cycle the time to build the index again. Not exported, not part of any undo.

The `reinforced_patterns` change mark (in `change_marks`, as migration 0009's) is replaced by a
random value by every insert, update or delete of a pattern: a kept decision of pattern
reinforcement holds only while the patterns are as that run left them (an undo changes the mark).

Only a new table, a new mark row and new triggers; no existing row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS kept_indexes (name TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID")
    db.execute("INSERT OR IGNORE INTO change_marks (name, mark) VALUES ('reinforced_patterns', random())")
    for event in ("INSERT", "UPDATE", "DELETE"):
        db.execute(f"CREATE TRIGGER IF NOT EXISTS mark_reinforced_patterns_{event.lower()} "
                   f"AFTER {event} ON reinforced_patterns FOR EACH ROW "
                   "BEGIN UPDATE change_marks SET mark = random() WHERE name = 'reinforced_patterns'; END")
