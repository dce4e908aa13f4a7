"""Add a full-text index over lessons (SQLite FTS5) and fill it from the existing lessons.

Why: `lesson query` ranks lessons by relevance (BM25) and must stay fast at 100k lessons. The index
is a new virtual table kept in step by mgcp's own writes; the legacy `lessons` table is not altered
(no triggers are added to it). Filling inserts only lessons missing from the index.
"""


def migrate(db):
    db.execute(
        """CREATE VIRTUAL TABLE IF NOT EXISTS lesson_search USING fts5(
               lesson_id UNINDEXED, trigger, action, rationale, tags,
               tokenize = 'porter unicode61')"""
    )
    db.execute(
        """INSERT INTO lesson_search (lesson_id, trigger, action, rationale, tags)
           SELECT l.id, l.trigger, l.action, COALESCE(l.rationale, ''), l.tags FROM lessons l
           WHERE l.id NOT IN (SELECT lesson_id FROM lesson_search)"""
    )
