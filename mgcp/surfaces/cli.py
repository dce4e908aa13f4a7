"""The `mgcp` command line: a thin skin over the store and the engine.

One sub-app per noun, verbs as commands. Results go to stdout (`--json`: one document), progress
and logs to stderr. Domain errors (MgcpError) become `Error: ...` with exit code 1 (an operational
failure) or 2 (bad usage or bad input) here, in `main`, and nowhere else. Heavy modules are imported
inside commands so that cheap commands start fast.
"""


import sys
from typing import Annotated, Optional

import typer

from mgcp.errors import InvalidInputError, MgcpError
from mgcp.surfaces import common

app = typer.Typer(help="mgcp: versioned lessons and project context for coding agents, with REM consolidation.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
db_app = typer.Typer(help="Create, upgrade and inspect the database.", no_args_is_help=True)
lesson_app = typer.Typer(help="Add, refine, find and link lessons (every version is kept).", no_args_is_help=True)
context_app = typer.Typer(help="Save and read a project's context (every save is kept).", no_args_is_help=True)
export_app = typer.Typer(help="Export training data from lesson history.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(lesson_app, name="lesson")
app.add_typer(context_app, name="context")
app.add_typer(export_app, name="export")

Db = Annotated[Optional[str], typer.Option("--db", help="Database file (default: $MGCP_DB, $MGCP_DATA_DIR/lessons.db, ~/.mgcp/lessons.db).")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
Project = Annotated[Optional[str], typer.Option("--project", help="Project path (default: the current directory); need not exist.")]


def echo(text: str = "") -> None:
    sys.stdout.write(text + "\n")


# -- db -------------------------------------------------------------------------------------------

@db_app.command("migrate")
def db_migrate(db: Db = None, json: Json = False):
    """Create or upgrade the database (idempotent; never alters legacy tables or rows).

    Example: mgcp db migrate --db ~/.mgcp/lessons.db
    """
    from mgcp.config import db_path
    from mgcp.persistence import migrate

    path = db_path(db)
    report = migrate.open_and_migrate(path)
    result = {"database": str(path), "applied": report.applied, "failures": report.failures,
              **migrate.status(path)}
    if json:
        return common.print_json(result)
    echo(f"{path}: applied {len(report.applied)} migration(s)" + (": " + ", ".join(report.applied) if report.applied else ""))
    for name, failures in report.failures.items():
        for failure in failures:
            print(f"warning: {name} skipped {failure}; it stays pending and is retried", file=sys.stderr)
    echo(f"{len(result['applied'])} applied, {len(result['pending'])} pending")


@db_app.command("status")
def db_status(db: Db = None, json: Json = False):
    """List applied and pending migrations and row counts (read-only).

    Example: mgcp db status --json
    """
    from mgcp.config import db_path
    from mgcp.persistence import migrate

    path = db_path(db)
    result = {"database": str(path), **migrate.status(path)}
    if json:
        return common.print_json(result)
    echo(f"database: {path}")
    echo(f"applied migrations ({len(result['applied'])}):")
    for m in result["applied"]:
        echo(f"  {m['name']:36} {m['applied_at']}")
    echo(f"pending migrations ({len(result['pending'])}):" + ("" if result["pending"] else " none"))
    for name in result["pending"]:
        echo(f"  {name}")
    echo("tables:")
    for table, count in result["tables"].items():
        echo(f"  {table:28} {count:>9} row(s)")


# -- lesson ---------------------------------------------------------------------------------------

@lesson_app.command("add")
def lesson_add(lesson_id: Annotated[str, typer.Argument(metavar="ID")],
               trigger: Annotated[str, typer.Option("--trigger", help="When the lesson applies (keywords agents search for).")],
               action: Annotated[str, typer.Option("--action", help="What to do.")],
               rationale: Annotated[Optional[str], typer.Option("--rationale", help="Why.")] = None,
               tag: Annotated[Optional[list[str]], typer.Option("--tag", help="A tag (repeatable).")] = None,
               parent: Annotated[Optional[str], typer.Option("--parent", help="Parent lesson id.")] = None,
               session_id: Annotated[Optional[str], typer.Option("--session-id")] = None,
               db: Db = None, json: Json = False):
    """Add a lesson (version 1).

    Example: mgcp lesson add verify-api --trigger "calling an unfamiliar API" --action "Read its signature first" --tag api
    """
    lesson = common.with_store(db, lambda s: s.add_lesson(
        lesson_id, trigger, action, rationale, tag or [], parent, session_id=session_id))
    _print_lesson(lesson, json)


@lesson_app.command("refine")
def lesson_refine(lesson_id: Annotated[str, typer.Argument(metavar="ID")],
                  reason: Annotated[str, typer.Option("--reason", help="Why the current version is insufficient.")],
                  trigger: Annotated[Optional[str], typer.Option("--trigger")] = None,
                  action: Annotated[Optional[str], typer.Option("--action")] = None,
                  rationale: Annotated[Optional[str], typer.Option("--rationale")] = None,
                  tag: Annotated[Optional[list[str]], typer.Option("--tag", help="Replaces the tags (repeatable).")] = None,
                  session_id: Annotated[Optional[str], typer.Option("--session-id")] = None,
                  db: Db = None, json: Json = False):
    """Refine a lesson into a new version; the old version stays in history.

    Example: mgcp lesson refine verify-api --action "Read the signature and one example" --reason "too vague"
    """
    lesson = common.with_store(db, lambda s: s.refine_lesson(
        lesson_id, reason, trigger, action, rationale, tag, session_id))
    _print_lesson(lesson, json)


@lesson_app.command("show")
def lesson_show(lesson_id: Annotated[str, typer.Argument(metavar="ID")], db: Db = None, json: Json = False):
    """Show a lesson as it is now.

    Example: mgcp lesson show verify-api
    """
    _print_lesson(common.with_store(db, lambda s: s.get_lesson(lesson_id)), json)


def _print_lesson(lesson, json: bool) -> None:
    if json:
        return common.print_json(lesson)
    from mgcp.surfaces import format

    echo(format.lesson(lesson))


@lesson_app.command("history")
def lesson_history(lesson_id: Annotated[str, typer.Argument(metavar="ID")], db: Db = None, json: Json = False):
    """Show every version of a lesson, oldest first, with the reason for each refinement.

    Example: mgcp lesson history verify-api
    """
    versions = common.with_store(db, lambda s: s.lesson_versions(lesson_id))
    if json:
        return common.print_json(versions)
    from mgcp.surfaces import format

    echo("\n\n".join(format.version(v) for v in versions))


@lesson_app.command("list")
def lesson_list(tag: Annotated[Optional[str], typer.Option("--tag")] = None,
                status: Annotated[str, typer.Option("--status", help="active, archived, deleted, superseded or all.")] = "active",
                db: Db = None, json: Json = False):
    """List lessons.

    Example: mgcp lesson list --tag testing
    """
    allowed = ("active", "archived", "deleted", "superseded", "all")
    if status not in allowed:
        raise InvalidInputError(f"unknown status {status!r}; allowed: {', '.join(allowed)}")
    lessons = common.with_store(db, lambda s: s.list_lessons(tag, None if status == "all" else status))
    if json:
        return common.print_json(lessons)
    for lesson in lessons:
        echo(f"{lesson.id:40} v{lesson.version:<3} {lesson.status.value:10} {lesson.trigger[:70]}")
    print(f"{len(lessons)} lesson(s)", file=sys.stderr)


@lesson_app.command("link")
def lesson_link(source: Annotated[str, typer.Argument(metavar="A")],
                target: Annotated[str, typer.Argument(metavar="B")],
                rel_type: Annotated[str, typer.Option("--type", help="related, prerequisite, sequence_next, alternative, complements, specializes, generalizes, contradicts")] = "related",
                db: Db = None, json: Json = False):
    """Link two lessons (both directions, as the legacy format stores them).

    Example: mgcp lesson link verify-api check-signatures --type complements
    """
    types = ("related", "prerequisite", "sequence_next", "alternative", "complements", "specializes",
             "generalizes", "contradicts", "child_of")
    if rel_type not in types:
        raise InvalidInputError(f"unknown relationship type {rel_type!r}; allowed: {', '.join(types)}")
    added = common.with_store(db, lambda s: s.link_lessons(source, target, rel_type))
    if json:
        return common.print_json({"source": source, "target": target, "type": rel_type, "added": added})
    echo(f"linked {source} <-> {target} ({rel_type})" if added else f"{source} and {target} were already linked")


@lesson_app.command("query")
def lesson_query(text: Annotated[str, typer.Argument(metavar="TEXT")],
                 limit: Annotated[int, typer.Option("--limit", min=1, max=100)] = 5,
                 project: Project = None, db: Db = None, json: Json = False):
    """Find the lessons most relevant to a situation (counts as a retrieval; the query is logged).

    Example: mgcp lesson query "writing a database migration" --limit 3
    """
    path = common.project_path(project)

    async def work(store):
        proj = await store.find_project(path)
        return await store.query_lessons(text, limit, proj.project_id if proj else None)

    results = common.with_store(db, work)
    if json:
        return common.print_json([{"score": round(score, 4), **lesson.model_dump(mode="json")} for lesson, score in results])
    from mgcp.surfaces import format

    echo("\n\n".join(format.lesson(lesson) for lesson, _ in results) if results else "no matching lessons")


# -- context --------------------------------------------------------------------------------------

@context_app.command("save")
def context_save(project: Project = None,
                 session_id: Annotated[Optional[str], typer.Option("--session-id")] = None,
                 notes: Annotated[Optional[str], typer.Option("--notes")] = None,
                 todo: Annotated[Optional[list[str]], typer.Option("--todo", help="A pending todo (repeatable); the todos given replace the list.")] = None,
                 done: Annotated[Optional[list[str]], typer.Option("--done", help="A completed todo (repeatable).")] = None,
                 decision: Annotated[Optional[list[str]], typer.Option("--decision", help="A decision made (repeatable; appended).")] = None,
                 active_file: Annotated[Optional[list[str]], typer.Option("--active-file", help="A file in play (repeatable; replaces the list).")] = None,
                 catalogue: Annotated[Optional[str], typer.Option("--catalogue", help="A JSON file with the catalogue, or - for stdin.")] = None,
                 db: Db = None, json: Json = False):
    """Save the project's context; a save that changes anything is kept as a history row.

    Example: mgcp context save --project . --notes "Added retries" --todo "write tests" --decision "Use WAL mode"
    """
    from mgcp.models import Todo

    path = common.project_path(project)
    cat = common.read_catalogue(catalogue) if catalogue else None
    todos = None
    if todo is not None or done is not None:
        todos = [Todo(content=t) for t in todo or []] + [Todo(content=t, status="completed") for t in done or []]
    snap = common.with_store(db, lambda s: s.save_context(path, session_id, notes, todos, decision, active_file, cat))
    if json:
        return common.print_json({"saved": snap is not None, "snapshot": snap})
    echo(f"saved session {snap.session_number} of {path}" if snap else "nothing changed; no history row written")


@context_app.command("show")
def context_show(project: Project = None, db: Db = None, json: Json = False):
    """Show the project's current context.

    Example: mgcp context show --project .
    """
    path = common.project_path(project)
    ctx = common.with_store(db, lambda s: s.get_project(path))
    if json:
        return common.print_json(ctx)
    echo(f"{ctx.project_name}  ({ctx.project_path}, project {ctx.project_id}, session {ctx.session_count})")
    if ctx.notes:
        echo(f"notes: {ctx.notes}")
    for t in ctx.todos:
        echo(f"  [{'x' if t.status == 'completed' else ' '}] {t.content}")
    if ctx.recent_decisions:
        echo("recent decisions:")
        for d in ctx.recent_decisions:
            echo(f"  - {d}")
    if ctx.active_files:
        echo("active files: " + ", ".join(ctx.active_files))
    if ctx.catalogue:
        echo("catalogue keys: " + ", ".join(sorted(ctx.catalogue)))


@context_app.command("history")
def context_history(project: Project = None,
                    limit: Annotated[Optional[int], typer.Option("--limit", min=1)] = None,
                    db: Db = None, json: Json = False):
    """List the project's saved snapshots, oldest first (the last N with --limit).

    Example: mgcp context history --project . --limit 5
    """
    path = common.project_path(project)
    rows = common.with_store(db, lambda s: s.context_history(path, limit))
    if json:
        return common.print_json(rows)
    from mgcp.surfaces import format

    echo("\n".join(format.snapshot(r) for r in rows) if rows else "no history")


@context_app.command("at")
def context_at(session: Annotated[int, typer.Option("--session", min=0, help="Session number.")],
               project: Project = None, db: Db = None, json: Json = False):
    """Show the context as of a session, the catalogue rebuilt from history and verified by hash.

    Example: mgcp context at --project . --session 12 --json
    """
    path = common.project_path(project)
    snap, catalogue = common.with_store(db, lambda s: s.context_at(path, session))
    result = {"session": session, "snapshot_session": snap.session_number, "verified": True,
              "notes": snap.notes, "todos": snap.todos, "active_files": snap.active_files,
              "recent_decisions": snap.recent_decisions, "catalogue": catalogue,
              "catalogue_hash": snap.catalogue_hash}
    if json:
        return common.print_json(result)
    import json as jsonlib

    from mgcp.surfaces import format

    echo(format.snapshot(snap))
    echo("catalogue (verified against its hash):")
    echo(jsonlib.dumps(catalogue, indent=2, sort_keys=True, ensure_ascii=False))


# -- export ---------------------------------------------------------------------------------------

@export_app.command("dpo")
def export_dpo(out: Annotated[Optional[str], typer.Option("--out", help="Output file (default: stdout).")] = None,
               db: Db = None):
    """Write one JSONL record per pair of consecutive real lesson versions (for DPO training).

    Example: mgcp export dpo --out lessons-dpo.jsonl
    """
    from mgcp.export import dpo_records
    import json as jsonlib

    pairs = common.with_store(db, lambda s: s.all_real_version_pairs())
    records = dpo_records(pairs)
    lines = "".join(jsonlib.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(lines)
        print(f"wrote {len(records)} record(s) to {out}", file=sys.stderr)
    else:
        sys.stdout.write(lines)


def main() -> None:
    from mgcp.surfaces import cli_rem  # noqa: F401  (registers the rem, init, serve, demo commands)

    try:
        code = app(standalone_mode=False)
    except MgcpError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        print("Interrupted.", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as exc:  # bad usage: one line, exit code 2, as for bad input
        message = exc.format_message()
        if message:  # (no message: a bare `mgcp lesson`, whose help was just printed)
            where = exc.ctx.command_path if getattr(exc, "ctx", None) else "mgcp"
            print(f"Error: {message} (see `{where} --help`)", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
