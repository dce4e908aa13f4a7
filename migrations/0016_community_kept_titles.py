"""Add `community_kept_titles`: the community titles community detection keeps between cycles.

Why: a community's id is a digest of its members, so at scale almost every community changes id
when 1% of the lessons change, and describing each one anew (its members' phrases, and the
keywords' inverse document frequency over every lesson) was a large part of a repeat cycle. A
title is drawn only from a community's most central members, so a row holds the title of one of the
last run's communities and a digest of the ids and contents of the members it was drawn from
(`sample`). It is a cache: deleting every row only makes the next run draw every title again. Not
exported, not part of any undo.

Only a new table; no existing table or row is touched. Idempotent.
"""


def migrate(db):
    db.execute("CREATE TABLE IF NOT EXISTS community_kept_titles (sample TEXT PRIMARY KEY, title TEXT NOT NULL) "
               "WITHOUT ROWID")
