"""contradiction_scan on the real-world lesson set (benchmarks/quality/lessons.jsonl.gz): how many
pairs it raises, how long it takes, its precision against the hand labels, and a random sample of
the raised pairs for a person to judge.

    python benchmarks/contradictions.py [--sample 30] [--seed 5] [--unlabelled] [--json FILE]
                                        [--trigger-threshold T] [--claim-threshold C]

`quality/contradiction_labels.jsonl` holds one line per lesson pair some version of the scan raised:
`{"a", "b", "label", "reason", "raised_by"}`, label `contradiction` (the two rules cannot both be
followed), `arguable` (a rule and its exception, or opposed advice for different versions or
languages) or `not`; `raised_by` is `before` (the 90 pairs the scan raised at the default
thresholds before it read claims as it does now, every one labelled), `revision` (pairs raised at
the default thresholds while it was being revised) or `trigger 0.35` (pairs first raised with
--trigger-threshold 0.35, labelled as first seen). A raised pair with no label counts as not a
contradiction and, with --unlabelled, is printed so that it can be labelled.

The planted set (contradictions in many wordings, agreeing paraphrases, unrelated pairs, hard
negatives) is a test: `pytest -s tests/test_operations_contradiction_scan.py -k precision` prints its
precision and recall.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from collections import Counter
from pathlib import Path

from mgcp.config import DEFAULTS
from mgcp.models import Lesson
from mgcp.operations import contradiction_scan

DATA = Path(__file__).resolve().parent / "quality"
LESSONS = DATA / "lessons.jsonl.gz"
LABELS = DATA / "contradiction_labels.jsonl"
KINDS = ("contradiction", "arguable", "not")


def read_labels(path: Path) -> dict[tuple[str, str], dict]:
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {tuple(sorted((r["a"], r["b"]))): r for r in rows}


def figures(raised: list[tuple[str, str]], labels: dict[tuple[str, str], dict]) -> dict:
    """Precision of the raised pairs against the labels, and, for each group of labelled pairs (by
    `raised_by`), how many of each label are raised: [raised, labelled]."""
    said = Counter(labels[pair]["label"] if pair in labels else "unlabelled" for pair in raised)
    raised_set = set(raised)
    groups: dict[str, dict[str, list[int]]] = {}
    for pair, row in labels.items():
        count = groups.setdefault(row.get("raised_by", ""), {kind: [0, 0] for kind in KINDS})[row["label"]]
        count[0] += pair in raised_set
        count[1] += 1
    n = len(raised)
    return {
        "raised": n, "by_label": {kind: said[kind] for kind in (*KINDS, "unlabelled")},
        "precision": said["contradiction"] / n if n else None,
        "precision_with_arguable": (said["contradiction"] + said["arguable"]) / n if n else None,
        "labelled_raised": groups,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=30, help="print this many raised pairs, drawn at random")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--labels", default=str(LABELS), help="the hand labels (JSON lines)")
    parser.add_argument("--unlabelled", action="store_true", help="print every raised pair the labels lack")
    parser.add_argument("--json", help="also write the figures and every raised pair with its label here")
    parser.add_argument("--trigger-threshold", type=float, default=DEFAULTS["contradiction_scan"]["trigger_threshold"])
    parser.add_argument("--claim-threshold", type=float, default=DEFAULTS["contradiction_scan"]["claim_threshold"])
    args = parser.parse_args()
    with gzip.open(LESSONS, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    lessons = [Lesson(id=r["id"], trigger=r.get("trigger") or "", action=r.get("action") or "",
                      tags=r.get("tags") or [], created_at="2026-01-01T00:00:00+00:00",
                      last_refined="2026-01-01T00:00:00+00:00") for r in rows]
    labels = read_labels(Path(args.labels))
    t0 = time.perf_counter()
    settings = {**DEFAULTS["contradiction_scan"], "max_findings": 10**9,
                "trigger_threshold": args.trigger_threshold, "claim_threshold": args.claim_threshold}
    findings = contradiction_scan.run(lessons, settings)
    seconds = time.perf_counter() - t0
    pair_of = {id(f): tuple(sorted((f.data["older"], f.data["newer"]))) for f in findings}
    result = figures(list(pair_of.values()), labels)
    print(f"{len(lessons)} lessons (trigger threshold {args.trigger_threshold}, claim threshold "
          f"{args.claim_threshold}): {len(findings)} contradiction findings in {seconds:.1f} s")
    if labels:
        by = result["by_label"]
        print(f"raised, by label: {by['contradiction']} contradiction, {by['arguable']} arguable, "
              f"{by['not']} not, {by['unlabelled']} unlabelled")
        if findings:
            print(f"precision {result['precision']:.2f} ({result['precision_with_arguable']:.2f} counting the "
                  f"arguable ones)")
        print("labelled pairs raised, of those labelled:")
        for group, counts in result["labelled_raised"].items():
            print(f"  raised_by {group!r}: " + ", ".join(f"{kind} {a} of {b}" for kind, (a, b) in counts.items()))

    def show(finding, heading: str) -> None:
        older, newer = (finding.data["lessons"][finding.data[k]] for k in ("older", "newer"))
        print(f"\n{heading} claims overlap {finding.data['claim_overlap']}, triggers {finding.data['trigger_similarity']}")
        for key, lesson in (("older", older), ("newer", newer)):
            claim = finding.data["claims"][finding.data[key]]
            print(f"  {finding.data[key]}:", " ".join(lesson["action"].split())[:200])
            print(f"    ({'says' if claim['positive'] else 'refuses'}: {claim['clause'][:100]})")

    for n, finding in enumerate(random.Random(args.seed).sample(findings, min(args.sample, len(findings))), 1):
        label = labels.get(pair_of[id(finding)], {}).get("label", "unlabelled")
        show(finding, f"#{n} [{label}]")
    if args.unlabelled:
        for finding in findings:
            if pair_of[id(finding)] not in labels:
                show(finding, "[unlabelled]")
    if args.json:
        result["pairs"] = [{"a": a, "b": b, "label": labels.get((a, b), {}).get("label")}
                           for a, b in pair_of.values()]
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"lessons": len(lessons), "seconds": round(seconds, 2), **result}, f, indent=1)


if __name__ == "__main__":
    main()
