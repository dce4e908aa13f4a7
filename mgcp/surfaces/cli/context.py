"""`mgcp context save|show|history|at`."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Db, Json, Project, echo, noun, print_json, project_path, with_store

context_app = noun("context", "Save and read a project's context (every save is kept).")


@context_app.command("save")
def save(project: Project = None,
         session_id: Annotated[Optional[str], typer.Option("--session-id")] = None,
         notes: Annotated[Optional[str], typer.Option("--notes")] = None,
         todo: Annotated[Optional[list[str]], typer.Option("--todo", help="A pending todo (repeatable); the todos given replace the list.")] = None,
         done: Annotated[Optional[list[str]], typer.Option("--done", help="A todo now completed, by its exact text (repeatable); the others stay as they are.")] = None,
         decision: Annotated[Optional[list[str]], typer.Option("--decision", help="A decision made (repeatable; appended).")] = None,
         active_file: Annotated[Optional[list[str]], typer.Option("--active-file", help="A file in play (repeatable; replaces the list).")] = None,
         catalogue: Annotated[Optional[str], typer.Option("--catalogue", help="A JSON file with the catalogue, or - for stdin.")] = None,
         db: Db = None, json: Json = False):
    """Save the project's context; a save that changes anything is kept as a history row.

    Example: mgcp context save --project . --notes "Added retries" --todo "write tests" --decision "Use WAL mode"
    """
    from mgcp.models import Todo
    from mgcp.surfaces.common import read_catalogue

    path = project_path(project)
    cat = read_catalogue(catalogue) if catalogue else None
    todos = None if todo is None else [Todo(content=t) for t in todo]
    snap = with_store(db, lambda s: s.context.save(path, session_id, notes, todos, decision, active_file, cat,
                                                   done=done))
    if json:
        return print_json({"saved": snap is not None, "snapshot": snap})
    echo(f"saved session {snap.session_number} of {path}" if snap else "nothing changed; no history row written")


@context_app.command("show")
def show(project: Project = None, db: Db = None, json: Json = False):
    """Show the project's current context.

    Example: mgcp context show --project .
    """
    ctx = with_store(db, lambda s: s.context.get_project(project_path(project)), create=False)
    if json:
        return print_json(ctx)
    from mgcp.surfaces import format

    echo(format.project(ctx))


@context_app.command("history")
def history(project: Project = None,
            limit: Annotated[Optional[int], typer.Option("--limit", min=1, max=1_000_000)] = None,
            db: Db = None, json: Json = False):
    """List the project's saved snapshots, oldest first (the last N with --limit).

    Example: mgcp context history --project . --limit 5
    """
    rows = with_store(db, lambda s: s.context.history(project_path(project), limit), create=False)
    if json:
        return print_json(rows)
    from mgcp.surfaces import format

    echo("\n".join(format.snapshot(r) for r in rows) if rows else "no history")


@context_app.command("at")
def at(session: Annotated[int, typer.Option("--session", min=0, max=2**62, help="Session number.")],
       project: Project = None, db: Db = None, json: Json = False):
    """Show the context at the end of a session, the catalogue rebuilt from history and verified by hash.

    Example: mgcp context at --project . --session 12 --json
    """
    result = with_store(db, lambda s: s.context.at(project_path(project), session), create=False)
    if json:
        return print_json(result)
    from mgcp.surfaces import format

    echo(format.context_at(result))


@context_app.command("diff")
def diff(from_session: Annotated[int, typer.Option("--from", min=0, max=2**62, help="The earlier session.")],
         to_session: Annotated[int, typer.Option("--to", min=0, max=2**62, help="The later session.")],
         project: Project = None, db: Db = None, json: Json = False):
    """Show a unified diff of the project's context at the end of two sessions (catalogue included).

    Example: mgcp context diff --project . --from 3 --to 7
    """
    from mgcp.surfaces.diffs import context_lines, unified

    path = project_path(project)

    async def work(store):
        return await store.context.at(path, from_session), await store.context.at(path, to_session)

    old, new = with_store(db, work, create=False)

    def state(at) -> dict:
        snap = at.snapshot.model_dump(mode="json")
        return {**snap, "catalogue": at.catalogue}

    lines = unified(context_lines(state(old)), context_lines(state(new)),
                    f"session {from_session}", f"session {to_session}")
    if json:
        return print_json({"project_path": path, "from": from_session, "to": to_session, "diff": lines})
    echo("\n".join(lines) if lines else f"nothing changed between session {from_session} and session {to_session}")
