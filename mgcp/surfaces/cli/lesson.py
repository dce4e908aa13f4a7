"""`mgcp lesson add|refine|show|history|list|link|query`."""

from typing import Annotated, Optional

import typer

from mgcp.errors import InvalidInputError
from mgcp.surfaces.cli.app import (Config, Db, Json, Project, echo, load_config, noun, note, print_json, project_path,
                                   with_store)

lesson_app = noun("lesson", "Add, refine, find and link lessons (every version is kept).")
LessonId = Annotated[str, typer.Argument(metavar="ID")]
SessionId = Annotated[Optional[str], typer.Option("--session-id", help="The agent session this change belongs to.")]


def _print(lesson, json: bool) -> None:
    if json:
        return print_json(lesson)
    from mgcp.surfaces import format

    echo(format.lesson(lesson))


@lesson_app.command("add")
def add(lesson_id: LessonId,
        trigger: Annotated[str, typer.Option("--trigger", help="When the lesson applies (keywords agents search for).")],
        action: Annotated[str, typer.Option("--action", help="What to do.")],
        rationale: Annotated[Optional[str], typer.Option("--rationale", help="Why.")] = None,
        tag: Annotated[Optional[list[str]], typer.Option("--tag", help="A tag (repeatable).")] = None,
        parent: Annotated[Optional[str], typer.Option("--parent", help="Parent lesson id.")] = None,
        session_id: SessionId = None, db: Db = None, json: Json = False):
    """Add a lesson (version 1).

    Example: mgcp lesson add verify-api --trigger "calling an unfamiliar API" --action "Read its signature first" --tag api
    """
    _print(with_store(db, lambda s: s.lessons.add(
        lesson_id, trigger, action, rationale, tag or [], parent, session_id=session_id)), json)


@lesson_app.command("refine")
def refine(lesson_id: LessonId,
           reason: Annotated[str, typer.Option("--reason", help="Why the current version is insufficient.")],
           trigger: Annotated[Optional[str], typer.Option("--trigger")] = None,
           action: Annotated[Optional[str], typer.Option("--action")] = None,
           rationale: Annotated[Optional[str], typer.Option("--rationale")] = None,
           tag: Annotated[Optional[list[str]], typer.Option("--tag", help="Replaces the tags (repeatable).")] = None,
           session_id: SessionId = None, db: Db = None, json: Json = False):
    """Refine a lesson into a new version; the old version stays in history.

    Example: mgcp lesson refine verify-api --action "Read the signature and one example" --reason "too vague"
    """
    _print(with_store(db, lambda s: s.lessons.refine(
        lesson_id, reason, trigger, action, rationale, tag, session_id), create=False), json)


@lesson_app.command("show")
def show(lesson_id: LessonId, db: Db = None, json: Json = False):
    """Show a lesson as it is now.

    Example: mgcp lesson show verify-api
    """
    _print(with_store(db, lambda s: s.lessons.get(lesson_id), create=False), json)


@lesson_app.command("history")
def history(lesson_id: LessonId, db: Db = None, json: Json = False):
    """Show every version of a lesson, oldest first, with the reason for each refinement.

    Example: mgcp lesson history verify-api
    """
    versions = with_store(db, lambda s: s.lessons.versions(lesson_id), create=False)
    if json:
        return print_json(versions)
    from mgcp.surfaces import format

    echo("\n\n".join(format.version(v) for v in versions))


@lesson_app.command("list")
def list_(tag: Annotated[Optional[str], typer.Option("--tag")] = None,
          status: Annotated[str, typer.Option("--status", help="active, archived, deleted, superseded or all.")] = "active",
          db: Db = None, json: Json = False):
    """List lessons.

    Example: mgcp lesson list --tag testing
    """
    from mgcp.models import LessonStatus

    allowed = [s.value for s in LessonStatus] + ["all"]
    if status not in allowed:
        raise InvalidInputError(f"unknown status {status!r}; allowed: {', '.join(allowed)}")
    lessons = with_store(db, lambda s: s.lessons.list(tag, None if status == "all" else status), create=False)
    if json:
        return print_json(lessons)
    for lesson in lessons:
        echo(f"{lesson.id:40} v{lesson.version:<3} {lesson.status.value:10} {lesson.trigger[:70]}")
    note(f"{len(lessons)} lesson(s)")



@lesson_app.command("link")
def link(source: Annotated[str, typer.Argument(metavar="A")],
         target: Annotated[str, typer.Argument(metavar="B")],
         rel_type: Annotated[str, typer.Option("--type", help="The relationship: related, prerequisite, "
                                               "sequence_next, alternative, complements, specializes, "
                                               "generalizes, contradicts or child_of.")] = "related",
         db: Db = None, json: Json = False):
    """Link two lessons (both directions, as the legacy format stores them).

    Example: mgcp lesson link verify-api check-signatures --type complements
    """
    from mgcp.models import RelationshipType

    allowed = [t.value for t in RelationshipType]
    if rel_type not in allowed:
        raise InvalidInputError(f"unknown relationship type {rel_type!r}; allowed: {', '.join(allowed)}")
    added = with_store(db, lambda s: s.lessons.link(source, target, rel_type), create=False)
    if json:
        return print_json({"source": source, "target": target, "type": rel_type, "added": added})
    echo(f"linked {source} <-> {target} ({rel_type})" if added else f"{source} and {target} were already linked")


@lesson_app.command("query")
def query(text: Annotated[str, typer.Argument(metavar="TEXT")],
          limit: Annotated[int, typer.Option("--limit", min=1, max=100)] = 5,
          explain: Annotated[bool, typer.Option("--explain", help="Show each score's parts.")] = False,
          project: Project = None, config: Config = None, db: Db = None, json: Json = False):
    """Find the lessons most relevant to a situation (counts as a retrieval; the query is logged).

    Example: mgcp lesson query "writing a database migration" --limit 3
    """
    path = project_path(project)
    reinforcement = load_config(config).reinforcement
    results = with_store(db, lambda s: s.ranked(text, limit, path, reinforcement), create=False)
    if json:
        return print_json([{"score": round(sum(parts.values()), 4), **lesson.model_dump(mode="json"),
                            **({"score_parts": {k: round(v, 4) for k, v in parts.items()}} if explain else {})}
                           for lesson, parts in results])
    from mgcp.surfaces import format

    def head(parts: dict) -> str:
        total = f"score {sum(parts.values()):.2f}"
        if not explain:
            return total
        return total + " = " + " + ".join(f"{name} {value:.2f}" for name, value in parts.items())

    echo("\n\n".join(head(parts) + "  " + format.lesson(lesson) for lesson, parts in results)
         if results else "no matching lessons")
