"""How right mgcp's duplicate findings and lesson retrieval are on real, public agent guidance.

    python benchmarks/quality.py [--lessons N] [--json FILE] [--data DIR] [--keep-db FILE] [--floor F]

Reads the evaluation set in benchmarks/quality/ (see its README.md): `lessons.jsonl.gz` (rules
converted from public rule collections and style guides), `pairs.jsonl` (hand-labelled lesson
pairs: duplicate / related / distinct) and `queries.jsonl` (task queries with the lessons judged
relevant). Loads the lessons into a fresh temporary database through the public store API, then
prints one table:

* duplicate detection: `duplicate_detection.run` on every lesson with the configured settings (and
  the configured similarity backend), except `max_findings` lifted and, for the score bands,
  `review_threshold` lowered to the floor (0.5 unless `--floor` says otherwise), so that every pair
  scoring that much is seen (a labelled pair without a finding scored below it). With the semantic
  backend, give `--floor 0.8`: at 0.5 the embeddings pair most rules of one topic, millions of pairs. Precision and recall of the label
  "duplicate" at the review threshold and at the merge threshold (both read from the config), the
  share of verbatim copies in the corpus (pairs of lessons whose actions are equal once lowercased
  with punctuation and spacing removed) scored at or above the merge threshold, the labelled pairs
  per score band, and per kind of pair.
* retrieval: precision@5 of `Store.query(text, 5)` over the queries, against the lessons listed
  as relevant in `queries.jsonl` and against the pooled judgements (those plus the lessons
  `query_pool.jsonl` judged relevant), and the share of queries with at least one listed lesson in
  the top 5.
* recall: the lessons `recall` (the configured budget) puts in the section for each query, after the
  retrieval queries ran (each of their top 5 counts as used once): how many are judged relevant
  (listed or pooled), judged not relevant (pooled), or judged by neither.
* bulk import: the findings per kind that one REM cycle with the configured settings raises on the
  freshly imported corpus (`engine.run` with staleness_scan, duplicate_detection and
  community_detection named), and how long it took.

`--lessons N` runs on a subset: every lesson named by a pair or a query, plus a seeded sample of the
others, N in all (scores move with the corpus, as TF-IDF weights do). It never touches ~/.mgcp:
MGCP_DATA_DIR points at a temporary directory from the first line. Only public calls are used
(Store.open, store.lessons.add / list, store.query, duplicate_detection.run, engine.run,
load_config), so the script keeps working when the similarity code changes.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

_TMP = tempfile.mkdtemp(prefix="mgcp-quality-")
os.environ["MGCP_DATA_DIR"] = _TMP          # before anything of mgcp is imported or run
os.environ.pop("MGCP_DB", None)

import argparse  # noqa: E402
import gzip  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mgcp import engine  # noqa: E402
from mgcp.config import load_config  # noqa: E402
from mgcp import operations as mgcp_operations  # noqa: E402
from mgcp.operations import duplicate_detection  # noqa: E402
from mgcp.operations.shared import CycleCache  # noqa: E402
from mgcp.persistence.store import Store  # noqa: E402

DATA = Path(__file__).resolve().parent / "quality"
FLOOR = 0.5                     # the lowest score looked at; a pair without a finding is below it
BULK_PROJECT = "/quality/bulk"
BULK_OPERATIONS = ["duplicate_detection", "community_detection", "staleness_scan"]
LABELS = ("duplicate", "related", "distinct")
SEED = 20240601


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def normalised(text: str) -> str:
    """Lowercased, punctuation and spacing removed: what counts as a verbatim copy."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def choose(lessons: list[dict], pairs: list[dict], queries: list[dict], n: int | None) -> list[dict]:
    """All lessons, or N of them: every lesson a pair or a query names, then a seeded sample."""
    if n is None or n >= len(lessons):
        return lessons
    needed = {p["a"] for p in pairs} | {p["b"] for p in pairs}
    needed |= {i for q in queries for i in q["relevant"]}
    if n < len(needed):
        raise SystemExit(f"--lessons {n} is too few: the pairs and queries name {len(needed)} lessons")
    others = [lesson["id"] for lesson in lessons if lesson["id"] not in needed]
    keep = needed | set(random.Random(SEED).sample(others, n - len(needed)))
    return [lesson for lesson in lessons if lesson["id"] in keep]


