"""Add `kept_pairs`: what duplicate detection's pair search keeps between cycles.

Why: a repeat cycle after a few lessons changed should compare only the changed actions with the
others, not search all pairs again. A row holds one search's kept state under its name (`search`:
"duplicate_detection") as bytes that only the search reads: the corpus it was found in and the
pairs near the threshold (`mgcp.operations.kept_search`). It is a cache: a state made by other
rules is not used, the next full search replaces it, and deleting it only costs that full search.
Not exported, not part of any undo.

Only a new table; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS kept_pairs (search TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID")
