"""Running REM operations, and the run ledger (each operation's schedule: mgcp.engine.schedules).

For a project at session `s`, an operation is due when `s >= next_due(last)` (mgcp.schedule, the
one implementation); running it records `last = s`, so missed runs never pile up. Each operation is
a pure function in `mgcp.operations`; this module feeds it data from the store and stores what it
finds. A finding whose fingerprint is already pending, or was rejected, is not stored again.
Community summaries and context summaries are written automatically and recorded as the run's own
actions, so undoing the run removes them too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import AsyncIterator, Callable

from mgcp import __version__, schedule
from mgcp.collector import collector_paused, thawed_after
from mgcp.config import OPERATIONS, RemConfig
from mgcp.engine import review
from mgcp.engine.actions import apply_auto
from mgcp.engine.schedules import schedules
from mgcp.errors import ConfigError, InvalidInputError
from mgcp.models import OperationResult, OperationSchedule, RemCycleReport, RemFinding, RemReport, RemRun
from mgcp.operations.shared import BEHIND, CycleCache, Reader
from mgcp.persistence.database import utcnow
from mgcp.persistence.store import Store
from mgcp.records import ProjectRef

# Called progress(message) when an operation starts and ends, and progress(message, fraction) as
# the long loop of a running operation advances (fraction from 0 to 1, from a worker thread).
Progress = Callable[..., None]


def check_operations(names: list[str] | None) -> list[str] | None:
    if not names:
        return None
    unknown = [n for n in names if n not in OPERATIONS]
    if unknown:
        raise InvalidInputError(f"unknown operation {unknown[0]!r}; allowed: {', '.join(OPERATIONS)}")
    return list(dict.fromkeys(names))


def _finding_id(fingerprint: str, run_id: int) -> str:
    """64 bits of a hash of what is unique to the finding: collisions are out of reach in practice,
    and a unique prefix of 8 characters is accepted wherever an id is."""
    return hashlib.sha256(f"{fingerprint}:{run_id}".encode()).hexdigest()[:16]


async def run(store: Store, config: RemConfig, project_path: str, operations: list[str] | None = None,
              auto: bool = False, dry_run: bool = False, progress: Progress | None = None) -> RemRun:
    """`rem run`: the cycle, then with `auto` the policy's answers to the project's queue.

    Each operation's analysis runs with no transaction open; a normal run then writes what it found
    at once, so a failure or an interrupt later keeps the work done. A dry run analyses every
    operation first, then writes everything in one transaction that it rolls back: it shows
    exactly what would happen, changes nothing, and never holds the lock while it analyses."""
    if dry_run and not auto:
        raise InvalidInputError("--dry-run goes with --auto")
    operations = check_operations(operations)
    t0 = time.perf_counter()
    project = await store.queue.project(project_path)
    plan = _plan(config, project, await store.rem.state(project.project_id), operations)
    model = await _similarity_model(config, plan)
    analyses = _analyse(store, config, project, plan, progress, model, keep=not dry_run)

    async def write(analyses) -> RemRun:
        await store.context.add_project(project.project_path)
        report = await _record(store, project, plan, analyses, auto, t0)
        if not auto:
            return RemRun(report=report)
        applied, left, settled = await apply_auto(store, config, project.project_path,
                                                  await review.pending_findings(store, project.project_path),
                                                  report.run_id)
        return RemRun(report=report, auto=True, dry_run=dry_run, applied=applied, left_pending=left,
                      settled_elsewhere=settled)

    with thawed_after():  # what each operation leaves alive is frozen meanwhile: see mgcp.collector
        if not dry_run:
            return await write(analyses)
        done = [analysis async for analysis in analyses]
        async with store.preview():
            return await write(_replay(done))


async def run_cycle(store: Store, config: RemConfig, project_path: str,
                    operations: list[str] | None = None, progress: Progress | None = None) -> RemCycleReport:
    """Run the due operations (or the named ones) for the project and store their findings."""
    return (await run(store, config, project_path, operations, progress=progress)).report


@dataclass
class _Analysis:
    """One operation's analysis, not yet written: findings, summary, automatic output."""

    plan: OperationSchedule
    findings: list[RemFinding]
    summary: dict
    output: tuple | None  # (action name, async function that writes it) or None
    duration_ms: float
    error: str | None = None