async def load(store: Store, lessons: list[dict]) -> float:
    t0 = time.perf_counter()
    async with store.transaction():     # one transaction: each add is a savepoint inside it
        for k, lesson in enumerate(lessons, 1):
            await store.lessons.add(lesson["id"], lesson["trigger"], lesson["action"], lesson["rationale"],
                                    lesson["tags"])
            if k % 5000 == 0:
                log(f"  loaded {k}/{len(lessons)}")
    return time.perf_counter() - t0


def band_of(score: float | None, bands: list[tuple[str, float]]) -> str:
    for name, low in bands:
        if score is not None and score >= low:
            return name
    return bands[-1][0]


def pr(pairs: list[dict], scores: dict, threshold: float) -> dict:
    tp = sum(1 for p in pairs if p["label"] == "duplicate" and scores[p["key"]] >= threshold)
    fp = sum(1 for p in pairs if p["label"] != "duplicate" and scores[p["key"]] >= threshold)
    positives = sum(1 for p in pairs if p["label"] == "duplicate")
    return {"threshold": threshold, "tp": tp, "fp": fp, "positives": positives,
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / positives if positives else None}


def semantic_model(config):
    """The model2vec model the config's `similarity` setting names, or None for the lexical backend
    (what a REM cycle with this config would compare texts with)."""
    if config.similarity["backend"] != "semantic":
        return None
    from mgcp.operations import semantic

    return semantic.load_model(config.similarity["model"])


