#!/usr/bin/env python3
"""The mgcp benchmark: one entry point, one table (and a JSON file).

    python benchmarks/run.py --sizes small                 # 1k lessons / 10k history rows, < 1 min
    python benchmarks/run.py --sizes small,medium,large    # + 10k/100k and 100k/1M
    python benchmarks/run.py --sizes medium --only rem,dup --repeat 5 --out /tmp/r.json

Every figure is the median of several runs (`--repeat`). Heavy steps (building the data, the REM
cycle, duplicate/theme quality, migration, latency loops) run in a child process - this same file
with `--worker NAME` - which reports its own peak RSS (`resource.getrusage(RUSAGE_SELF).ru_maxrss`)
and, for the REM cycle, the RSS it had before loading any data. Process start-up figures (hook,
floor, CLI) are wall times of subprocesses run with the same interpreter. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import importlib.util
import json
import math
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402
from mgcp.persistence.dump import CACHES  # noqa: E402

SIZES = {"small": (1_000, 10_000), "medium": (10_000, 100_000), "large": (100_000, 1_000_000)}
FIGURES = ["build", "migrate", "query", "refine", "save", "cli", "hook", "rem", "repeat", "dup", "theme",
           "bootstrap"]
OPERATIONS = ["staleness_scan", "duplicate_detection", "community_detection", "knowledge_extraction",
              "context_summary", "pattern_reinforcement", "contradiction_scan"]
DEFAULT_OPERATIONS = [op for op in OPERATIONS if op != "pattern_reinforcement"]  # what a cycle runs by default
HOOK = REPO / "hooks" / "rem-cycle-trigger.py"
# The real lesson corpus beside the project (skipped when absent); MGCP_BOOTSTRAP points elsewhere.
BOOTSTRAP = Path(os.environ.get("MGCP_BOOTSTRAP") or REPO.parent / "shared" / "corpus" / "mgcp-bootstrap")
MIB = 1024  # ru_maxrss is KiB on Linux


def schema_key() -> str:
    """A digest of the migrations: cached databases are rebuilt when the schema changes."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((REPO / "migrations").glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:8]


def peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MIB, 1)


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def op_available(name: str) -> bool:
    try:
        return importlib.util.find_spec(f"mgcp.operations.{name}") is not None
    except Exception:
        return False


# =================================================================================================
# workers (run in a child process: `run.py --worker NAME --db PATH ...`)

def w_build(a) -> dict:
    t0 = time.perf_counter()
    labels = synth.build_db(a.db, a.lessons, a.history, a.seed)
    return {"seconds": time.perf_counter() - t0, "main_sessions": labels["main_sessions"],
            "bytes": os.path.getsize(a.db), "peak_mib": peak_mib()}


def w_legacy_build(a) -> dict:
    t0 = time.perf_counter()
    info = synth.build_legacy_db(a.db, a.lessons, a.seed)
    Path(a.db + ".expect.json").write_text(json.dumps(info))
    return {"seconds": time.perf_counter() - t0, **info, "peak_mib": peak_mib()}


def w_migrate(a) -> dict:
    """Migrate a copy of the legacy database, then re-run the migration on the result."""
    t0 = time.perf_counter()
    from mgcp.persistence.migrate import open_and_migrate, status

    first = open_and_migrate(a.db)
    t1 = time.perf_counter()
    again = open_and_migrate(a.db)
    t2 = time.perf_counter()
    conn = sqlite3.connect(a.db)
    versions = conn.execute("SELECT count(*) FROM lesson_versions").fetchone()[0]
    history = conn.execute("SELECT count(*) FROM context_history").fetchone()[0]
    conn.close()
    st = status(a.db)
    return {"seconds": t1 - t0, "rerun_seconds": t2 - t1, "applied": first.applied,
            "failures": first.failures, "rerun_applied": again.applied, "pending": st["pending"],
            "lesson_versions": versions, "context_history": history, "peak_mib": peak_mib()}


REM_TABLES = ["rem_actions", "rem_findings", "rem_runs", "rem_state", "community_runs",
              "context_summaries", "community_summaries", "reinforced_patterns", *sorted(CACHES)]


def rem_config(louvain: str):
    """The default REM configuration, with community detection's Louvain set to `louvain`."""
    from mgcp.config import DEFAULTS, RemConfig

    defaults = copy.deepcopy(DEFAULTS)
    defaults["community_detection"]["louvain"] = louvain
    return RemConfig(defaults)


def louvain_of(choice: str) -> str:
    """The Louvain implementation `choice` runs ("auto": igraph when installed)."""
    from mgcp.operations.community_detection import louvain

    return louvain({"louvain": choice})


def w_rem(a) -> dict:
    """The full cycle via run_cycle, every operation named (pattern_reinforcement too, which is off
    by default), on a fresh REM state."""
    conn = sqlite3.connect(a.db)
    for table in REM_TABLES:
        conn.execute(f"DELETE FROM {table}")
    conn.commit()
    conn.close()
    from mgcp.engine.cycle import run_cycle
    from mgcp.persistence.store import Store

    base = peak_mib()

    async def main():
        async with Store.open(a.db) as store:
            t0 = time.perf_counter()
            report = await run_cycle(store, rem_config(a.louvain), a.project,
                                     operations=a.what or list(OPERATIONS))
            return report, time.perf_counter() - t0

    report, wall = asyncio.run(main())
    ops = {r.operation: {"ms": r.duration_ms, "findings": r.findings, "error": r.error}
           for r in report.operations}
    return {"seconds": wall, "cycle_ms": report.duration_ms, "operations": ops,
            "findings": len(report.findings), "base_mib": base, "peak_mib": peak_mib(),
            "louvain": louvain_of(a.louvain)}


