"""Add `kept_readings`: what REM operations read from each text, kept between cycles.

Why: reading a text the way the operations compare it (its words: folding, identifiers split,
synonyms and set phrases; an action's claims) is most of what a cycle spends on unchanged lessons.
A row holds one reading of one text (`reading`: "words", "screen" or "claims"; `value`: the
reading as text) under a digest of the text keyed by a digest of the rules it was read by, so a text
that changes, or a new version of the rules, simply finds no row. It is a cache: a cycle fills in
what is missing, drops what nothing reads any more, and deleting every row only costs the next
cycle the time to read the texts again. Not exported, not part of any undo.

Only a new table; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS kept_readings "
               "(digest BLOB PRIMARY KEY, reading TEXT NOT NULL, value TEXT NOT NULL) WITHOUT ROWID")