def duplicates_report(lessons_in_db, corpus: list[dict], pairs: list[dict], config, floor: float) -> dict:
    settings = dict(config.operation("duplicate_detection"))
    review_at, merge_at = float(settings["review_threshold"]), float(settings["merge_threshold"])
    settings["max_findings"] = 10**9

    model = semantic_model(config)

    def pair_findings(settings) -> dict:
        cache = CycleCache()  # the backend and the run share it, as in a REM cycle
        backend = None
        if model is not None:
            from mgcp.operations.semantic import SemanticBackend

            backend = SemanticBackend(model, cache)
        findings = duplicate_detection.run(lessons_in_db, settings, backend, cache)
        return {frozenset((f.data["canonical"], f.data["other"])): float(f.data["similarity"])
                for f in findings if "canonical" in f.data and "other" in f.data}   # pair findings only

    # Precision and recall come from the run as configured (what a user gets: no pair scoring under
    # the review threshold is ever searched for); the bands from a second run searching down to `floor`.
    t0 = time.perf_counter()
    live = pair_findings(settings)
    seconds = time.perf_counter() - t0
    found = pair_findings({**settings, "review_threshold": min(floor, review_at)})

    # mgcp asks about a rule copied into several places once per copy: each copy is paired with the
    # first of its group (by id), and only that first one with other lessons. A pair is scored as
    # the reviewer meets it: two copies of one group by their copy finding, any other lesson of a
    # group through the group's first. (Before copies were grouped, `copies` does not exist: then
    # every lesson stands for itself.)
    group = getattr(mgcp_operations, "copies", lambda lessons: {})(lessons_in_db)
    first: dict = {}
    for lesson_id in sorted(group):
        first.setdefault(group[lesson_id], lesson_id)

    def stand_in(lesson_id: str) -> str:
        return first[group[lesson_id]] if lesson_id in group else lesson_id

    def score(a: str, b: str, found: dict) -> float:
        if a in group and group[a] == group.get(b):  # two copies: each was paired with the first
            a, b = (a, first[group[a]]) if a != first[group[a]] else (b, a)
            return found.get(frozenset((a, b)), 0.0)
        return found.get(frozenset((stand_in(a), stand_in(b))), 0.0)   # 0.0: below the floor

    scores, live_scores = {}, {}
    for p in pairs:
        p["key"] = (p["a"], p["b"])
        scores[p["key"]] = score(p["a"], p["b"], found)
        live_scores[p["key"]] = score(p["a"], p["b"], live)
    low = min(floor, review_at)
    cuts = sorted({merge_at, review_at, 0.70, low}, reverse=True)
    cuts = [c for c in cuts if c >= low]
    bands = [(f">={cuts[0]:.2f}", cuts[0])]
    bands += [(f"{lo:.2f}-{hi:.2f}", lo) for hi, lo in zip(cuts, cuts[1:])]
    bands.append((f"<{low:.2f}", -1.0))
    per_band = {name: Counter() for name, _ in bands}
    for p in pairs:
        per_band[band_of(scores[p["key"]] if scores[p["key"]] >= low else None, bands)][p["label"]] += 1
    per_kind = defaultdict(lambda: {"n": 0, "labels": Counter(), "review": 0, "merge": 0})
    for p in pairs:
        k = per_kind[p["kind"]]
        k["n"] += 1
        k["labels"][p["label"]] += 1
        k["review"] += live_scores[p["key"]] >= review_at
        k["merge"] += live_scores[p["key"]] >= merge_at
    # verbatim copies over the whole corpus
    groups = defaultdict(list)
    for lesson in corpus:
        groups[normalised(lesson["action"])].append(lesson["id"])
    verbatim = [(ids[i], ids[j]) for ids in groups.values() if len(ids) > 1
                for i in range(len(ids)) for j in range(i + 1, len(ids))]
    verbatim_merge = sum(1 for a, b in verbatim if score(a, b, live) >= merge_at)
    verbatim_review = sum(1 for a, b in verbatim if score(a, b, live) >= review_at)
    labelled_verbatim = [p for p in pairs if normalised(p["action_a"]) == normalised(p["action_b"])]
    return {
        "review_threshold": review_at, "merge_threshold": merge_at, "seconds": round(seconds, 1),
        "pairs_at_or_above_floor": len(found),
        "corpus_pairs_review": sum(1 for s in live.values() if s >= review_at),
        "corpus_pairs_merge": sum(1 for s in live.values() if s >= merge_at),
        "at_review": pr(pairs, live_scores, review_at), "at_merge": pr(pairs, live_scores, merge_at),
        "verbatim": {"pairs": len(verbatim), "at_merge": verbatim_merge, "at_review": verbatim_review,
                     "labelled": len(labelled_verbatim),
                     "labelled_at_merge": sum(1 for p in labelled_verbatim if live_scores[p["key"]] >= merge_at)},
        "bands": [{"band": name, **{label: per_band[name][label] for label in LABELS}} for name, _ in bands],
        "kinds": [{"kind": kind, "n": v["n"], **{label: v["labels"][label] for label in LABELS},
                   "at_review": v["review"], "at_merge": v["merge"]}
                  for kind, v in sorted(per_kind.items())],
        "pair_scores": [{"a": p["a"], "b": p["b"], "label": p["label"], "kind": p["kind"],
                         "score": scores[p["key"]] if scores[p["key"]] >= low else None} for p in pairs],
    }


