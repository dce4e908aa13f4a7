"""Keep community detection's per-lesson state as one binary state in `community_kept_runs`.

Why: `community_kept` held a row per active lesson (its candidates as a JSON list of lesson ids),
and reading, comparing and writing 100k such rows took about as long as what they saved. The
state (each lesson's content digest, label, edge digest, and its candidates as row numbers with
the scores of their pairs) is now kept as one binary value, `community_kept_runs.lessons`, which
only community detection reads. It is a cache: a database without it makes the next run a full
one. Not exported, not part of any undo.

Adds the column (NULL in the row kept so far, so the next run is a full one) and drops the cache
table `community_kept`, which nothing reads any more. Idempotent.
"""


def migrate(db):
    columns = [row[1] for row in db.execute("PRAGMA table_info(community_kept_runs)").fetchall()]
    if "lessons" not in columns:
        db.execute("ALTER TABLE community_kept_runs ADD COLUMN lessons BLOB")
    db.execute("DROP TABLE IF EXISTS community_kept")
