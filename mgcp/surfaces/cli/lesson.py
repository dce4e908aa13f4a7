"""`mgcp lesson add|refine|show|history|list|link|query|outcome`."""

from typing import Annotated, Optional

import typer

from mgcp.errors import InvalidInputError
from mgcp.surfaces.cli.app import (Config, Db, Json, Project, echo, load_config, noun, note, print_json, project_path,
                                   with_store)

lesson_app = noun("lesson", "Add, refine, find and link lessons (every version is kept).")
LessonId = Annotated[str, typer.Argument(metavar="ID")]
SessionId = Annotated[Optional[str], typer.Option("--session-id", help="The agent session this change belongs to.")]
Kind = Annotated[Optional[str], typer.Option("--kind", help="constraint, preference, architecture, pattern (default), "
                                             "error_solution, project_fact, style or decision.")]
Confidence = Annotated[Optional[float], typer.Option("--confidence", help="How sure, from 0 to 1 (default 0.8; "
                                                     "below 0.5 is speculative).")]


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
        kind: Kind = None, confidence: Confidence = None,
        session_id: SessionId = None, db: Db = None, json: Json = False):
    """Add a lesson (version 1); the same text twice gives the existing lesson back.

    Example: mgcp lesson add verify-api --trigger "calling an unfamiliar API" --action "Read its signature first" --tag api
    """
    from mgcp.engine.lessons import add_lesson
    from mgcp.surfaces.cli.app import load_config

    config = load_config(None)
    result = with_store(db, lambda s: add_lesson(s, config, lesson_id, trigger, action, rationale, tag or [],
                                                 parent, session_id, kind, confidence))
    if json:
        return print_json(result.to_dict())
    from mgcp.surfaces import format

    echo(format.lesson(result.lesson))
    note(result.message)


@lesson_app.command("refine")
def refine(lesson_id: LessonId,
           reason: Annotated[str, typer.Option("--reason", help="Why the current version is insufficient.")],
           trigger: Annotated[Optional[str], typer.Option("--trigger")] = None,
           action: Annotated[Optional[str], typer.Option("--action")] = None,
           rationale: Annotated[Optional[str], typer.Option("--rationale")] = None,
           tag: Annotated[Optional[list[str]], typer.Option("--tag", help="Replaces the tags (repeatable).")] = None,
           kind: Kind = None, confidence: Confidence = None,
           session_id: SessionId = None, db: Db = None, json: Json = False):
    """Refine a lesson into a new version; the old version stays in history.

    Example: mgcp lesson refine verify-api --action "Read the signature and one example" --reason "too vague"
    """
    from mgcp.engine.lessons import refine_lesson

    _print(with_store(db, lambda s: refine_lesson(
        s, lesson_id, reason, trigger, action, rationale, tag, session_id, kind, confidence), create=False), json)


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

    if not versions:  # only a database damaged or changed by hand (`db check` names it)
        return note(f"{lesson_id} has no versions recorded; `mgcp db check` says why and what it can repair")
    echo("\n\n".join(format.version(v) for v in versions))


@lesson_app.command("list")
def list_(tag: Annotated[Optional[str], typer.Option("--tag")] = None,
          status: Annotated[str, typer.Option("--status", help="active, archived, deleted, superseded or all.")] = "active",
          tier: Annotated[Optional[str], typer.Option("--tier", help="candidate, validated or archived "
                                                      "(archived implies --status archived).")] = None,
          kind: Kind = None,
          db: Db = None, json: Json = False):
    """List lessons.

    Example: mgcp lesson list --tag testing --tier validated
    """
    from mgcp.models import LessonStatus
    from mgcp.quality import KINDS
    from mgcp.ranking import TIERS

    allowed = [s.value for s in LessonStatus] + ["all"]
    if status not in allowed:
        raise InvalidInputError(f"unknown status {status!r}; allowed: {', '.join(allowed)}")
    if tier is not None and tier not in TIERS:
        raise InvalidInputError(f"unknown tier {tier!r}; allowed: {', '.join(TIERS)}")
    if kind is not None and kind not in KINDS:
        raise InvalidInputError(f"unknown kind {kind!r}; allowed: {', '.join(KINDS)}")
    if tier == "archived" and status == "active":
        status = "archived"
    lessons = with_store(db, lambda s: s.lessons.list(tag, None if status == "all" else status), create=False)
    lessons = [lesson for lesson in lessons if (tier is None or lesson.tier == tier)
               and (kind is None or lesson.kind == kind)]
    if json:
        return print_json(lessons)
    for lesson in lessons:
        echo(f"{lesson.id:40} v{lesson.version:<3} {lesson.status.value:10} {lesson.tier:9} "
             f"{lesson.kind:14} {lesson.trigger[:60]}")
    note(f"{len(lessons)} lesson(s)")