def judgements(pool: list[dict]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """For each query, the lessons `query_pool.jsonl` judged, and those it judged relevant."""
    judged: dict[str, set[str]] = defaultdict(set)
    pooled: dict[str, set[str]] = defaultdict(set)
    for row in pool:
        judged[row["query"]].add(row["id"])
        if row["relevant"]:
            pooled[row["query"]].add(row["id"])
    return judged, pooled


async def recall_report(store: Store, config, queries: list[dict], pool: list[dict]) -> dict:
    """The lessons of each query's recall section, judged as the retrieval figures judge them."""
    from mgcp.engine.recall import recall

    judged, pooled = judgements(pool)
    shown = relevant = judged_not = 0
    for q in queries:
        ids = (await recall(store, config, None, q["query"])).lessons
        good = set(q["relevant"]) | pooled[q["query"]]
        shown += len(ids)
        relevant += sum(1 for i in ids if i in good)
        judged_not += sum(1 for i in ids if i not in good and i in judged[q["query"]])
    return {"queries": len(queries), "budget": config.recall["budget"], "shown": shown, "relevant": relevant,
            "judged_not": judged_not, "unjudged": shown - relevant - judged_not,
            "precision": relevant / shown if shown else None,
            "precision_judged": relevant / (relevant + judged_not) if relevant + judged_not else None}


async def retrieval_report(store: Store, queries: list[dict], pool: list[dict]) -> dict:
    """Precision@5 against the listed judgements (`queries.jsonl`) and against the pooled ones (the
    listed plus those `query_pool.jsonl` judged relevant); a top-5 lesson judged by neither counts as
    not relevant, and how many there were is reported."""
    judged, pooled = judgements(pool)
    rows = []
    for q in queries:
        results = await store.query(q["query"], 5)
        top = [lesson.id for lesson, _ in results]
        listed = set(q["relevant"])
        relevant = listed | pooled[q["query"]]
        rows.append({"query": q["query"], "top5": top, "hits": sum(1 for i in top if i in listed),
                     "hits_pooled": sum(1 for i in top if i in relevant),
                     "unjudged": sum(1 for i in top if i not in relevant and i not in judged[q["query"]]),
                     "relevant": len(listed), "relevant_pooled": len(relevant)})
    n = len(rows)
    return {"queries": n, "precision_at_5": sum(r["hits"] for r in rows) / (5 * n) if n else None,
            "precision_at_5_pooled": sum(r["hits_pooled"] for r in rows) / (5 * n) if n and pool else None,
            "unjudged_at_5": sum(r["unjudged"] for r in rows),
            "any_relevant_at_5": sum(1 for r in rows if r["hits"]) / n if n else None,
            "recall_at_5": (sum(r["hits"] / min(5, r["relevant"]) for r in rows if r["relevant"]) / n) if n else None,
            "rows": rows}


async def bulk_report(store: Store, config) -> dict:
    t0 = time.perf_counter()
    run = await engine.run(store, config, BULK_PROJECT, BULK_OPERATIONS)
    seconds = time.perf_counter() - t0
    report = run.report
    kinds = Counter(f.kind for f in report.findings)
    return {"seconds": round(seconds, 1), "findings": len(report.findings), "by_kind": dict(sorted(kinds.items())),
            "operations": [{"operation": o.operation, "findings": o.findings, "ms": o.duration_ms,
                            "error": o.error} for o in report.operations]}


def fmt(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table(result: dict) -> str:
    d, r, b = result["duplicates"], result["retrieval"], result["bulk"]
    lines = [f"mgcp quality: {result['lessons']} lessons, {result['pairs']} labelled pairs, "
             f"{result['queries']} queries (config: {result['config']})", ""]
    lines += ["| figure | value |", "|---|---|"]
    for key, name in (("at_review", "review"), ("at_merge", "merge")):
        m = d[key]
        lines.append(f"| duplicate precision at {name} threshold ({m['threshold']:.2f}) | {fmt(m['precision'])} "
                     f"({m['tp']} of {m['tp'] + m['fp']} flagged labelled pairs) |")
        lines.append(f"| duplicate recall at {name} threshold ({m['threshold']:.2f}) | {fmt(m['recall'])} "
                     f"({m['tp']} of {m['positives']} labelled duplicates) |")
    v = d["verbatim"]
    share = v["at_merge"] / v["pairs"] if v["pairs"] else None
    lines.append(f"| verbatim copies (normalised-equal actions) scored >= {d['merge_threshold']:.2f} | {fmt(share)} "
                 f"({v['at_merge']} of {v['pairs']} corpus pairs; labelled: {v['labelled_at_merge']} of {v['labelled']}) |")
    lines.append(f"| corpus pairs scored >= {d['review_threshold']:.2f} / >= {d['merge_threshold']:.2f} | "
                 f"{d['corpus_pairs_review']} / {d['corpus_pairs_merge']} |")
    lines.append(f"| duplicate_detection time (as configured) | {d['seconds']:.1f} s |")
    lines.append(f"| retrieval precision@5, listed judgements | {fmt(r['precision_at_5'])} ({r['queries']} queries) |")
    lines.append(f"| retrieval precision@5, pooled judgements | {fmt(r['precision_at_5_pooled'])} "
                 f"({r['unjudged_at_5']} top-5 lessons judged by neither) |")
    lines.append(f"| retrieval: queries with a relevant lesson in the top 5 | {fmt(r['any_relevant_at_5'])} |")
    lines.append(f"| retrieval recall@5 (of min(5, relevant)) | {fmt(r['recall_at_5'])} |")
    c = result["recall"]
    lines.append(f"| recall (budget {c['budget']:,}): lessons shown, judged relevant | {c['shown']}, {c['relevant']} "
                 f"({fmt(c['precision'])}; {c['judged_not']} judged not relevant, {c['unjudged']} by neither) |")
    kinds = ", ".join(f"{k} {n}" for k, n in b["by_kind"].items()) or "none"
    lines.append(f"| bulk import REM cycle: findings by kind | {kinds} |")
    lines.append(f"| bulk import REM cycle: time | {b['seconds']:.1f} s |")
    errors = [f"{o['operation']}: {o['error']}" for o in b["operations"] if o["error"]]
    if errors:
        lines.append(f"| bulk import REM cycle: errors | {'; '.join(errors)} |")
    lines += ["", "Labelled pairs per score band:", "",
              "| score band | duplicate | related | distinct |", "|---|---|---|---|"]
    for row in d["bands"]:
        lines.append(f"| {row['band']} | {row['duplicate']} | {row['related']} | {row['distinct']} |")
    lines += ["", "Labelled pairs per kind:", "",
              f"| kind | pairs | duplicate | related | distinct | >= {d['review_threshold']:.2f} | "
              f">= {d['merge_threshold']:.2f} |", "|---|---|---|---|---|---|---|"]
    for row in d["kinds"]:
        lines.append(f"| {row['kind']} | {row['n']} | {row['duplicate']} | {row['related']} | {row['distinct']} "
                     f"| {row['at_review']} | {row['at_merge']} |")
    lines.append("")
    lines.append(f"load {result['load_seconds']:.1f} s; total {result['seconds']:.1f} s")
    return "\n".join(lines)


async def main_async(args) -> dict:
    t_start = time.perf_counter()
    data = Path(args.data)
    corpus = read_jsonl(data / "lessons.jsonl.gz")
    pairs = read_jsonl(data / "pairs.jsonl")
    queries = read_jsonl(data / "queries.jsonl")
    pool = read_jsonl(data / "query_pool.jsonl") if (data / "query_pool.jsonl").exists() else []
    lessons = choose(corpus, pairs, queries, args.lessons)
    by_id = {lesson["id"]: lesson for lesson in lessons}
    missing = sorted({i for p in pairs for i in (p["a"], p["b"])} - set(by_id))
    if missing:
        raise SystemExit(f"pairs.jsonl names lessons that lessons.jsonl.gz lacks: {missing[:5]}")
    for p in pairs:
        p["action_a"], p["action_b"] = by_id[p["a"]]["action"], by_id[p["b"]]["action"]
    config = load_config()
    db = Path(args.keep_db) if args.keep_db else Path(_TMP) / "quality.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    async with Store.open(db) as store:
        log(f"loading {len(lessons)} lessons into {db} ...")
        load_seconds = await load(store, lessons)
        active = await store.lessons.list()
        log(f"duplicate detection on {len(active)} lessons (every pair >= {args.floor}) ...")
        dup = duplicates_report(active, lessons, pairs, config, args.floor)
        del active
        log("bulk import REM cycle ...")
        bulk = await bulk_report(store, config)
        log("retrieval ...")
        retrieval = await retrieval_report(store, queries, pool)
        log("recall ...")
        recalled = await recall_report(store, config, queries, pool)
    return {"lessons": len(lessons), "pairs": len(pairs), "queries": len(queries),
            "config": config.source or "defaults", "load_seconds": round(load_seconds, 1),
            "duplicates": dup, "retrieval": retrieval, "recall": recalled, "bulk": bulk,
            "seconds": round(time.perf_counter() - t_start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mgcp duplicate-detection and retrieval quality on public guidance")
    parser.add_argument("--lessons", type=int, help="run on N lessons (those the pairs and queries name, plus a sample)")
    parser.add_argument("--json", help="also write every figure (and each pair's score, each query's top 5) here")
    parser.add_argument("--data", default=str(DATA), help="folder holding lessons.jsonl.gz, pairs.jsonl, queries.jsonl")
    parser.add_argument("--keep-db", help="build the database at this path and keep it (default: a temporary file)")
    parser.add_argument("--floor", type=float, default=FLOOR,
                        help=f"the lowest score the bands look at (default {FLOOR}; 0.8 with the semantic backend)")
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(main_async(args))
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)
    print(table(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
