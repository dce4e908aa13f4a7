"""What ranking and recall read about lessons and projects, in plain sqlite3: shared by the
SessionStart hook (which must stay light: stdlib and mgcp's stdlib-only modules) and by the
`recall` command, which runs it on its own connection in a worker thread.

A lesson's kind and confidence are those of its current version (`lesson_traits`), else the
defaults; its outcome counts come from `lesson_outcome_stats`. Only active lessons are read.
"""

from __future__ import annotations

import json
import sqlite3
import sys

from mgcp.persistence.columns import json_list as _json_list
from mgcp.persistence.columns import tags
from mgcp.persistence.sessions import FIND_PROJECT, find_params

# The lesson columns ranking needs, and the joins that bring kind, confidence and outcomes.
RANKED_COLUMNS = """l.id, l.trigger, l.action, l.rationale, l.tags, l.usage_count, l.version,
    l.last_refined, COALESCE(t.kind, 'pattern') AS kind, COALESCE(t.confidence, 0.8) AS confidence,
    COALESCE(s.helped, 0) AS helped, COALESCE(s.failed, 0) AS failed,
    (SELECT max(p.reinforcement_count) FROM reinforced_patterns p WHERE p.lesson_id = l.id) AS reinforcement_count"""
RANKED_JOINS = """LEFT JOIN lesson_traits t ON t.lesson_id = l.id AND t.version = l.version
    LEFT JOIN lesson_outcome_stats s ON s.lesson_id = l.id
    LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id"""
ACTIVE = "COALESCE(c.status, 'active') = 'active'"
# FTS5 relevance: trigger and action weigh twice as much as the rationale and the tags.
BM25 = "bm25(lesson_search, 1.0, 1.0, 0.5, 0.5)"
# The best text matches: FTS5 alone ranks every match (a join per match would cost more than the
# ranking), ties at the cut going to the earlier indexed; then the best few are joined to their
# ranking columns. The index holds active lessons only (kept so by triggers on lesson_lifecycle);
# the status is checked again all the same.
SEARCH = f"""SELECT {RANKED_COLUMNS}, m.relevance AS relevance
    FROM (SELECT rowid AS doc, -{BM25} AS relevance FROM lesson_search WHERE lesson_search MATCH ?
          ORDER BY {BM25}, rowid LIMIT ?) m
    JOIN lesson_search_docs d ON d.id = m.doc JOIN lessons l ON l.id = d.lesson_id {RANKED_JOINS}
    WHERE {ACTIVE}
    ORDER BY m.relevance DESC, l.usage_count DESC, l.id"""
OF_KIND = f"""SELECT {{columns}}
    FROM lesson_traits t JOIN lessons l ON l.id = t.lesson_id AND l.version = t.version
    LEFT JOIN lesson_outcome_stats s ON s.lesson_id = l.id
    LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id
    WHERE t.kind = :kind AND t.confidence >= :confidence AND {ACTIVE}
    ORDER BY {{order}} LIMIT :limit"""
# A lesson's FTS5 relevance to a task (0 when it does not match): a lookup of its own document
# among the matches, cheaper than ranking every match. Ordered by confidence first, it is looked up
# only for the lessons as confident as those within the limit (the index gives that order).
RELEVANCE = f"""COALESCE((SELECT -{BM25} FROM lesson_search WHERE lesson_search MATCH :match AND rowid =
    (SELECT d.id FROM lesson_search_docs d WHERE d.lesson_id = l.id)), 0.0)"""
MOST_USED = f"""SELECT {RANKED_COLUMNS}, 0.0 AS relevance FROM lessons l {RANKED_JOINS}
    WHERE {ACTIVE} ORDER BY l.usage_count DESC LIMIT ?"""  # ties in the index's (row) order: no sort


def rows(conn: sqlite3.Connection, sql: str, params) -> list[dict]:
    """The rows as dicts; a lesson's tags as a list."""
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    found = [dict(zip(names, row)) for row in cur]
    for row in found:
        if "tags" in row:
            row["tags"] = tags(row["tags"])
    return found


# Said on stderr when a lookup's results are shown but a full disk kept it from being counted.
NOT_COUNTED = "mgcp: the disk is full: this lookup was not counted (use counts, the query log)"


class Reader:
    """The reads recall makes, over one sqlite3 connection (autocommit)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def project(self, path: str) -> dict | None:
        """The project's current state (notes, todos, recent decisions, active files), or None."""
        found = rows(self.conn, FIND_PROJECT, find_params(path))
        if not found:
            return None
        row = found[0]
        return {"project_id": row["project_id"], "name": row["project_name"], "notes": row["notes"],
                "todos": _json_list(row["todos"]), "decisions": _json_list(row["recent_decisions"]),
                "files": _json_list(row["active_files"])}

    def of_kind(self, kind: str, min_confidence: float = 0.0, limit: int = 30, recent: bool = False,
                match: str | None = None) -> list[dict]:
        """Active lessons of `kind`, the most recently refined first if `recent`, else the strongest:
        the most confident, then (given `match`, a task as an FTS5 query) the best match to the
        task, then the most used, then by id."""
        if recent:
            order = "l.last_refined DESC, l.id"
        else:
            order = f"t.confidence DESC, {'relevance DESC, ' if match else ''}l.usage_count DESC, l.id"
        columns = f"{RANKED_COLUMNS}, {RELEVANCE if match and not recent else '0.0'} AS relevance"
        return rows(self.conn, OF_KIND.format(columns=columns, order=order),
                    {"kind": kind, "confidence": min_confidence, "limit": limit, "match": match})

    def most_used(self, limit: int = 40) -> list[dict]:
        return rows(self.conn, MOST_USED, [limit])

    def search(self, match: str, limit: int = 60) -> list[dict]:
        return rows(self.conn, SEARCH, [match, limit])

    def mark_used(self, ids: list[str], now: str, query: str | None = None,
                  project_id: str | None = None) -> None:
        """Count the lessons as used (usage count, last used) and, for a task, log the query."""
        if not ids and query is None:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany("UPDATE lessons SET usage_count = usage_count + 1, last_used = ? WHERE id = ?",
                                  [(now, i) for i in ids])
            if query is not None:
                self.conn.execute("INSERT INTO query_log (query, project_id, result_ids, created_at) VALUES (?, ?, ?, ?)",
                                  [query, project_id, json.dumps(ids), now])
            self.conn.execute("COMMIT")
        except BaseException as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            if not isinstance(exc, sqlite3.OperationalError):
                raise
            from mgcp.persistence import migrate

            if not migrate.out_of_space(exc, self.conn.execute("PRAGMA database_list").fetchone()[2]):
                raise
            print(NOT_COUNTED, file=sys.stderr)  # counters, not content: the recall is shown all the same