@lesson_app.command("link")
def link(source: Annotated[str, typer.Argument(metavar="A")],
         target: Annotated[str, typer.Argument(metavar="B")],
         rel_type: Annotated[str, typer.Option("--type", help="The relationship: related, prerequisite, "
                                               "sequence_next, alternative, complements, specializes, "
                                               "generalizes, contradicts or child_of.")] = "related",
         db: Db = None, json: Json = False):
    """Link two lessons (both directions, as the legacy format stores them). Two lessons already
    linked keep one link: its type becomes the one given.

    Example: mgcp lesson link verify-api check-signatures --type complements
    """
    from mgcp.models import RelationshipType

    allowed = [t.value for t in RelationshipType]
    if rel_type not in allowed:
        raise InvalidInputError(f"unknown relationship type {rel_type!r}; allowed: {', '.join(allowed)}")
    added, previous = with_store(db, lambda s: s.lessons.relate(source, target, rel_type), create=False)
    if json:
        return print_json({"source": source, "target": target, "type": rel_type, "added": added,
                           "changed_from": previous})
    if added:
        echo(f"linked {source} <-> {target} ({rel_type})")
    elif previous:
        echo(f"the link {source} <-> {target} was {previous}; it is now {rel_type}")
    else:
        echo(f"{source} and {target} were already linked ({rel_type})")


@lesson_app.command("query")
def query(text: Annotated[str, typer.Argument(metavar="TEXT")],
          limit: Annotated[int, typer.Option("--limit", min=1, max=100)] = 5,
          explain: Annotated[bool, typer.Option("--explain", help="Show each result's score parts.")] = False,
          project: Project = None, config: Config = None, db: Db = None, json: Json = False):
    """Find the lessons most relevant to a situation, ranked by relevance, confidence, use and success
    (counts as a retrieval; the query is logged).

    Example: mgcp lesson query "writing a database migration" --limit 3 --explain
    """
    from mgcp.surfaces.cli.app import load_config

    path = project_path(project)
    cfg = load_config(config)
    weights = cfg.ranking
    results = with_store(db, lambda s: s.ranked(text, limit, path, weights, cfg.reinforcement), create=False)
    if json:
        return print_json([{"score": round(score, 4), **({"score_parts": parts} if explain else {}),
                            **lesson.model_dump(mode="json")} for lesson, score, parts in results])
    from mgcp.surfaces import format

    echo("\n\n".join(f"score {score:.2f}  " + format.lesson(lesson)
                      + (("\n" + format.score_parts(parts, weights)) if explain else "")
                      for lesson, score, parts in results)
         if results else "no matching lessons")


