"""Add `kept_corpora`: the words of the texts REM operations compare, kept between cycles by corpus.

Why: building the word vectors of every trigger and action (and of each lesson's whole text) read
each text's words through a lookup of its own, most of the time a repeat cycle spends on unchanged
lessons. A row holds one corpus (`name`) as bytes only the operations read: the texts' digests and
their words as numbers (`mgcp.operations.kept_words`), under a digest of the rules words are read
by, so that other rules find nothing to use. The kept readings (`kept_readings`, 0011), which these
and the contradiction scan's own kept search (in `kept_pairs`) replace, are dropped with their
table: a cache nothing else refers to and nothing reads any more.
It is a cache: deleting every row only costs the next cycle the time to read the texts again.
Not exported, not part of any undo.

A new table, and the cache table `kept_readings` dropped. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS kept_corpora (name TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID")
    db.execute("DROP TABLE IF EXISTS kept_readings")
