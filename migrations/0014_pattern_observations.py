"""Add `pattern_observations` and `pattern_observation_marks`: what pattern reinforcement observed
in the context history, kept between cycles with how far each history was read.

Why: reading every project's whole history again (a million rows at scale) was most of what a
repeat cycle's pattern reinforcement spent; with the observations kept, a cycle reads only the rows
added since. A `pattern_observations` row holds one cluster key's latest wording, its number of
sessions, and the sessions' sources with when each first observed it (one per line). A
`pattern_observation_marks` row holds, per project, the last history row read, how many rows that
makes and that row's notes and recent decisions; the same for the decisions as saved; and the name
of the rules the observations were made by. It is a cache: the next cycle reads the whole history
again when the marks do not match it, and deleting every row only costs that time. Not exported,
not part of any undo.

Only new tables; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("""CREATE TABLE IF NOT EXISTS pattern_observations (
        key TEXT PRIMARY KEY, said_at TEXT NOT NULL, said TEXT NOT NULL, size INTEGER NOT NULL,
        sources TEXT NOT NULL, firsts TEXT NOT NULL)""")
    db.execute("CREATE INDEX IF NOT EXISTS idx_pattern_observations_size ON pattern_observations(size)")
    db.execute("""CREATE TABLE IF NOT EXISTS pattern_observation_marks (
        source TEXT PRIMARY KEY, last_id INTEGER NOT NULL, rows INTEGER NOT NULL, notes TEXT, decisions TEXT)""")
