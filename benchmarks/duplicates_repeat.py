"""CPU time of duplicate detection as a REM cycle runs it, on a benchmark database: a full run (every
text read anew), then a repeat after 1% of the lessons changed as `run.py --only repeat` changes
them (a third refined, archived, added), with the words of unchanged texts kept, and the kept pair
search when the code has one. Prints JSON: per run the CPU and wall seconds, the findings, how many
rows the repeat compared with all the others, and a digest of the findings' JSON (equal digests:
byte-identical findings), so that two checkouts can be compared on one database:

    python benchmarks/duplicates_repeat.py benchmarks/results/cache/large-...db
    PYTHONPATH=<a checkout of main> python benchmarks/duplicates_repeat.py <the same database>

The database is opened read-only; the changes are made to the lessons in memory.
"""

import copy
import hashlib
import json
import random
import sqlite3
import sys
import time

from mgcp.config import DEFAULTS
from mgcp.models import LessonRow
from mgcp.operations import duplicate_detection
from mgcp.operations.shared import CycleCache, Reader
from mgcp.operations.similarity import LexicalBackend

try:
    from mgcp.operations.kept_search import KeptSearch
except ImportError:  # code without the kept search
    KeptSearch = None


def lessons(db: str) -> list[LessonRow]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rest = {f: None for f in LessonRow._fields[8:]}
    try:
        return [LessonRow(id=r[0], trigger=r[1], action=r[2], tags=json.loads(r[3] or "[]"), relationships=(),
                          version=r[4], usage_count=r[5], created_at=r[6], **rest)
                for r in conn.execute("SELECT l.id, l.trigger, l.action, l.tags, l.version, l.usage_count, "
                                      "l.created_at FROM lessons l LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id "
                                      "WHERE COALESCE(c.status, 'active') = 'active' ORDER BY l.id")]
    finally:
        conn.close()


def changed(rows: list[LessonRow], seed: int = 7) -> list[LessonRow]:
    rng = random.Random(seed)
    third = max(1, len(rows) // 300)
    picked = rng.sample(range(len(rows)), 2 * third)
    new = list(rows)
    for i in picked[:third]:
        new[i] = new[i]._replace(action=new[i].action + " Check it twice.", version=new[i].version + 1)
    gone = set(picked[third:])
    added = [rows[i]._replace(id=f"bench-new-{k:05d}", trigger=rows[i].trigger + " again",
                              action="Prefer " + rows[i].action)
             for k, i in enumerate(rng.sample(range(len(rows)), third))]
    return sorted([r for i, r in enumerate(new) if i not in gone] + added, key=lambda r: r.id)


def main(db: str) -> None:
    settings = copy.deepcopy(DEFAULTS["duplicate_detection"])
    out = {}

    def cycle(label, rows, reader, state):
        cache = CycleCache(reader=reader)
        search = KeptSearch(state) if KeptSearch else None
        t0, c0 = time.perf_counter(), time.process_time()
        findings = duplicate_detection.run(rows, settings, LexicalBackend(cache), cache, frozenset(),
                                           **({"search": search} if search else {}))
        out[label] = {"cpu_s": round(time.process_time() - c0, 2), "wall_s": round(time.perf_counter() - t0, 2),
                      "findings": len(findings), "compared_rows": search.changed if search else None,
                      "findings_sha256": hashlib.sha256(json.dumps([f.model_dump(mode="json") for f in findings])
                                                        .encode()).hexdigest()}
        return search.keep if search else None

    rows = lessons(db)
    reader = Reader()
    state = cycle("full", rows, reader, None)
    cycle("repeat", changed(rows), Reader(reader.keep_corpora()[0]), state)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