def w_repeat(a) -> dict:
    """A full cycle on a fresh REM state, the same cycle again with nothing changed, then again
    after 1% of the lessons changed (a third each refined, added, archived) and 1% more history
    (context saves in new sessions of the main project): the three cycle times and their ops."""
    from mgcp.engine.cycle import run_cycle
    from mgcp.models import LessonStatus
    from mgcp.persistence.store import Store

    conn = sqlite3.connect(a.db)
    for table in REM_TABLES:
        conn.execute(f"DELETE FROM {table}")
    conn.commit()
    conn.close()
    rng = random.Random(a.seed)
    config = rem_config(a.louvain)

    async def cycle(store):
        report = await run_cycle(store, config, a.project, operations=a.what or list(OPERATIONS))
        return {"ms": report.duration_ms, "findings": len(report.findings),
                "operations": {r.operation: {"ms": r.duration_ms, "skipped": bool(r.summary.get("skipped")),
                                             "error": r.error} for r in report.operations}}

    async def change(store):
        ids = [r[0] for r in await store.db.fetchall("SELECT id FROM lessons ORDER BY id")]
        third = max(1, len(ids) // 300)
        picked = rng.sample(ids, 2 * third)
        for lid in picked[:third]:
            lesson = await store.lessons.get(lid)
            await store.lessons.refine(lid, "benchmark change", action=lesson.action + " Check it twice.")
        for lid in picked[third:]:
            await store.lessons.set_lifecycle(lid, LessonStatus.archived, "benchmark change")
        for i, lid in enumerate(rng.sample(ids, third)):
            lesson = await store.lessons.get(lid)
            await store.lessons.add(f"bench-new-{i:05d}", lesson.trigger + " again", "Prefer " + lesson.action)
        words = [w for r in await store.db.fetchall("SELECT trigger FROM lessons LIMIT 200") for w in r[0].split()]
        rows = await store.count("context_history")
        for i in range(max(1, rows // 100)):
            if i % 3 == 0:
                await store.context.register_session(a.project, f"bench-repeat-{i}")
            await store.context.save(a.project, notes=f"Repeat save {i}: {' '.join(rng.sample(words, 6))}",
                                     active_files=[f"src/repeat_{i % 5}.py"])
        return {"refined": third, "archived": third, "added": third, "history_rows": max(1, rows // 100)}

    fresh = Path(a.db).with_suffix(".fresh.db")  # the changed state again, for `mgcp rem run`

    async def main():
        async with Store.open(a.db) as store:
            full = await cycle(store)
            same = await cycle(store)
            changed = await change(store)
            await store.db.fetchone("PRAGMA wal_checkpoint(TRUNCATE)")  # all of it in the file
            shutil.copyfile(a.db, fresh)
            after = await cycle(store)
        return {"full": full, "same": same, "changed": changed, "after": after}

    out = asyncio.run(main())
    try:
        out["after_cli"] = rem_run_fresh(fresh, a)
    finally:
        fresh.unlink(missing_ok=True)
    out["peak_mib"] = peak_mib()
    out["louvain"] = louvain_of(a.louvain)
    return out


def rem_run_fresh(db: Path, a) -> dict:
    """The repeat cycle as a person or CI runs it: `mgcp rem run` in a new process (imports and
    the first models' set-up included), the same operations named, timed from outside."""
    import yaml

    config = db.with_suffix(".yaml")
    config.write_text(yaml.safe_dump({"rem": {"community_detection": {"louvain": a.louvain}}}))
    cmd = [sys.executable, "-m", "mgcp", "rem", "run", "--db", str(db), "--config", str(config),
           "--project", a.project, "--json"]
    for op in a.what or OPERATIONS:
        cmd += ["--op", op]
    try:
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
    finally:
        config.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise RuntimeError(f"mgcp rem run failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return {"ms": wall * 1000}


def w_quality(a) -> dict:
    """Duplicate precision/recall and theme recall against the planted labels (all findings:
    max_findings lifted so the cap does not hide anything)."""
    from mgcp.config import DEFAULTS
    from mgcp.operations import duplicate_detection, lesson_text
    from mgcp.persistence.store import Store
    from mgcp import text

    labels = json.loads(Path(a.labels).read_text())
    out: dict = {}

    async def load():
        async with Store.open(a.db) as store:
            lessons = await store.lessons.list()
            project = await store.context.get_project(a.project)
            history = await store.context.history_since(project.project_id, -1)
            return lessons, history

    lessons, history = asyncio.run(load())
    if "dup" in a.what:
        settings = {**copy.deepcopy(DEFAULTS["duplicate_detection"]), "max_findings": 10**9}
        t0 = time.perf_counter()
        findings = duplicate_detection.run(lessons, settings)
        secs = time.perf_counter() - t0
        found = {frozenset((f.data["canonical"], f.data["other"])) for f in findings
                 if f.kind in ("duplicate_merge", "duplicate_review")}
        planted = {frozenset(p) for p in labels["duplicate_pairs"]}
        mates = {frozenset(p) for p in labels["topic_mate_pairs"]}
        tp = len(found & planted)
        # how hard the planted pairs are: their score in this corpus (0 below the candidate floor)
        from mgcp.operations.similarity import LexicalBackend, dot
        if hasattr(duplicate_detection, "score_pairs"):
            scores = duplicate_detection.score_pairs(lessons, settings, LexicalBackend())

            def pair_score(x, y):
                found_score = scores.get((min(x, y), max(x, y)))
                return found_score.value if found_score else 0.0
        else:  # the code before pairs were scored on their actions
            vecs = LexicalBackend().vectors({l.id: lesson_text(l) for l in lessons})

            def pair_score(x, y):
                return dot(vecs[x], vecs[y])
        sims = sorted(pair_score(a_, b_) for a_, b_ in labels["duplicate_pairs"])
        mate_sims = sorted(pair_score(a_, b_) for a_, b_ in labels["topic_mate_pairs"])
        out["dup"] = {
            "seconds": secs, "findings": len(found), "planted": len(planted), "true_positives": tp,
            "precision": tp / len(found) if found else 0.0, "recall": tp / len(planted),
            "topic_mates_flagged": len(found & mates),
            "planted_similarity": {"min": sims[0], "p10": pct(sims, 10), "median": statistics.median(sims)},
            "topic_mate_similarity": {"median": statistics.median(mate_sims), "max": mate_sims[-1]},
            "planted_below_0_80": sum(s < 0.80 for s in sims),
        }
    if "theme" in a.what:
        if not op_available("knowledge_extraction"):
            out["theme"] = {"na": "mgcp.operations.knowledge_extraction not present"}
        else:
            from mgcp.operations import knowledge_extraction
            settings = {**copy.deepcopy(DEFAULTS["knowledge_extraction"]), "max_findings": 10**9}
            t0 = time.perf_counter()
            findings = knowledge_extraction.run(history, lessons, settings)
            secs = time.perf_counter() - t0
            themes = [str(f.data.get("theme", "")) for f in findings if f.kind == "theme"]
            theme_stems = [set(text.content_tokens(t)) for t in themes]
            hit = 0
            for planted in labels["themes"]:
                words = set(text.content_tokens(planted["theme"]))
                if any(words & ts for ts in theme_stems):
                    hit += 1
            oneoff = set(text.content_tokens(" ".join(labels["one_off_words"])))
            oneoff_reported = sum(1 for ts in theme_stems if ts & oneoff)
            todo_blob = [json.dumps(f.data) + f.title for f in findings if "todo" in f.kind]
            todo_hit = sum(1 for t in labels["stale_todos"] if any(t["todo"] in b for b in todo_blob))
            out["theme"] = {"seconds": secs, "snapshots": len(history), "theme_findings": len(themes),
                            "planted": len(labels["themes"]), "found": hit,
                            "recall": hit / len(labels["themes"]),
                            "one_off_reported_as_theme": oneoff_reported,
                            "stale_todos_planted": len(labels["stale_todos"]),
                            "stale_todos_found": todo_hit,
                            "findings_by_kind": _kinds(findings)}
    out["peak_mib"] = peak_mib()
    return out


def _kinds(findings) -> dict:
    kinds: dict[str, int] = {}
    for f in findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    return kinds


def w_latency(a) -> dict:
    """In-process latency of query_lessons, refine_lesson and save_context: `runs` runs of `n`
    calls each (after a warm-up); per run p50 and p99."""
    from mgcp.persistence.store import Store

    rng = random.Random(a.seed)
    labels = json.loads(Path(a.labels).read_text())
    words = labels["topic_words"]

    async def main():
        result = {}
        async with Store.open(a.db) as store:
            ids = [r[0] for r in await store.db.fetchall("SELECT id FROM lessons ORDER BY id")]
            for what in a.what:
                runs = []
                for run in range(a.runs + 1):  # run 0 is the warm-up
                    times = []
                    for i in range(a.n if run else 10):
                        if what == "query":
                            q = " ".join(rng.sample(words, 3))
                            t0 = time.perf_counter()
                            await store.lessons.query(q, project_id=None)
                        elif what == "refine":
                            lid = rng.choice(ids)
                            lesson = await store.lessons.get(lid)
                            t0 = time.perf_counter()
                            await store.lessons.refine(lid, f"benchmark refinement {run}.{i}",
                                                      action=lesson.action + f" Bench {run}.{i}.")
                        else:
                            t0 = time.perf_counter()
                            await store.context.save(
                                a.project, notes=f"Benchmark save {run}.{i}: {' '.join(rng.sample(words, 6))}",
                                active_files=[f"src/bench_{i % 7}.py"],
                                decisions=[f"bench decision {run}.{i}"] if i % 5 == 0 else None)
                        times.append((time.perf_counter() - t0) * 1000)
                    if run:
                        runs.append({"p50": statistics.median(times), "p99": pct(times, 99), "n": len(times)})
                result[what] = {"p50_ms": statistics.median(r["p50"] for r in runs),
                                "p99_ms": statistics.median(r["p99"] for r in runs), "runs": runs}
        return result

    out = asyncio.run(main())
    out["peak_mib"] = peak_mib()
    return out


def w_bootstrap(a) -> dict:
    """Duplicate and community detection on the mgcp-bootstrap corpus (YAML lessons + relationships)."""
    import yaml
    from mgcp.config import DEFAULTS
    from mgcp.models import Lesson, Relationship

    root = Path(a.db)
    raw, rels = [], []
    for f in sorted(root.rglob("*.yaml")):
        doc = yaml.safe_load(f.read_text()) or {}
        if isinstance(doc, dict):
            raw += [x for x in doc.get("lessons") or [] if isinstance(x, dict) and "id" in x]
            rels += [x for x in doc.get("relationships") or [] if isinstance(x, dict)]
    now = datetime.now(timezone.utc).isoformat()
    by_id: dict[str, dict] = {}
    for x in raw:
        by_id.setdefault(x["id"], x)
    links: dict[str, list[Relationship]] = {i: [] for i in by_id}
    for r in rels:
        s, t = r.get("source"), r.get("target")
        if s in by_id and t in by_id and s != t:
            ctx = r.get("context")
            ctx = ctx if isinstance(ctx, list) else [str(ctx)] if ctx else []
            for x, y in ((s, t), (t, s)):
                if not any(rel.target == y for rel in links[x]):
                    links[x].append(Relationship(target=y, type=r.get("type", "related"), context=ctx))
    lessons = [Lesson(id=i, trigger=str(x.get("trigger", "")), action=str(x.get("action", "")),
                      rationale=x.get("rationale"), tags=[str(t) for t in x.get("tags") or []],
                      created_at=now, last_refined=now, relationships=links[i])
               for i, x in by_id.items()]
    out = {"lessons": len(lessons), "relationships": sum(len(v) for v in links.values()) // 2}
    for op in ("duplicate_detection", "community_detection"):
        if not op_available(op):
            out[op] = {"na": f"mgcp.operations.{op} not present"}
            continue
        module = importlib.import_module(f"mgcp.operations.{op}")
        settings = {**copy.deepcopy(DEFAULTS[op]), "max_findings": 10**9}
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            result = module.run(lessons, settings) if op == "duplicate_detection" else module.run(lessons, None, settings)
            times.append(time.perf_counter() - t0)
        findings = result if op == "duplicate_detection" else result.findings
        info = {"seconds": statistics.median(times), "findings": len(findings), "by_kind": _kinds(findings)}
        if op == "community_detection":
            info["communities"] = len(result.communities)
            info["modularity"] = round(result.modularity, 4)
        else:
            info["pairs"] = [[f.data["canonical"], f.data["other"], f.data["similarity"]] for f in findings][:20]
        out[op] = info
    out["peak_mib"] = peak_mib()
    return out


WORKERS = {"build": w_build, "legacy_build": w_legacy_build, "migrate": w_migrate, "rem": w_rem,
           "repeat": w_repeat, "quality": w_quality, "latency": w_latency, "bootstrap": w_bootstrap}


def worker_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--db")
    p.add_argument("--labels")
    p.add_argument("--project", default=synth.MAIN_PROJECT)
    p.add_argument("--lessons", type=int, default=0)
    p.add_argument("--history", type=int, default=0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--what", default="")
    p.add_argument("--louvain", default="auto")
    a = p.parse_args(argv)
    a.what = [w for w in a.what.split(",") if w]
    result = WORKERS[a.worker](a)
    sys.stdout.write("RESULT " + json.dumps(result, default=str) + "\n")


def run_worker(name: str, env: dict | None = None, **kw) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name]
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"worker {name} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")


# =================================================================================================
# the parent: figures and the table

class Bench:
    def __init__(self, args):
        self.args = args
        self.rows: list[dict] = []
        self.details: dict = {}
        self.cache = Path(args.workdir)
        self.cache.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        self.datadir = Path(tempfile.mkdtemp(prefix="mgcp-bench-"))
        self.env["MGCP_DATA_DIR"] = str(self.datadir)
        self.env.pop("MGCP_DB", None)
        self.env.pop("MGCP_REM_CONFIG", None)

    def log(self, msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def add(self, figure, size, value, unit="", target=None, met=None, applies=True, peak=None,
            note="", target_value=None, better="lower"):
        self.rows.append({"figure": figure, "size": size, "value": value, "unit": unit,
                          "target": target, "met": met, "applies": applies, "peak_mib": peak,
                          "note": note, "target_value": target_value, "better": better})

    def want(self, name: str) -> bool:
        return not self.args.only or name in self.args.only

    # -- databases ---------------------------------------------------------------------------------

    def pristine(self, size: str) -> tuple[Path, dict]:
        lessons, history = SIZES[size]
        path = self.cache / f"{size}-{lessons}-{history}-s{self.args.seed}-v{synth.SYNTH_VERSION}-{schema_key()}.db"
        labels = Path(str(path) + ".labels.json")
        if self.args.fresh or not path.exists() or not labels.exists():
            self.log(f"building {size} database ({lessons} lessons, {history} history rows) ...")
            r = run_worker("build", db=path, lessons=lessons, history=history, seed=self.args.seed)
            self.add("synthetic build (bulk insert)", size, round(r["seconds"], 1), "s", peak=r["peak_mib"],
                     note=f"{r['bytes'] / 2**20:.0f} MiB file")
        return path, json.loads(labels.read_text())

    def working_copy(self, src: Path, name: str) -> Path:
        dst = self.cache / name
        for suffix in ("", "-wal", "-shm"):
            Path(str(dst) + suffix).unlink(missing_ok=True)
        shutil.copyfile(src, dst)
        return dst

    # -- figures -----------------------------------------------------------------------------------

    def run_size(self, size: str) -> None:
        needs_db = any(self.want(f) for f in ["query", "refine", "save", "cli", "hook", "rem", "repeat", "dup",
                                              "theme"])
        if self.want("migrate"):
            self.guard(f"migrate/{size}", self.fig_migrate, size)
        if not needs_db:
            return
        pristine, labels = self.pristine(size)
        work = self.working_copy(pristine, f"work-{size}.db")
        what = [w for w in ("dup", "theme") if self.want(w)]
        if what:
            self.guard(f"quality/{size}", self.fig_quality, size, work, pristine, what)
        if self.want("rem"):
            self.guard(f"rem/{size}", self.fig_rem, size, work)
        if self.want("repeat"):
            self.guard(f"repeat/{size}", self.fig_repeat, size, pristine)
        lat = [w for w in ("query", "refine", "save") if self.want(w)]
        if lat:
            self.guard(f"latency/{size}", self.fig_latency, size, work, pristine, lat)
        if self.want("cli"):
            self.guard(f"cli/{size}", self.fig_cli, size, work)
        if self.want("hook"):
            self.guard(f"hook/{size}", self.fig_hook, size, work)

    def guard(self, name, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as exc:  # one broken figure must not lose the others
            self.log(f"{name} FAILED: {exc}")
            self.add(name, args[0] if args else "-", "error", note=str(exc).splitlines()[-1][:200] if str(exc) else "")
            self.details.setdefault("errors", {})[name] = str(exc)

    def fig_migrate(self, size: str) -> None:
        lessons = SIZES[size][0]
        legacy = self.cache / f"legacy-{lessons}-s{self.args.seed}-v{synth.SYNTH_VERSION}-{schema_key()}.db"
        expect_file = Path(str(legacy) + ".expect.json")
        if self.args.fresh or not legacy.exists() or not expect_file.exists():
            self.log(f"building legacy database ({lessons} lessons) ...")
            run_worker("legacy_build", db=legacy, lessons=lessons, seed=self.args.seed)
        expect = json.loads(expect_file.read_text())
        firsts, reruns, peaks, last = [], [], [], None
        for i in range(self.args.repeat):
            self.log(f"migrate {size} run {i + 1}/{self.args.repeat}")
            work = self.working_copy(legacy, f"legacy-work-{size}.db")
            last = run_worker("migrate", db=work)
            firsts.append(last["seconds"])
            reruns.append(last["rerun_seconds"])
            peaks.append(last["peak_mib"])
        ok = (last["lesson_versions"] == expect["expected_versions"] and not last["pending"]
              and last["context_history"] == expect["projects"])
        check = ("backfill verified" if ok else
                 f"CHECK FAILED: {last['lesson_versions']} version rows (expected {expect['expected_versions']}), "
                 f"pending {last['pending']}, failures {last['failures']}")
        applies = lessons == 100_000
        v = statistics.median(firsts)
        self.add(f"migrate+backfill legacy DB ({lessons // 1000}k lessons)", size, round(v, 2), "s",
                 "< 30 s (at 100k)", v < 30, applies, statistics.median(peaks), check, 30)
        v = statistics.median(reruns)
        self.add("migrate re-run (nothing to do)", size, round(v, 3), "s", "< 2 s (at 100k)", v < 2, applies,
                 None, "", 2)
        self.details[f"migrate/{size}"] = {"runs": firsts, "reruns": reruns, "last": last, "expect": expect}

    def fig_quality(self, size, work, pristine, what) -> None:
        self.log(f"quality {size}: {','.join(what)}")
        r = run_worker("quality", db=work, labels=str(pristine) + ".labels.json", what=",".join(what))
        self.details[f"quality/{size}"] = r
        if "dup" in r:
            d = r["dup"]
            note = (f"{d['true_positives']}/{d['planted']} planted found, {d['findings']} findings, "
                    f"{d['topic_mates_flagged']} topic-mates flagged; planted sim min {d['planted_similarity']['min']:.2f}"
                    f" p10 {d['planted_similarity']['p10']:.2f}, {d['planted_below_0_80']} planted < 0.80")
            self.add("duplicate precision (0.80 band)", size, round(d["precision"], 3), "", ">= 0.95",
                     d["precision"] >= 0.95, True, r["peak_mib"], note, 0.95, "higher")
            self.add("duplicate recall (0.80 band)", size, round(d["recall"], 3), "", ">= 0.90",
                     d["recall"] >= 0.90, True, None, "", 0.90, "higher")
        if "theme" in r:
            t = r["theme"]
            if "na" in t:
                self.add("theme recall (knowledge_extraction)", size, "n/a", note=t["na"])
            else:
                self.add("theme recall (knowledge_extraction)", size, round(t["recall"], 3), "", None, None,
                         True, None, f"{t['found']}/{t['planted']} themes; {t['theme_findings']} theme findings; "
                         f"{t['one_off_reported_as_theme']} one-off words reported; stale todos "
                         f"{t['stale_todos_found']}/{t['stale_todos_planted']}; {t['seconds']:.1f} s over "
                         f"{t['snapshots']} snapshots", better="higher")

    def fig_rem(self, size, work) -> None:
        for louvain in self.args.louvain:
            self.fig_rem_with(size, work, louvain)

    def fig_rem_with(self, size, work, louvain) -> None:
        runs = []
        for i in range(self.args.repeat):
            self.log(f"rem {size} ({louvain}) run {i + 1}/{self.args.repeat}")
            runs.append(run_worker("rem", db=work, what=",".join(self.args.rem_ops), louvain=louvain))
        self.details[f"rem/{size}/{louvain}"] = runs
        total = statistics.median(r["cycle_ms"] for r in runs) / 1000
        peak = statistics.median(r["peak_mib"] for r in runs)
        base = statistics.median(r["base_mib"] for r in runs)
        errors = {op: r["operations"][op]["error"] for r in runs for op in r["operations"] if r["operations"][op]["error"]}
        note = f"{statistics.median(r['findings'] for r in runs):.0f} findings stored; RSS before data {base:.0f} MiB"
        if errors:
            note += f"; {len(errors)} op(s) failed/missing"
        full, default = self.args.rem_ops == OPERATIONS, sorted(self.args.rem_ops) == sorted(DEFAULT_OPERATIONS)
        # Every operation: the first version's targets; the default six: the scale issue's.
        times = {"medium": ("< 3 s", 3), "large": ("< 30 s", 30)} if default else \
            {"medium": ("< 10 s", 10), "large": ("< 120 s", 120)}
        target = times.get(size, (times["medium"][0] + " (at medium)", times["medium"][1]))
        name = "REM full cycle" if full else "REM default cycle" if default else "REM partial cycle"
        name += f" ({len(self.args.rem_ops)} ops, {runs[0]['louvain']})"
        judged = full or default
        self.add(name, size, round(total, 2), "s", target[0] if judged else None,
                 total < target[1] if judged else None, size in ("medium", "large"), peak, note, target[1])
        limit = 1024 if default else 2048
        self.add(f"{name} peak RSS", size, round(peak, 0), "MiB", f"< {limit} MiB (at large)", peak < limit,
                 size == "large" and judged, None, "ru_maxrss of the child process", limit)
        for op in self.args.rem_ops:
            vals = [r["operations"].get(op) for r in runs]
            if any(v is None for v in vals):
                self.add(f"  REM {op}", size, "n/a", note="not run")
                continue
            err = next((v["error"] for v in vals if v["error"]), None)
            if err:
                missing = "ModuleNotFoundError" in err or "ImportError" in err
                self.add(f"  REM {op}", size, "n/a", note=("not implemented yet: " if missing else "error: ") + err[:160])
                continue
            ms = statistics.median(v["ms"] for v in vals)
            self.add(f"  REM {op}", size, round(ms / 1000, 3), "s", None, None, True, None,
                     f"{statistics.median(v['findings'] for v in vals):.0f} findings")

    def fig_repeat(self, size, pristine) -> None:
        for louvain in self.args.louvain:
            self.fig_repeat_with(size, pristine, louvain)

    def fig_repeat_with(self, size, pristine, louvain) -> None:
        runs = []
        for i in range(self.args.repeat):
            self.log(f"repeat {size} ({louvain}) run {i + 1}/{self.args.repeat}")
            work = self.working_copy(pristine, f"repeat-{size}.db")  # each run changes its copy
            runs.append(run_worker("repeat", db=work, seed=self.args.seed + i, what=",".join(self.args.rem_ops),
                                   louvain=louvain))
        self.details[f"repeat/{size}/{louvain}"] = runs
        large = size == "large"
        counted = f" ({len(self.args.rem_ops)} ops, {runs[0]['louvain']})"
        for key, figure, target in (("full", "REM full cycle" + counted + ", then", None),
                                    ("same", "REM repeat cycle, nothing changed", ("< 1 s (at large)", 1)),
                                    ("after", "REM repeat cycle, 1% changed", ("< 5 s (at large)", 5))):
            seconds = statistics.median(r[key]["ms"] for r in runs) / 1000
            ops = runs[len(runs) // 2][key]["operations"]
            note = "; ".join(f"{op.split('_')[0]} {v['ms'] / 1000:.1f}s" + (" skipped" if v["skipped"] else "")
                             for op, v in ops.items())
            if key == "after":
                note = f"after {runs[0]['changed']}: " + note
            self.add(figure if key == "full" else figure + counted, size, round(seconds, 2), "s",
                     target[0] if target else None,
                     seconds < target[1] if target else None, large, None, note,
                     target[1] if target else None)
        seconds = statistics.median(r["after_cli"]["ms"] for r in runs) / 1000
        self.add("REM repeat cycle, 1% changed, as `mgcp rem run` (a new process)" + counted, size,
                 round(seconds, 2), "s", "< 5 s (at large)", seconds < 5, large, None,
                 "the same repeat on a copy, imports and start-up included", 5)

    def fig_latency(self, size, work, pristine, what) -> None:
        self.log(f"latency {size}: {','.join(what)}")
        r = run_worker("latency", db=work, labels=str(pristine) + ".labels.json", what=",".join(what),
                       runs=self.args.repeat, n=self.args.calls, seed=self.args.seed)
        self.details[f"latency/{size}"] = r
        names = {"query": "lesson query (in-process)", "refine": "refine_lesson (in-process)",
                 "save": "save_context (in-process)"}
        for w in what:
            x = r[w]
            if w == "query":
                self.add(names[w] + " p50", size, round(x["p50_ms"], 2), "ms", None, None, True, r["peak_mib"])
                self.add(names[w] + " p99", size, round(x["p99_ms"], 2), "ms", "< 20 ms (at large)",
                         x["p99_ms"] < 20, size == "large", None, "", 20)
            else:
                self.add(names[w] + " p50", size, round(x["p50_ms"], 2), "ms", "< 2 ms (at large)",
                         x["p50_ms"] < 2, size == "large", None, "", 2)
                self.add(names[w] + " p99", size, round(x["p99_ms"], 2), "ms")

    def _wall(self, cmd, stdin: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=self.env)
        return (time.perf_counter() - t0) * 1000, proc

    def fig_cli(self, size, work) -> None:
        # As for the hook: an installed package has its bytecode compiled, and a checkout run with
        # PYTHONDONTWRITEBYTECODE would otherwise measure the compiler on every start.
        import compileall

        compileall.compile_dir(str(REPO / "mgcp"), quiet=1)
        mgcp = Path(sys.executable).parent / "mgcp"
        cmd = [str(mgcp)] if mgcp.exists() else [sys.executable, "-m", "mgcp.surfaces.cli"]
        conn = sqlite3.connect(work)
        lid = conn.execute("SELECT id FROM lessons ORDER BY id LIMIT 1 OFFSET 17").fetchone()[0]
        conn.close()
        self.log(f"cli {size}")
        floor_cmd = [sys.executable, "-c",
                     f"import sqlite3, json; sqlite3.connect({str(work)!r}).execute('select 1')"]
        for name, args in (("mgcp lesson show", ["lesson", "show", lid]),
                           ("mgcp rem status", ["rem", "status", "--project", synth.MAIN_PROJECT])):
            self._wall(cmd + args + ["--db", str(work)])  # warm the page cache
            times, floors = [], []
            for _ in range(self.args.repeat * 4):
                ms, proc = self._wall(cmd + args + ["--db", str(work)])
                if proc.returncode != 0:
                    raise RuntimeError(f"{name} failed: {proc.stderr.strip()[-300:]}")
                times.append(ms)
                floors.append(self._wall(floor_cmd)[0])
            v = statistics.median(times)
            self.add(f"CLI start-up: {name}", size, round(v, 1), "ms", "< 250 ms", v < 250, True, None,
                     f"{len(times)} runs, min {min(times):.0f} ms; python+sqlite3 floor {statistics.median(floors):.0f} ms "
                     "in the same runs", 250)

    def fig_hook(self, size, work) -> None:
        """The hook's wall time against the floor, three commands in turns (rotating their order):
        the floor, the hook on `resume` (a new id: registered, no recall section) and the hook on
        `startup`, which adds the recall section (recall.hook_budget)."""
        # An installed package has its bytecode compiled; a checkout run with PYTHONDONTWRITEBYTECODE
        # would otherwise compile every changed module on every hook start.
        import compileall

        compileall.compile_dir(str(REPO / "mgcp"), quiet=1)
        if not HOOK.exists():
            self.add("hook wall time", size, "n/a", note=f"{HOOK} missing")
            return
        env_db = dict(self.env, MGCP_DB=str(work))
        floor_cmd = [sys.executable, "-c",
                     f"import sqlite3, json; sqlite3.connect({str(work)!r}).execute('select 1')"]
        # What `mgcp init` installs: the mgcp-hook console script beside this interpreter (the older
        # "python hooks/rem-cycle-trigger.py" entry with --hook-script, or where no script is installed).
        console = Path(sys.executable).parent / "mgcp-hook"
        hook_cmd = ([str(console)] if console.exists() and not self.args.hook_script
                    else [sys.executable, str(HOOK)])
        self.log(f"hook {size}: {' '.join(hook_cmd)}")
        times = {"floor": [], "resume": [], "startup": []}
        outputs = {"resume": [], "startup": []}
        registered = 0
        n = self.args.repeat * 5
        kinds = list(times)
        for i in range(n + 1):
            for which in kinds[i % 3:] + kinds[:i % 3]:
                t0 = time.perf_counter()
                if which == "floor":
                    subprocess.run(floor_cmd, capture_output=True, env=env_db)
                else:
                    sid = str(uuid.uuid4())
                    payload = json.dumps({"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl",
                                          "cwd": synth.MAIN_PROJECT, "hook_event_name": "SessionStart",
                                          "source": which})
                    proc = subprocess.run(hook_cmd, input=payload, capture_output=True, text=True, env=env_db)
                ms = (time.perf_counter() - t0) * 1000
                if not i:
                    continue  # the first round warms the caches
                times[which].append(ms)
                if which != "floor":
                    outputs[which].append((proc.returncode, proc.stdout.strip()[:300], proc.stderr.strip()[-300:],
                                           len(proc.stdout)))
                    conn = sqlite3.connect(work)
                    registered += conn.execute("SELECT count(*) FROM project_sessions WHERE session_id = ?",
                                               [sid]).fetchone()[0]
                    conn.close()
        f = statistics.median(times["floor"])
        for source, label in (("resume", "hook"), ("startup", "hook with recall")):
            h = statistics.median(times[source])
            ratio = h / f
            last = outputs[source][-1] if outputs[source] else None
            note = (f"{Path(hook_cmd[-1]).name} {h:.0f} ms vs floor {f:.0f} ms; "
                    f"sessions registered {registered}/{2 * n}")
            if last and last[0] != 0:
                note += f"; exit {last[0]}"
            if last and not last[1]:
                note += "; printed nothing"
            elif last and source == "startup":
                note += f"; printed {last[3]} bytes"
            self.add(f"{label} wall / python+sqlite3 floor", size, round(ratio, 2), "x", "< 2x (at large)", ratio < 2,
                     size == "large", None, note, 2)
            self.add(f"{label} wall time", size, round(h, 1), "ms", None, None, True, None,
                     f"floor {f:.1f} ms, {n} rounds of floor, resume and startup in turns")
        self.details[f"hook/{size}"] = {"floor_ms": times["floor"], "resume_ms": times["resume"],
                                        "startup_ms": times["startup"], "registered": registered,
                                        "last_output": {k: v[-1] if v else None for k, v in outputs.items()}}

    def fig_bootstrap(self) -> None:
        if not BOOTSTRAP.is_dir():
            self.add("bootstrap corpus", "-", "n/a", note=f"{BOOTSTRAP} not present; skipped")
            return
        self.log("bootstrap corpus")
        r = run_worker("bootstrap", db=BOOTSTRAP.resolve(), runs=self.args.repeat)
        self.details["bootstrap"] = r
        for op in ("duplicate_detection", "community_detection"):
            x = r[op]
            if "na" in x:
                self.add(f"bootstrap {op}", f"{r['lessons']} lessons", "n/a", note=x["na"])
                continue
            extra = (f"; {x['communities']} communities, modularity {x['modularity']}"
                     if op == "community_detection" else "")
            self.add(f"bootstrap {op}", f"{r['lessons']} lessons", round(x["seconds"], 3), "s", None, None, True,
                     r["peak_mib"], f"{x['findings']} findings {x['by_kind']}{extra}")

    def memory_scaling(self) -> None:
        first = self.args.louvain[0]
        m, l = self.details.get(f"rem/medium/{first}"), self.details.get(f"rem/large/{first}")
        if not (m and l) or self.args.rem_ops != OPERATIONS:
            return
        dm = statistics.median(r["peak_mib"] - r["base_mib"] for r in m)
        dl = statistics.median(r["peak_mib"] - r["base_mib"] for r in l)
        slope = math.log(max(dl, 1) / max(dm, 1)) / math.log(10)
        self.add("REM memory growth exponent (medium->large)", "m->l", round(slope, 2), "", "< 1.5 (2 = square)",
                 slope < 1.5, True, None, f"peak above baseline {dm:.0f} -> {dl:.0f} MiB for 10x lessons", 1.5)

    # -- output ------------------------------------------------------------------------------------

    def table(self) -> str:
        def fmt(row):
            v = row["value"]
            value = f"{v} {row['unit']}".strip() if not isinstance(v, str) else v
            met = "-" if row["met"] is None else ("yes" if row["met"] else "NO")
            if row["met"] is not None and not row["applies"]:
                met = f"({met.lower()})"
            peak = f"{row['peak_mib']:.0f}" if row["peak_mib"] else ""
            return [row["figure"], row["size"], value, row["target"] or "-", met, peak, row["note"]]

        header = ["figure", "size", "value", "target", "met?", "peak MiB", "note"]
        body = [fmt(r) for r in self.rows]
        widths = [max(len(str(x[i])) for x in [header] + body) for i in range(6)]
        lines = [" | ".join(str(x[i]).ljust(widths[i]) for i in range(6)) + " | " + x[6] for x in [header] + body]
        lines.insert(1, "-+-".join("-" * w for w in widths) + "-+-" + "-" * 4)
        missed = [r for r in self.rows if r["met"] is False and r["applies"]]
        lines.append("")
        if missed:
            lines.append("Targets missed:")
            for r in missed:
                tv, v = r["target_value"], r["value"]
                if r["better"] == "lower":
                    by = f"{v / tv:.2f}x the limit ({v - tv:+.3g} {r['unit']})"
                else:
                    by = f"short by {tv - v:.3g} ({v} vs {tv})"
                lines.append(f"  - {r['figure']} [{r['size']}]: {v} {r['unit']} vs {r['target']}: {by}")
        else:
            lines.append("Targets missed: none (of those that apply at the sizes run)")
        info = [r for r in self.rows if r["met"] is False and not r["applies"]]
        if info:
            lines.append("Below a size where the target applies, would miss: " +
                         "; ".join(f"{r['figure']} [{r['size']}] {r['value']} {r['unit']}" for r in info))
        lines.append("(met? in parentheses: the target is set for another size; shown for information)")
        return "\n".join(lines)


def main() -> None:
    if "--worker" in sys.argv:
        return worker_main(sys.argv[1:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="small", help="comma list of small, medium, large (default: small)")
    p.add_argument("--repeat", type=int, default=3, help="runs per figure; the median is reported (default 3)")
    p.add_argument("--only", default="", help=f"comma list of figures: {', '.join(FIGURES[1:])}")
    p.add_argument("--hook-script", action="store_true", help="time the older hooks/rem-cycle-trigger.py entry instead of mgcp-hook")
    p.add_argument("--out", default=None, help="JSON output (default benchmarks/results/<timestamp>.json)")
    p.add_argument("--workdir", default=str(HERE / "results" / "cache"),
                   help="where databases are built and cached (default benchmarks/results/cache)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--calls", type=int, default=100, help="calls per latency run (default 100)")
    p.add_argument("--fresh", action="store_true", help="rebuild cached databases")
    p.add_argument("--rem-ops", default=",".join(OPERATIONS),
                   help="operations the REM figure runs (default: all of them; a subset is reported as partial)")
    p.add_argument("--louvain", default="auto",
                   help="comma list of the Louvain implementations the REM figures run with, a row each: auto "
                        "(igraph when `mgcp[fast]` is installed), python-louvain, igraph (default auto)")
    args = p.parse_args()
    args.only = [x for x in args.only.split(",") if x]
    args.rem_ops = [x for x in args.rem_ops.split(",") if x]
    args.louvain = list(dict.fromkeys(x for x in args.louvain.split(",") if x))
    if not args.louvain or any(x not in ("auto", "python-louvain", "igraph") for x in args.louvain):
        p.error(f"unknown Louvain implementation in {args.louvain}")
    if args.rem_ops != OPERATIONS and any(x not in OPERATIONS for x in args.rem_ops):
        p.error(f"unknown REM operation in {args.rem_ops}")
    unknown = [x for x in args.only if x not in FIGURES]
    sizes = [s for s in args.sizes.split(",") if s]
    if unknown or any(s not in SIZES for s in sizes) or args.repeat < 1:
        p.error(f"unknown figure or size: {unknown or sizes}")
    bench = Bench(args)
    t0 = time.perf_counter()
    try:
        for size in sizes:
            bench.run_size(size)
        if bench.want("bootstrap"):
            bench.guard("bootstrap", lambda *_: bench.fig_bootstrap(), "-")
        bench.memory_scaling()
    finally:
        shutil.rmtree(bench.datadir, ignore_errors=True)
    table = bench.table()
    print(table)
    out = Path(args.out) if args.out else HERE / "results" / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        rev = ""
    out.write_text(json.dumps({
        "meta": {"when": datetime.now(timezone.utc).isoformat(), "git": rev, "python": sys.version.split()[0],
                 "platform": platform.platform(), "cpus": os.cpu_count(), "args": vars(args),
                 "seconds": round(time.perf_counter() - t0, 1),
                 "memory": "peak_mib = ru_maxrss (RUSAGE_SELF) of the child process running the step"},
        "figures": bench.rows, "details": bench.details}, indent=2, default=str))
    print(f"\nwritten: {out}  ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
