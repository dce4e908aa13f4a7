"""Add a full-text index over lessons (SQLite FTS5) and fill it from the existing lessons.

Why: `lesson query` ranks lessons by relevance (BM25) and must stay fast at 100k lessons. The index
is new tables kept in step by mgcp's own writes; the legacy `lessons` table is not altered (no
triggers are added to it). `lesson_search_docs` gives each lesson a stable integer id that is the
FTS row id (the implicit rowid of `lessons` may change on VACUUM, so it is not used). Filling inserts
only lessons missing from the index, so re-running does nothing.
"""


def migrate(db):
    db.execute(
        """CREATE TABLE IF NOT EXISTS lesson_search_docs (
               id INTEGER PRIMARY KEY,
               lesson_id TEXT NOT NULL UNIQUE)"""
    )
    db.execute(
        """CREATE VIRTUAL TABLE IF NOT EXISTS lesson_search USING fts5(
               trigger, action, rationale, tags, tokenize = 'porter unicode61')"""
    )
    db.execute(
        """INSERT INTO lesson_search_docs (lesson_id)
           SELECT id FROM lessons WHERE id NOT IN (SELECT lesson_id FROM lesson_search_docs)
           ORDER BY rowid"""
    )
    db.execute(
        """INSERT INTO lesson_search (rowid, trigger, action, rationale, tags)
           SELECT d.id, l.trigger, l.action, COALESCE(l.rationale, ''), l.tags
           FROM lesson_search_docs d JOIN lessons l ON l.id = d.lesson_id
           WHERE d.id NOT IN (SELECT rowid FROM lesson_search)"""
    )
