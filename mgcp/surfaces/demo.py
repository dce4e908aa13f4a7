"""`mgcp demo`: build a demo database of a fictional project, run a REM cycle, show the findings.

The data (mgcp/demo_data.yaml) is written for this project: a marina-booking web service with a few
dozen lessons and 40+ sessions of notes, todos, decisions and catalogue changes, dated relative to
today so that every operation has something true to find. The demo never touches the user's real
database: by default it writes a new file in the current directory.
"""

import asyncio
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from mgcp.errors import InvalidInputError
from mgcp.surfaces import common

DATA = Path(__file__).resolve().parent.parent / "demo_data.yaml"


def _default_path() -> Path:
    path, n = Path("mgcp-demo.db"), 2
    while path.exists():
        path, n = Path(f"mgcp-demo-{n}.db"), n + 1
    return path


def _ago(now: datetime, days: float) -> str:
    return (now - timedelta(days=days)).isoformat()


async def load(store, data: dict, now: datetime) -> str:
    """Write the demo lessons, links, queries and sessions; returns the project path."""
    from mgcp.models import Lesson, LessonVersion, Relationship, Todo

    links: dict[str, list] = {}
    for rel in data.get("relationships", []):
        for a, b in ((rel["source"], rel["target"]), (rel["target"], rel["source"])):
            links.setdefault(a, []).append(Relationship(target=b, type=rel.get("type", "related")))
    for item in data["lessons"]:
        refinements = item.get("refinements") or []
        created, refined = _ago(now, item["created_days_ago"]), _ago(now, item["last_refined_days_ago"])
        version = len(refinements) + 1
        versions = []
        for k, old in enumerate(refinements, 1):
            # Earlier versions are spread evenly between creation and the last refinement.
            when = item["created_days_ago"] - (item["created_days_ago"] - item["last_refined_days_ago"]) * (k - 1) / version
            versions.append(LessonVersion(
                lesson_id=item["id"], version=k, trigger=item["trigger"], action=old["action"],
                rationale=old.get("rationale"), tags=item.get("tags", []), timestamp=_ago(now, when),
                refinement_reason=old["reason"]))
        versions.append(LessonVersion(lesson_id=item["id"], version=version, trigger=item["trigger"],
                                      action=item["action"], rationale=item.get("rationale"),
                                      tags=item.get("tags", []), timestamp=refined))
        lesson = Lesson(id=item["id"], trigger=item["trigger"], action=item["action"],
                        rationale=item.get("rationale"), version=version, created_at=created,
                        last_refined=refined, usage_count=item.get("usage_count", 0),
                        last_used=_ago(now, 2) if item.get("usage_count") else None,
                        tags=item.get("tags", []), relationships=links.get(item["id"], []),
                        kind=item.get("kind", "pattern"), confidence=item.get("confidence", 0.8))
        await store.lessons.import_with_history(lesson, versions)
    path = data["project"]["path"]
    for query in data.get("queries", []):
        await store.lessons.log_query(query["text"], None, _ago(now, query["days_ago"]))
    catalogue: dict = {}
    for session in data["sessions"]:
        changes = session.get("catalogue_changes") or {}
        if changes:
            catalogue = {k: v for k, v in catalogue.items() if k not in (changes.get("remove") or [])}
            catalogue.update(changes.get("set") or {})
        await store.context.save(
            path, session["session_id"], notes=session.get("notes"),
            todos=[Todo(content=t["content"], status=t.get("status", "pending")) for t in session.get("todos", [])],
            decisions=session.get("decisions") or [], active_files=session.get("active_files") or [],
            catalogue=dict(catalogue), at=_ago(now, session["days_ago"]))
    return path


def run_demo(db: str | None, as_json: bool) -> None:
    import yaml

    from mgcp import engine
    from mgcp.config import OPERATIONS, load_config
    from mgcp.persistence.store import Store
    from mgcp.surfaces import format

    path = Path(db) if db else _default_path()
    if path.exists():
        raise InvalidInputError(f"{path} already exists; the demo builds a new database (choose another --db)")
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    started = time.perf_counter()

    async def main():
        async with Store.open(path) as store:
            async with store.transaction():
                project = await load(store, data, datetime.now(timezone.utc))
            report = await engine.run_cycle(store, load_config(None), project, list(OPERATIONS))
            return project, report, await store.count("lessons"), await store.count("context_history")

    print(f"Building the demo database {path} ...", file=sys.stderr)
    project, report, lessons, snapshots = asyncio.run(main())
    elapsed = time.perf_counter() - started
    if as_json:
        return common.print_json({"database": str(path), "project": project, "lessons": lessons,
                                  "snapshots": snapshots, "report": report, "seconds": round(elapsed, 2)})
    out = sys.stdout.write
    out(f"Demo project '{data['project']['name']}' ({project}): {lessons} lessons, {snapshots} context "
        f"snapshots over {report.session_number} sessions.\n")
    out(f"REM cycle at session {report.session_number}: "
        + ", ".join(f"{o.operation} {o.findings}" + (" (FAILED)" if o.error else "") for o in report.operations)
        + f" finding(s), {report.duration_ms:.0f} ms.\n")
    out("\nFindings, by operation:\n")
    for op in OPERATIONS:
        found = [f for f in report.findings if f.operation == op]
        if found:
            out(f"  {op}\n")
            for f in found:
                out(f"    {f.id}  {f.title}\n")
    summary = next((o for o in report.operations if o.operation == "context_summary"), None)
    if summary and summary.summary.get("to_session"):
        out(f"  context_summary\n    wrote a narrative of sessions {summary.summary['from_session']}"
            f"-{summary.summary['to_session']} (community summaries are written automatically too)\n")
    if report.findings:
        out("\nThis is how review presents each one (the first, in full):\n\n")
        out(format.finding(report.findings[0], 1, len(report.findings)) + "\n\n")
    out(f"Built and analysed in {elapsed:.1f} s. Next:\n"
        f"  mgcp rem review --db {path} --project {project}      # answer them one at a time\n"
        f"  mgcp rem run --auto --dry-run --db {path} --project {project}   # what CI would apply\n"
        f"  mgcp context history --db {path} --project {project} --limit 5\n"
        f"  mgcp recall \"add a refund endpoint for Stripe webhooks\" --db {path} --project {project}"
        f"   # the memory an agent gets for a task\n")