@lesson_app.command("diff")
def diff(lesson_id: LessonId,
         versions: Annotated[Optional[list[int]], typer.Argument(metavar="[V1 V2]", help="Two versions (default: the last two).")] = None,
         db: Db = None, json: Json = False):
    """Show a unified diff of two versions of a lesson (default: the last two).

    Example: mgcp lesson diff verify-api 1 3
    """
    from mgcp.surfaces.diffs import unified, version_lines

    if versions is not None and len(versions) != 2:
        raise InvalidInputError("give two version numbers (V1 V2), or none for the last two")
    history = with_store(db, lambda s: s.lessons.versions(lesson_id), create=False)
    by_number = {v.version: v for v in history}
    if versions is None:
        if len(history) < 2:
            raise InvalidInputError(f"lesson {lesson_id} has only version {history[-1].version}; nothing to compare")
        old, new = history[-2], history[-1]
    else:
        missing = [n for n in versions if n not in by_number]
        if missing:
            raise InvalidInputError(f"lesson {lesson_id} has no version {missing[0]} (versions 1..{history[-1].version})")
        old, new = by_number[versions[0]], by_number[versions[1]]
    lines = unified(version_lines(old), version_lines(new), f"{lesson_id} v{old.version}", f"{lesson_id} v{new.version}")
    if json:
        return print_json({"lesson_id": lesson_id, "from": old.version, "to": new.version,
                           "reason": old.refinement_reason if new.version == old.version + 1 else None, "diff": lines})
    echo("\n".join(lines) if lines else f"v{old.version} and v{new.version} have the same text")


def _set_status(lesson_id: str, status: str, reason: Optional[str], db, json: bool, verb: str) -> None:
    from mgcp.models import LessonStatus

    async def work(store):
        async with store.transaction():
            before = (await store.lessons.get(lesson_id)).status.value
            if before != status:
                await store.lessons.set_lifecycle(lesson_id, LessonStatus(status), reason=reason)
            return before

    before = with_store(db, work, create=False)
    if json:
        return print_json({"lesson_id": lesson_id, "status": status, "previous_status": before, "changed": before != status})
    echo(f"{lesson_id} was already {status}" if before == status else f"{verb} {lesson_id} (was {before})")


Reason = Annotated[Optional[str], typer.Option("--reason", help="Why (kept with the lesson's lifecycle).")]


@lesson_app.command("archive")
def archive(lesson_id: LessonId, reason: Reason = None, db: Db = None, json: Json = False):
    """Archive a lesson: out of queries and REM, kept with its whole history (undo: mgcp lesson restore).

    Example: mgcp lesson archive old-deploy-steps --reason "we moved to containers"
    """
    _set_status(lesson_id, "archived", reason, db, json, "archived")


@lesson_app.command("restore")
def restore(lesson_id: LessonId, reason: Reason = None, db: Db = None, json: Json = False):
    """Make an archived, deleted or superseded lesson active again.

    Example: mgcp lesson restore old-deploy-steps
    """
    _set_status(lesson_id, "active", reason, db, json, "restored")


@lesson_app.command("unlink")
def unlink(source: Annotated[str, typer.Argument(metavar="A")],
           target: Annotated[str, typer.Argument(metavar="B")],
           db: Db = None, json: Json = False):
    """Remove the link between two lessons (both directions; undo: mgcp lesson link A B --type TYPE).

    Example: mgcp lesson unlink verify-api read-the-tests
    """
    removed = with_store(db, lambda s: s.lessons.unlink(source, target), create=False)
    if json:
        return print_json({"source": source, "target": target, "removed": removed})
    echo(f"unlinked {source} <-> {target} ({', '.join(removed)})" if removed else f"{source} and {target} were not linked")


@lesson_app.command("outcome")
def outcome(lesson_id: LessonId,
            helped: Annotated[bool, typer.Option("--helped", help="Applying the lesson helped.")] = False,
            failed: Annotated[bool, typer.Option("--failed", help="Applying the lesson did not help.")] = False,
            text: Annotated[Optional[str], typer.Option("--note", help="What happened.")] = None,
            project: Project = None, session_id: SessionId = None, db: Db = None, json: Json = False):
    """Report whether a lesson helped; failures in a row raise a finding (refine, archive, keep).

    Example: mgcp lesson outcome verify-api --failed --note "the signature was out of date"
    """
    from mgcp.engine.outcomes import record_outcome
    from mgcp.surfaces.cli.app import load_config

    if helped == failed:
        raise InvalidInputError("give exactly one of --helped and --failed")
    config = load_config(None)
    path = project_path(project)
    result = with_store(db, lambda s: record_outcome(s, config, lesson_id, helped, text, session_id, path),
                        create=False)
    if json:
        return print_json(result)
    from mgcp.surfaces import format

    echo(format.outcome(result))
