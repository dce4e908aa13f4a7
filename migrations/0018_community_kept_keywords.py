"""Add `community_kept_keywords`: each lesson's keywords as community detection counts them for the
idf its titles are drawn with, kept between cycles.

Why: drawing a title needs each keyword's document frequency over every active lesson's trigger
and tags, and reading 100k triggers again was a large part of a repeat cycle's community detection
when only a few lessons changed. The single row holds one binary state (the lessons' ids and
content digests, the keywords, each lesson's keyword numbers) under a digest of the rules it was
read by. It is a cache: deleting it only makes the next run read every trigger again. Not exported,
not part of any undo.

Only a new table; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS community_kept_keywords (id INTEGER PRIMARY KEY CHECK (id = 1), "
               "state BLOB NOT NULL)")
