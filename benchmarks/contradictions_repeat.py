"""CPU time of the contradiction scan as a REM cycle runs it, on a benchmark database: a full run (every
text read anew), then a repeat after 1% of the lessons changed as `run.py --only repeat` changes
them (a third refined, archived, added), with the words of unchanged triggers kept, and the kept
claim search when the code has one; then the same repeat with nothing kept (a full scan). Prints
JSON: per run the CPU and wall seconds, the findings, how many actions the repeat read anew, and a
digest of the findings' JSON (equal digests: byte-identical findings), so that two checkouts can
be compared on one database:

    python benchmarks/contradictions_repeat.py benchmarks/results/cache/large-...db
    PYTHONPATH=<a checkout of main> python benchmarks/contradictions_repeat.py <the same database>
    python benchmarks/contradictions_repeat.py benchmarks/quality/lessons.jsonl.gz   # the real-world set

The database is opened read-only; the changes are made to the lessons in memory.
"""

import copy
import gzip
import hashlib
import json
import sys
import time

from duplicates_repeat import changed, lessons

from mgcp.config import DEFAULTS
from mgcp.models import LessonRow
from mgcp.operations import contradiction_scan
from mgcp.operations.shared import CycleCache, Reader

try:
    from mgcp.operations.claim_search import KeptClaims
except ImportError:  # code without the kept claim search
    KeptClaims = None


def real_world(path: str) -> list[LessonRow]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    when = "2026-01-01T00:00:00+00:00"
    return sorted((LessonRow(r["id"], r.get("trigger") or "", r.get("action") or "", r.get("tags") or [], (), 1, 0,
                             when, when, None) for r in rows), key=lambda r: r.id)


def main(db: str) -> None:
    settings = {**copy.deepcopy(DEFAULTS["contradiction_scan"]), "max_findings": 10**6}
    out = {}

    def cycle(label, rows, reader, state, keep=True):
        cache = CycleCache(reader=reader)
        search = KeptClaims(state) if KeptClaims and keep else None
        t0, c0 = time.perf_counter(), time.process_time()
        findings = contradiction_scan.run(rows, settings, cache, frozenset(), **({"kept": search} if search else {}))
        out[label] = {"cpu_s": round(time.process_time() - c0, 2), "wall_s": round(time.perf_counter() - t0, 2),
                      "findings": len(findings), "read_anew": search.fresh if search else None,
                      "findings_sha256": hashlib.sha256(json.dumps([f.model_dump(mode="json") for f in findings])
                                                        .encode()).hexdigest()}
        return search.keep if search else None

    rows = lessons(db) if not db.endswith(".jsonl.gz") else real_world(db)
    reader = Reader()
    state = cycle("full", rows, reader, None)
    corpora = reader.keep_corpora()[0]
    new = changed(rows)
    cycle("repeat", new, Reader(corpora), state)
    cycle("repeat, nothing kept", new, Reader(corpora), None, keep=False)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