def _plan(config: RemConfig, project: ProjectRef, state: dict, operations: list[str] | None) -> list[OperationSchedule]:
    """The operations this run covers: the named ones, else those due."""
    plan = schedules(config, project.project_path, state, project.session_count)
    return [p for p in plan if (p.operation in operations if operations else p.due)]


SIMILARITY_OPERATIONS = ("duplicate_detection", "community_detection")


async def _similarity_model(config: RemConfig, plan: list[OperationSchedule]):
    """The embedding model the `similarity` setting asks for, loaded (off the event loop) before
    the run starts, when an operation that compares texts is planned; None for the lexical
    backend. A missing extra or model is a ConfigError naming the setting, and nothing is written."""
    settings = config.similarity
    if settings["backend"] != "semantic" or not any(p.operation in SIMILARITY_OPERATIONS for p in plan):
        return None
    from mgcp.operations import semantic

    where = config.source or "rem-config.yaml"
    try:
        return await asyncio.to_thread(semantic.load_model, settings["model"])
    except ImportError:
        raise ConfigError(f"{where}: similarity.backend is 'semantic' but model2vec is not installed "
                          "(pip install 'mgcp[semantic]')") from None
    except semantic.ModelError as exc:
        raise ConfigError(f"{where}: similarity.model: {exc}") from None


async def _analyse(store: Store, config: RemConfig, project: ProjectRef, plan: list[OperationSchedule],
                   progress: Progress | None, model=None, keep: bool = True) -> AsyncIterator[_Analysis]:
    """Each planned operation's analysis, one by one. Nothing is written and no transaction is
    open, so the write lock stays free however long this takes; the CPU-bound work of each
    operation runs in a worker thread, so the event loop (an MCP server) keeps answering.
    After the last one, with `keep`, what the next cycles can start from (the corpora's words, the
    searches, the indexes) is kept: a cache (`_Inputs.keep_corpora`, `keep_searches`, `keep_indexes`)."""
    progress = progress or (lambda message, fraction=None: None)
    settings = config.for_project(project.project_path)
    inputs = _Inputs(store, project.project_id, model)
    state = await store.rem.state(project.project_id)
    for index, plan_item in enumerate(plan, 1):
        op, t0 = plan_item.operation, time.perf_counter()
        progress(f"[{index}/{len(plan)}] {op} ...")
        inputs.begin(op)
        inputs.cache.progress = (lambda fraction, label=f"[{index}/{len(plan)}] {op}": progress(label, fraction))
        try:
            digest = await _input_digest(store, project, op, settings[op], config.similarity, inputs)
            last = _last_result(state.get(op))
            if digest and digest == last.get("input_digest") and _steady(last, _now()):
                findings, summary, output = [], {"skipped": True, "unchanged": True, "input_digest": digest}, None
                if "steady" in last:
                    summary["steady"] = last["steady"]
            else:
                if op in TEXT_READERS:
                    inputs.cache.reader = await inputs.reader()
                try:
                    with collector_paused(freeze=True):  # no result changes; see mgcp.collector
                        findings, summary, output = await RUNNERS[op](store, project, settings[op], inputs)
                except asyncio.CancelledError:  # interrupted: its worker thread stops at its next tick
                    inputs.cache.interrupt()
                    raise
                if digest:
                    summary["input_digest"] = digest
            analysis = _Analysis(plan_item, findings, summary, output, 0.0)
        except Exception as exc:  # reported in the run; the other operations still run
            analysis = _Analysis(plan_item, [], {}, None, 0.0, f"{type(exc).__name__}: {exc}")
        analysis.duration_ms = round((time.perf_counter() - t0) * 1000, 1)
        progress(f"[{index}/{len(plan)}] {op}: {len(analysis.findings)} finding(s) in {analysis.duration_ms:.0f} ms"
                 + (f" - FAILED: {analysis.error}" if analysis.error else ""))
        inputs.cache.progress = None
        inputs.end([p.operation for p in plan[index:]])
        yield analysis
        # written (or held by the caller) by now: let go of what its output holds (a community run's
        # kept state, say), and hand the memory back, before the next operation runs
        analysis = findings = summary = output = None
        _give_back()
    if keep:
        await inputs.keep_corpora()
        await inputs.keep_searches()
        await inputs.keep_indexes()


