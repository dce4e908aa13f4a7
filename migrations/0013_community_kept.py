"""Add `community_kept` and `community_kept_runs`: what community detection keeps between cycles.

Why: rebuilding the nearest-neighbour graph of every lesson and partitioning it from scratch is
most of what a cycle spends on communities, even when 1% of the lessons changed. A row of
`community_kept` holds, for one active lesson, a digest of what the graph reads of it, its text
neighbour candidates (a JSON list of lesson ids), its community label and a digest of its edges;
the single row of `community_kept_runs` says which settings the state was computed under and how
many incremental runs followed the last full one. It is a cache: deleting every row only makes the
next run a full one. Not exported, not part of any undo.

Only new tables; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS community_kept (lesson_id TEXT PRIMARY KEY, content TEXT NOT NULL, "
               "candidates TEXT NOT NULL, label INTEGER NOT NULL, edges TEXT NOT NULL) WITHOUT ROWID")
    db.execute("CREATE TABLE IF NOT EXISTS community_kept_runs (id INTEGER PRIMARY KEY CHECK (id = 1), "
               "settings TEXT NOT NULL, runs_since_full INTEGER NOT NULL)")
