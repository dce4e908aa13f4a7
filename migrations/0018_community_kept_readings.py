"""Add `community_kept_readings`: what community detection reads of each lesson to draw the titles
(each lesson's keywords, for their inverse document frequency; each title sample member's
phrases), kept between cycles.

Why: drawing titles read every active lesson's trigger and tags (the keywords' document
frequencies) and the phrases of every member of each community's title sample, which was most of
a repeat cycle's community detection when only a few lessons changed. A row holds one binary state
by name ("keywords", "phrases"), each lesson known by a digest of its content and the state by a
digest of the rules it was read by. It is a cache: deleting it only makes the next run read those
texts again. Not exported, not part of any undo.

Only a new table; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS community_kept_readings (name TEXT PRIMARY KEY, state BLOB NOT NULL) "
               "WITHOUT ROWID")