# Operations whose findings (and writes) depend only on the active lessons' content, their own
# settings, the answers given to findings and, where named here, the project's history ("project")
# or every project's history and stated decisions ("all"): with none of these changed since their
# last run in the project, a run would find exactly what is already stored, so it is skipped
# ("unchanged"). Any undo counts as a changed answer; another mgcp version, or another Louvain
# implementation for community detection, counts as changed settings.
# The staleness scan ("use") reads the lessons' use and the query log too, and the clock: its run
# records the span of time over which the same inputs give the same findings (summary["steady"]:
# from its clock to the first moment a finding could appear or the shown ones change), and it is
# skipped only within that span.
# Duplicate detection reads pattern reinforcement's answers too: a set of look-alikes kept there
# keeps its pairs apart (`review.kept_apart`).
ANSWERS_READ = {"duplicate_detection": ("duplicate_detection", "pattern_reinforcement")}
DIGESTED = {"duplicate_detection": None, "community_detection": None, "contradiction_scan": None,
            "knowledge_extraction": "project", "pattern_reinforcement": "all", "staleness_scan": "use",
            "context_summary": "project"}


async def _input_digest(store: Store, project: ProjectRef, op: str, settings: dict,
                        similarity: dict, inputs: "_Inputs") -> str | None:
    if op not in DIGESTED:
        return None
    answered = await store.rem.answers(*ANSWERS_READ.get(op, (op,)))
    lessons = await inputs.lessons_digest("lesson_use" if DIGESTED[op] == "use" else "lesson_content")
    history = None
    if DIGESTED[op] == "project":
        history = await store.context.history_mark(project.project_id)
    elif DIGESTED[op] == "all":
        history = [await store.context.history_mark(), await store.patterns.observations_mark()]
    algorithm = [__version__]
    if op == "community_detection":
        from mgcp.operations.community_detection import louvain

        algorithm.append(louvain(settings))
    described = json.dumps([op, algorithm, settings, similarity, answered, lessons, history], sort_keys=True,
                           default=str)
    return hashlib.sha256(described.encode()).hexdigest()


def _steady(last: dict, now: datetime) -> bool:
    """Whether `now` falls in the span over which the last run's findings hold (no span: always)."""
    if "steady" not in last:
        return True
    try:
        start, end = (datetime.fromisoformat(t) if t else None for t in last["steady"])
    except (TypeError, ValueError):
        return False
    return start is not None and start <= now and (end is None or now < end)


def _last_result(row: dict | None) -> dict:
    try:
        result = json.loads((row or {}).get("last_run_result") or "{}")
    except ValueError:
        return {}
    return result if isinstance(result, dict) else {}


async def _replay(analyses: list[_Analysis]) -> AsyncIterator[_Analysis]:
    for analysis in analyses:
        yield analysis


async def _record(store: Store, project: ProjectRef, plan: list[OperationSchedule],
                  analyses: AsyncIterator[_Analysis], auto: bool, t0: float) -> RemCycleReport:
    """Write the run as the analyses arrive: per operation, its output, new findings and schedule
    cursor in one transaction (a failed operation writes nothing and its cursor does not move).
    `t0`: when the run started (perf_counter), for its duration."""
    session = project.session_count
    async with store.transaction():
        run_id = await store.rem.start_run(project.project_id, session, [p.operation for p in plan], auto)
    report = RemCycleReport(run_id=run_id, project_id=project.project_id,
                            project_path=project.project_path, session_number=session,
                            started_at=utcnow(), auto=auto)
    errors = []
    async for analysis in analyses:
        op = analysis.plan.operation
        result = _result(analysis)
        if analysis.error is None:
            try:
                stored = await _write_operation(store, project, analysis, session, run_id)
                result.findings = len(stored)
                report.findings.extend(stored)
            except Exception as exc:
                result.error = f"{type(exc).__name__}: {exc}"
        if result.error:
            errors.append(f"{op}: {result.error}")
        report.operations.append(result)
        del analysis  # written: not held while the next operation runs
    report.duration_ms = round((time.perf_counter() - t0) * 1000, 1)
    async with store.transaction():
        await store.rem.finish_run(run_id, report.duration_ms, len(report.findings), errors,
                                   [r.model_dump() for r in report.operations])
    return report


