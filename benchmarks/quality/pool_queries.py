"""Propose the lessons to judge for each task query: the pool behind `query_pool.jsonl`.

    python benchmarks/quality.py --keep-db q.db      # builds the corpus database once
    python benchmarks/quality/pool_queries.py q.db > to_judge.jsonl

For each query, the union of the top 12 lessons under four BM25 field weightings (trigger, action,
rationale, tags: 1/1/0.5/0.5, 0.3/1/0.2/0.2, 1/0.3/0.2/0.2, 1/1/0/0), the top 12 matching on the
action alone, and the top 8 holding all of the query's first three search terms; lessons already
listed as relevant in `queries.jsonl` are left out, except three of them per query (seeded), mixed in
as controls to measure how far the two judges agree. The lines come shuffled (seeded), each with the
lesson's trigger and action only: the judge sees no rank, no score and no variant.
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mgcp.persistence.lessons import Lessons  # noqa: E402
from mgcp.text import query_terms  # noqa: E402

WEIGHTINGS = ("1.0, 1.0, 0.5, 0.5", "0.3, 1.0, 0.2, 0.2", "1.0, 0.3, 0.2, 0.2", "1.0, 1.0, 0.0, 0.0")
SEED = 20261124


def top(db: sqlite3.Connection, match: str, weights: str, k: int) -> list[str]:
    return [row[0] for row in db.execute(
        f"""SELECT d.lesson_id FROM lesson_search JOIN lesson_search_docs d ON d.id = lesson_search.rowid
            WHERE lesson_search MATCH ? ORDER BY bm25(lesson_search, {weights}) LIMIT ?""", [match, k])]


def main(path: str) -> None:
    db = sqlite3.connect(path)
    rng = random.Random(SEED)
    for line in (Path(__file__).parent / "queries.jsonl").read_text().splitlines():
        query = json.loads(line)
        match = Lessons.match_expression(query["query"])
        ids = [i for weights in WEIGHTINGS for i in top(db, match, weights, 12)]
        ids += top(db, f"action : ({match})", WEIGHTINGS[0], 12)
        words = query_terms(query["query"])
        if len(words) >= 2:
            ids += top(db, " AND ".join(f'"{w}"' for w in words[:3]), WEIGHTINGS[0], 8)
        listed = set(query["relevant"])
        pool = [i for i in dict.fromkeys(ids) if i not in listed]
        pool += rng.sample(query["relevant"], min(3, len(query["relevant"])))
        rng.shuffle(pool)
        for lesson_id in pool:
            trigger, action = db.execute("SELECT trigger, action FROM lessons WHERE id = ?", [lesson_id]).fetchone()
            print(json.dumps({"query": query["query"], "id": lesson_id, "trigger": trigger, "action": action}))


if __name__ == "__main__":
    main(sys.argv[1])
