"""contradiction_scan on the real-world lesson set (benchmarks/quality/lessons.jsonl.gz): how many
pairs it raises, how long it takes, and a random sample of them for a person to judge.

    python benchmarks/contradictions.py [--sample 30] [--seed 5]

The planted set (contradictions in 14 wordings, agreeing paraphrases, unrelated pairs) is a test:
`pytest -s tests/test_operations_contradiction_scan.py -k precision` prints its precision and recall.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from pathlib import Path

from mgcp.config import DEFAULTS
from mgcp.models import Lesson
from mgcp.operations import contradiction_scan

LESSONS = Path(__file__).resolve().parent / "quality" / "lessons.jsonl.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=30)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    with gzip.open(LESSONS, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    lessons = [Lesson(id=r["id"], trigger=r.get("trigger") or "", action=r.get("action") or "",
                      tags=r.get("tags") or [], created_at="2026-01-01T00:00:00+00:00",
                      last_refined="2026-01-01T00:00:00+00:00") for r in rows]
    t0 = time.perf_counter()
    findings = contradiction_scan.run(lessons, {**DEFAULTS["contradiction_scan"], "max_findings": 10**9})
    print(f"{len(lessons)} lessons: {len(findings)} contradiction findings in {time.perf_counter() - t0:.1f} s")
    for n, finding in enumerate(random.Random(args.seed).sample(findings, min(args.sample, len(findings))), 1):
        older, newer = (finding.data["lessons"][finding.data[k]] for k in ("older", "newer"))
        print(f"\n#{n} claims overlap {finding.data['claim_overlap']}, triggers {finding.data['trigger_similarity']}")
        print("  A:", " ".join(older["action"].split())[:200])
        print("  B:", " ".join(newer["action"].split())[:200])


if __name__ == "__main__":
    main()