def _result(analysis: _Analysis) -> OperationResult:
    # made here, not in `_record`: building the model's validator on its first use reads the
    # calling frame's variables, and a long-lived frame would keep that copy (and the analysis)
    return OperationResult(operation=analysis.plan.operation, duration_ms=analysis.duration_ms,
                           summary=analysis.summary, error=analysis.error)


async def _write_operation(store: Store, project: ProjectRef, analysis: _Analysis, session: int,
                           run_id: int) -> list[RemFinding]:
    plan_item = analysis.plan
    async with store.transaction():
        if analysis.output:
            name, write = analysis.output
            async with store.recording() as changes:
                await write(run_id)
            if changes:
                await store.rem.record_action(None, run_id, name, changes, auto=True)
        stored = await _store_findings(store, analysis.findings, project.project_id, run_id)
        await store.rem.record_operation_run(
            project.project_id, plan_item.operation, session,
            schedule.next_due(plan_item.strategy, plan_item.params, session),
            {"findings": len(stored), **analysis.summary})
    return stored


async def _store_findings(store: Store, findings: list[RemFinding], project_id: str, run_id: int) -> list[RemFinding]:
    stored = []
    now = utcnow()
    async with store.transaction():
        for finding in findings:
            if await store.rem.finding_speaks(finding.fingerprint):
                continue  # already pending, or answered "keep" for this very subject
            if finding.kind == "summary":  # the latest count of the rest replaces the last one
                await store.rem.retire_summaries(project_id, finding.operation, finding.data["of_kind"])
            finding = finding.model_copy(update={
                "id": _finding_id(finding.fingerprint, run_id), "project_id": project_id,
                "run_id": run_id, "created_at": now})
            await store.rem.insert_finding(finding)
            stored.append(finding)
    return stored


async def report(store: Store, project_path: str) -> RemReport:
    """The project's last finished run with the findings it raised (their status now), a later run
    that never finished, and every finding waiting for the project's review, whichever run raised it."""
    project = await store.queue.project(project_path)
    pending = await review.pending_findings(store, project_path)
    run = await store.rem.last_run(project.project_id)
    last = None
    if run is not None:
        last = RemCycleReport(
            run_id=run["id"], project_id=project.project_id, project_path=project.project_path,
            session_number=run["session_number"], started_at=run["started_at"],
            duration_ms=run["duration_ms"] or 0.0, auto=bool(run["auto"]),
            operations=[OperationResult(**o) for o in json.loads(run["operations"]) if isinstance(o, dict)],
            findings=await store.rem.findings(None, None, run_id=run["id"]))
    return RemReport(project_id=project.project_id, project_path=project.project_path,
                     last_run=last, pending=pending,
                     unfinished_run=await store.rem.unfinished_since(project.project_id, run and run["id"]))


# -- operation runners: data from the store in, findings out ---------------------------------------

def _now() -> datetime:
    return datetime.now(timezone.utc)


# Operations that read the same computed values (TF-IDF vectors, embeddings, mined notes) share one
# cache per group; a group's cache is dropped once none of its operations is left to run, so its
# memory serves the operations after. contradiction_scan, which runs after the history operations,
# computes the trigger vectors it needs again rather than keep duplicate detection's (and all the
# group's values) through them.
SHARING = {"duplicate_detection": "similarity", "community_detection": "similarity",
           "knowledge_extraction": "history", "context_summary": "history"}
LESSON_READERS = {"duplicate_detection", "community_detection", "knowledge_extraction", "pattern_reinforcement",
                  "contradiction_scan"}
HISTORY_READERS = {"knowledge_extraction", "context_summary"}
# Operations that read the lessons' texts through the cycle's `Reader`, which keeps the words of
# the corpora they compare between cycles (`Reader.corpus`).
TEXT_READERS = {"duplicate_detection", "community_detection", "contradiction_scan"}
WORD_INDEX = "lesson_words"  # the kept `LessonWords`


