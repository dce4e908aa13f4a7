"""Add `kept_words`: the words REM's text comparisons read from each text, kept between cycles.

Why: reading a text the way similarity compares it (folding, identifiers split, synonyms and set
phrases) is most of what a cycle spends on unchanged lessons. A row holds the words of one text, as
`mgcp.text.terms` reads them, under a digest of the text and of the reading rules (`digest`), so a
text that changes, or a new version of the rules, simply finds no row. It is a cache: a cycle fills
in what is missing, drops what no lesson reads any more, and deleting every row only costs the
next cycle the time to read the texts again. Not exported, not part of any undo.

Only a new table; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS kept_words (digest BLOB PRIMARY KEY, words TEXT NOT NULL) WITHOUT ROWID")
