"""Keep only active lessons in the full-text index, and keep it so on every lifecycle change.

Why: `lesson query` lets FTS5 rank the matches on its own and joins only the best few to their
lessons. With archived, superseded and deleted lessons in the index, a query must look past every
one of them that matches, and a knowledge base that REM has consolidated for months holds many.
Triggers on `lesson_lifecycle` (mgcp's own table; the legacy `lessons` table is not touched) take
a lesson's text out of the index when it leaves `active` and put it back when it returns, whatever
writes the change (review, undo, import). `lesson_search_docs` keeps every lesson's stable doc id.
Idempotent: the delete finds nothing the second time, and the triggers are created only when missing.
"""

# The lesson's text back in the index when its status is active (the row's absence means active).
_PUT_BACK = """INSERT INTO lesson_search (rowid, trigger, action, rationale, tags)
    SELECT d.id, l.trigger, l.action, COALESCE(l.rationale, ''), l.tags
    FROM lesson_search_docs d JOIN lessons l ON l.id = d.lesson_id
    WHERE d.lesson_id = {row}.lesson_id AND {active}"""
_TAKE_OUT = "DELETE FROM lesson_search WHERE rowid = (SELECT id FROM lesson_search_docs WHERE lesson_id = {row}.lesson_id)"


def migrate(db):
    db.execute(
        """DELETE FROM lesson_search WHERE rowid IN (
               SELECT d.id FROM lesson_search_docs d JOIN lesson_lifecycle c ON c.lesson_id = d.lesson_id
               WHERE c.status != 'active')"""
    )
    for event, row, active in (("INSERT", "NEW", "NEW.status = 'active'"),
                               ("UPDATE", "NEW", "NEW.status = 'active'"),
                               ("DELETE", "OLD", "1")):
        db.execute(
            f"CREATE TRIGGER IF NOT EXISTS lesson_search_on_lifecycle_{event.lower()} "
            f"AFTER {event} ON lesson_lifecycle FOR EACH ROW BEGIN "
            f"{_TAKE_OUT.format(row=row)}; {_PUT_BACK.format(row=row, active=active)}; END"
        )