def _give_back() -> None:
    """Hand the memory an operation freed back to the system: glibc's malloc keeps freed memory
    inside its heaps between live blocks (a heap per thread that allocated), so the next operation's
    peak would stack on what the last one left there, and a long-running process (`mgcp serve`)
    would hold its cycle's peak until it exits; elsewhere (no `malloc_trim`) nothing happens. Done
    after each operation, once its output is written and let go: the pages faulted in again cost
    less than the peak they save."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):  # no C library by that name, or no malloc_trim in it
        pass


class _Inputs:
    """What the operations read, loaded once per cycle: the active lessons, and the project's
    history from the earliest session any operation asked for. No operation changes either (findings
    are applied later, by review or --auto), so every operation of the cycle sees the same data;
    each is let go once no operation left in the cycle reads it.
    `similarity`: the backend the `similarity` setting chose, or None for the operations' default
    (lexical)."""

    def __init__(self, store: Store, project_id: str, model=None):
        self.store, self.project_id, self.model = store, project_id, model
        self.caches: dict[str, CycleCache] = {}  # by SHARING group
        self.cache = CycleCache()  # the running operation's: what it computes alike with others
        self.similarity = None
        self.active: list | None = None
        self.digests: dict[str, str] = {}
        self.after: int | None = None
        self.snapshots: list = []
        self._reader: Reader | None = None
        self._words = None  # `lesson_words`, over `active`
        self._searches: dict[str, bytes] = {}  # what the searches keep (`hold_search`)
        self._indexes: dict = {}  # the indexes built anew (each with its `state()`), to keep

    def begin(self, op: str) -> None:
        """Set the cache (and the similarity backend over it) for operation `op`, about to run."""
        group = SHARING.get(op)
        self.cache = self.caches.setdefault(group, CycleCache()) if group else CycleCache()
        self.similarity = None
        if self.model is not None:
            from mgcp.operations.semantic import SemanticBackend

            self.similarity = SemanticBackend(self.model, self.cache)

    def end(self, later: list[str]) -> None:
        """Let go of what none of the operations `later` in the cycle reads."""
        for group in [g for g in self.caches if not any(SHARING.get(op) == g for op in later)]:
            del self.caches[group]
        self.cache, self.similarity = CycleCache(), None
        if self._reader is not None:
            self._reader.let_go()
        if not LESSON_READERS.intersection(later):
            self.active = self._words = None
        if not HISTORY_READERS.intersection(later):
            self.snapshots, self.after = [], None

    async def lessons_digest(self, mark: str = "lesson_content") -> str:
        """The lessons' `content_digest` (or another mark), taken once per cycle and before
        `lessons()` reads them: a change in between makes the next run compare unequal (and run),
        never the reverse."""
        if mark not in self.digests:
            self.digests[mark] = await self.store.lessons.content_digest(mark)
        return self.digests[mark]

    async def reader(self) -> Reader:
        """Where the text-reading operations find the words of the corpora they compare: what
        earlier cycles kept (loaded on first use), else read anew."""
        if self._reader is None:
            self._reader = Reader(await self.store.kept_corpora.load())
        return self._reader

    async def keep_corpora(self) -> None:
        """Keep the corpora built in this cycle (a cache: the next cycle reads again only the texts
        no kept corpus holds)."""
        if self._reader is not None:
            await self.store.kept_corpora.keep(*self._reader.keep_corpora())

    async def lessons(self) -> list:
        """The active lessons as the operations read them (`LessonRow`)."""
        if self.active is None:
            self.active = await self.store.lessons.rows()
        return self.active

    async def history(self, after_session: int) -> list:
        """Snapshots of sessions after `after_session`, oldest first."""
        if self.after is None or after_session < self.after:
            self.snapshots = await self.store.rem_inputs.history_since(self.project_id, after_session)
            self.after = after_session
        return [s for s in self.snapshots if s.session_number > after_session]

    async def lesson_words(self):
        """Which active lessons hold which word (`LessonWords`, read by knowledge extraction and
        pattern reinforcement), built once per cycle over `lessons()` from what earlier cycles kept
        of it (`keep_indexes` keeps it for the next)."""
        from mgcp.operations.lesson_words import LessonWords

        active = await self.lessons()
        if self._words is None or self._words.lessons is not active:
            kept = await self.store.kept_indexes.load(WORD_INDEX)
            self._words = await asyncio.to_thread(LessonWords, active, kept)
            # kept again once the lessons the kept index lacks and those it holds no longer are more
            # than a few (`shared.BEHIND`); its state is made when kept, not held meanwhile
            if kept is None or self._words.read + self._words.gone > BEHIND * len(active):
                self._indexes[WORD_INDEX] = self._words
        return self._words

    async def keep_indexes(self) -> None:
        """Keep the indexes built anew in this cycle (a cache, see `mgcp.persistence.kept_indexes`)."""
        for name, index in self._indexes.items():
            await self.store.kept_indexes.keep(name, await asyncio.to_thread(index.state))

    def hold_search(self, name: str, state: bytes | None) -> None:
        """What search `name` keeps for the next cycles, written by `keep_searches` (None: what
        is kept holds as it is)."""
        if state is not None:
            self._searches[name] = state

    async def keep_searches(self) -> None:
        """Keep what the searches of this cycle left to keep (a cache, see `mgcp.persistence.kept_pairs`)."""
        for name, state in self._searches.items():
            await self.store.kept_pairs.keep(name, state)


# Each returns (findings, summary, output): output is None or (action name, an async function of
# the run id that writes the operation's automatic output); the engine runs it in the operation's
# transaction and records it as an action of the run, so that `rem undo --run` takes it back.
# The pure operation runs in a worker thread (`asyncio.to_thread`).

async def _staleness(store, project, settings, inputs):
    from mgcp.operations import staleness_scan

    now = _now()
    since = (now - timedelta(days=settings["query_window_days"])).isoformat()
    queries = await store.lessons.recent_queries(since)
    first_query = await store.lessons.first_query_since(since)
    uses = await store.lessons.uses(skip=staleness_scan.unjudged(settings, queries))
    findings, until, beyond = await asyncio.to_thread(staleness_scan.scan, uses, queries, now, settings,
                                                      await store.rem.settled(staleness_scan.OPERATION),
                                                      first_query)
    return findings, {"queries_in_window": len(queries), "not_shown": beyond,
                      "steady": [now.isoformat(), until.isoformat() if until else None]}, None


async def _duplicates(store, project, settings, inputs):
    from mgcp.operations import duplicate_detection
    from mgcp.operations.kept_search import KeptSearch

    active = await inputs.lessons()
    # the pair search is kept for the lexical backend only (the semantic one searches embeddings too)
    search = None
    if inputs.similarity is None:
        search = KeptSearch(await store.kept_pairs.load(duplicate_detection.OPERATION))
    findings = await asyncio.to_thread(duplicate_detection.run, active, settings, inputs.similarity,
                                       inputs.cache, await review.kept_apart(store), search)
    if search is not None:
        inputs.hold_search(duplicate_detection.OPERATION, search.keep)
    return findings, {"lessons": len(active)}, None


async def _communities(store, project, settings, inputs):
    from mgcp.operations import community_detection

    previous = await store.rem.last_community_run() or {}
    kept = await asyncio.to_thread(_kept_communities, await store.community_kept.load())
    result = await asyncio.to_thread(
        community_detection.run, await inputs.lessons(), previous.get("communities"), settings,
        previous.get("graph_hash"), previous.get("modularity") or 0.0, inputs.cache, inputs.similarity,
        await store.rem.settled(community_detection.OPERATION), kept)
    if result.unchanged:
        return [], {"communities": len(result.communities), "unchanged": True}, None
    # a cache: kept with the run, so a dry run keeps nothing
    lessons = None if result.kept is None else await asyncio.to_thread(result.kept.lessons.state)

    async def write(run_id):
        await store.rem.record_community_run(run_id, result.graph_hash, result.modularity, result.communities)
        now = {c["community_id"] for c in result.communities}
        gone = [c["community_id"] for c in previous.get("communities") or [] if c["community_id"] not in now]
        await store.rem.write_community_summaries(result.communities, gone)
        if lessons is not None:
            k = result.kept
            await store.community_kept.save(f"{k.settings}@{__version__}", k.runs_since_full, lessons, k.titles,
                                            k.readings)

    return result.findings, {"communities": len(result.communities),
                             "modularity": round(result.modularity, 4),
                             "incremental": result.incremental, "described": result.described,
                             **{k: len(v) for k, v in result.changes.items()}}, ("write_community_summaries", write)


def _kept_communities(loaded):
    """What `CommunityKept.load` returned, as community detection reads it: None when nothing is
    kept, or when another mgcp version kept it (its rules may differ); its lessons None when their
    state is missing or not usable (`KeptLessons.read`)."""
    from mgcp.operations.community_detection import Kept, KeptLessons

    if loaded is None or not loaded[0].endswith(f"@{__version__}"):
        return None
    settings, runs_since_full, lessons, titles, readings = loaded
    return Kept(settings.rsplit("@", 1)[0], runs_since_full, KeptLessons.read(lessons), titles, readings)


async def _extraction(store, project, settings, inputs):
    from mgcp.operations import knowledge_extraction

    state = (await store.rem.state(project.project_id)).get("knowledge_extraction", {})
    history = await inputs.history(int(state.get("last_run_session") or 0) - 1)
    if not history:
        return [], {"snapshots": 0}, None
    findings = await asyncio.to_thread(knowledge_extraction.run, history, await inputs.lessons(), settings,
                                       inputs.cache, await inputs.lesson_words(), project.project_path)
    for finding in findings:  # the same theme in two projects is two findings
        finding.fingerprint = hashlib.sha256(f"{project.project_id}:{finding.fingerprint}".encode()).hexdigest()
    return findings, {"snapshots": len(history)}, None


async def _summary(store, project, settings, inputs):
    from mgcp.operations import context_summary

    last = await store.rem.last_summary(project.project_id)
    history = await inputs.history(last["to_session"] if last else -1)
    result = await asyncio.to_thread(context_summary.run, history, settings, inputs.cache)
    if result is None:
        return [], {"snapshots": 0}, None

    async def write(run_id):
        await store.rem.write_summary(project.project_id, result.from_session, result.to_session,
                                      result.narrative, result.data)

    return [], {"snapshots": len(history), "from_session": result.from_session,
                "to_session": result.to_session}, ("write_context_summary", write)


async def _patterns(store, project, settings, inputs):
    from mgcp.operations import pattern_reinforcement

    # the active lessons the cycle shares, and the superseded copies (they count as members)
    lessons = await inputs.lessons() + await store.lessons.rows(status="superseded")
    needed = pattern_reinforcement.min_count(settings.get("min_count", 3))
    observed = await _observe_patterns(store, needed)
    wordings = await _own_wordings(store, project.project_id, observed.observed, needed)
    existing = await store.patterns.rows()
    paths = await store.patterns.project_paths()
    kept = await store.kept_indexes.load(pattern_reinforcement.OPERATION)
    result = await asyncio.to_thread(pattern_reinforcement.run, lessons, observed.observed, existing, settings,
                                     utcnow(), paths, await inputs.lesson_words(), kept,
                                     await store.patterns.mark(), project.project_id, wordings,
                                     await store.rem.settled(pattern_reinforcement.OPERATION))
    summary = {"patterns": result.clusters, "written": len(result.patterns), "unchanged": result.unchanged,
               "snapshots": observed.snapshots, "decision_observations": observed.decisions,
               "history_read": "whole" if observed.whole else "since the last run"}
    if not result.patterns and not observed.new and not result.kept_changed:
        return result.findings, summary, None

    async def write(run_id):
        if result.patterns:
            await store.patterns.save(result.patterns)
        await observed.keep()
        # what the run decided, for the next (a cache: kept with the run, so a dry run keeps nothing)
        result.kept.mark = await store.patterns.mark()
        await store.kept_indexes.keep(pattern_reinforcement.OPERATION, await asyncio.to_thread(result.kept.state))

    return result.findings, summary, ("write_reinforced_patterns", write)


@dataclass
class _PatternHistory:
    """What pattern reinforcement observed in the history: `observed` for its run, and `keep`, which
    keeps what was read anew (when the run's output is written)."""

    observed: "Observed"  # mgcp.operations.pattern_reinforcement.Observed
    snapshots: int
    decisions: int
    whole: bool
    new: bool
    keep: Callable


async def _observe_patterns(store: Store, needed: int) -> _PatternHistory:
    """The history's observations, read since the kept marks only (whole when nothing is kept, or
    the history below a mark is not what was read, or the rules changed), merged with the kept
    observations of the keys it touched; and the kept ones of every other key of at least `needed`
    sessions. The same as reading the whole history (every rule of `Observations` is a union, a
    minimum or a maximum)."""
    from mgcp.operations.pattern_reinforcement import OBSERVATION_RULES, Observations, Observed, Seen
    from mgcp.persistence.pattern_observations import DECISIONS, RULES

    kept = store.pattern_observations
    rules = f"mgcp {__version__}: {OBSERVATION_RULES}"
    marks = await kept.marks()
    whole = not await kept.intact(marks, rules)
    start = {} if whole else marks
    observations = Observations()
    decisions, decided = await kept.decisions_after(start.get(DECISIONS))
    await asyncio.to_thread(observations.add_decisions, decisions)
    read: dict[str, tuple] = {}
    for project_id in await kept.unread(start):
        mark = start.get(project_id)
        if mark:
            observations.resume(project_id, mark[2], kept.decisions_of(mark))
        else:
            observations.resume(None, None, [])
        async for page in kept.history_after(project_id, mark, read):  # never the whole history in memory
            await asyncio.to_thread(observations.add_history, page)
    seen = await asyncio.to_thread(observations.seen)  # key -> the fields of a `Seen`
    if whole:
        view = Observed({key: Seen(*fields) for key, fields in seen.items() if len(fields[2]) >= needed})
    else:
        for key, fields in (await kept.seen(list(seen))).items():
            seen[key] = Seen(*fields).merge(Seen(*seen[key])).fields()
        view = Observed({key: Seen(*fields) for key, fields in seen.items()}, await kept.sized(needed, seen),
                        set(seen))
    new = bool(whole or read or decisions)
    marked = {**read, DECISIONS: decided, RULES: (0, 0, rules, None)}

    async def keep():
        if new:
            await kept.keep(seen, marked, marks, whole)

    return _PatternHistory(view, observations.snapshots, len(decisions), whole, new, keep)


async def _own_wordings(store: Store, project_id: str, observed, needed: int) -> dict[str, str]:
    """The project's own wording of each key it stated in at least `needed` sessions that other
    projects stated too (the latest wording of all may be theirs), read from its latest session
    stating the key: what its draft of the key quotes."""
    from mgcp.operations.pattern_reinforcement import own_wordings

    latest = observed.shared(project_id, needed)
    if not latest:
        return {}
    snapshots, decisions = await store.pattern_observations.stated(project_id, latest.values())
    return await asyncio.to_thread(own_wordings, latest, snapshots, decisions)


async def _contradictions(store, project, settings, inputs):
    from mgcp.operations import contradiction_scan
    from mgcp.operations.claim_search import KeptClaims

    active = await inputs.lessons()
    search = KeptClaims(await store.kept_pairs.load(contradiction_scan.OPERATION))
    findings = await asyncio.to_thread(contradiction_scan.run, active, settings, inputs.cache,
                                       await store.rem.settled(contradiction_scan.OPERATION), search,
                                       await store.outcomes.records())
    inputs.hold_search(contradiction_scan.OPERATION, search.keep)
    return findings, {"lessons": len(active)}, None


RUNNERS = {
    "staleness_scan": _staleness,
    "duplicate_detection": _duplicates,
    "community_detection": _communities,
    "knowledge_extraction": _extraction,
    "context_summary": _summary,
    "pattern_reinforcement": _patterns,
    "contradiction_scan": _contradictions,
}


async def run_on_demand(store: Store, config: RemConfig, project_path: str, operation: str,
                        force: bool = False, progress: Progress | None = None) -> tuple[RemRun | None, str]:
    """Run one operation when it is due (enabled and its schedule reached), or whatever the
    schedule says with `force`. Returns (the run or None, why it ran or was skipped)."""
    check_operations([operation])
    project = await store.queue.project(project_path)
    plan = {p.operation: p for p in schedules(config, project.project_path,
                                              await store.rem.state(project.project_id), project.session_count)}
    item = plan[operation]
    if not force and not item.due:
        why = (f"{operation} is not enabled (rem-config: enabled: false); force runs it anyway" if not item.enabled
               else f"{operation} is not due until session {item.next_due_session} "
                    f"(now {project.session_count}); force runs it anyway")
        return None, why
    result = await run(store, config, project_path, [operation], progress=progress)
    return result, "forced" if force and not item.due else "due"
