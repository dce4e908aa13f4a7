"""`mgcp rem status|run|report|review|resolve|undo`: the REM consolidation cycle."""

import sys
from typing import Annotated, Optional

import typer

from mgcp.errors import ConflictError, InvalidInputError, MgcpError
from mgcp.surfaces.cli.app import (Config, Db, Json, Project, echo, load_config, noun, note, print_json,
                                   project_path, terminal_safe, with_store)
from mgcp.surfaces.cli.progress import reporter
from mgcp.validation import numeral

PENDING_EXIT = 3  # `rem run --auto --fail-on-pending`: nothing failed, but people have findings to review
rem_app = noun("rem", "The REM consolidation cycle: status, run, review, resolve, undo.")


@rem_app.command("status")
def status(project: Project = None, config: Config = None, db: Db = None, json: Json = False):
    """Show each operation's schedule for the project: last run, next due, due now; and pending findings.

    Example: mgcp rem status --project .
    """
    from mgcp import engine
    from mgcp.surfaces import format

    cfg, path = load_config(config), project_path(project)
    result = with_store(db, lambda s: engine.status(s, cfg, path), create=False)
    if json:
        return print_json(result)
    echo(format.rem_status(result))


@rem_app.command("run")
def run(project: Project = None,
        op: Annotated[Optional[list[str]], typer.Option("--op", help="Run this operation even if not due (repeatable).")] = None,
        auto: Annotated[bool, typer.Option("--auto", help="Apply the recommended option where the policy allows (CI).")] = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="With --auto: show what would be applied, write nothing.")] = False,
        fail_on_pending: Annotated[bool, typer.Option("--fail-on-pending", help=f"With --auto: exit {PENDING_EXIT} when findings are left for people to review.")] = False,
        config: Config = None, db: Db = None, json: Json = False):
    """Run the due REM operations (or the named ones) and store their findings.

    Exit 1 when an operation failed; with --auto --fail-on-pending, 3 when findings are left for people.
    Example: mgcp rem run --project . --op duplicate_detection
    """
    from mgcp import engine
    from mgcp.surfaces import format

    cfg, path = load_config(config), project_path(project)
    engine.check_operations(op)
    if dry_run and not auto:
        raise InvalidInputError("--dry-run goes with --auto")
    if fail_on_pending and not auto:
        raise InvalidInputError("--fail-on-pending goes with --auto")
    with reporter(json) as report:
        result = with_store(db, lambda s: engine.run(s, cfg, path, op, auto, dry_run, progress=report),
                            create=not dry_run)  # a dry run writes nothing: not a new database either
    if json:
        print_json(result)
    else:
        echo(format.rem_run(result))
    if any(o.error for o in result.report.operations):
        raise typer.Exit(1)
    if fail_on_pending and result.left_pending:
        raise typer.Exit(PENDING_EXIT)


@rem_app.command("report")
def report(project: Project = None, db: Db = None, json: Json = False):
    """Show the project's last REM run and every finding waiting for review, without running anything.

    Example: mgcp rem report --json
    """
    from mgcp import engine
    from mgcp.surfaces import format

    result = with_store(db, lambda s: engine.report(s, project_path(project)), create=False)
    if json:
        return print_json(result)
    echo(format.rem_report(result))


def _ask(prompt: str) -> str | None:
    """One line from stdin (None at end of input). Read outside any event loop or transaction, so
    Ctrl-C interrupts it at once and nothing is held while a person thinks."""
    sys.stdout.write(terminal_safe(prompt))
    sys.stdout.flush()
    line = sys.stdin.readline()
    # end of input (Ctrl-D or the pipe ran dry); in a terminal, a line Ctrl-D cut short (no newline)
    # is one the person did not finish: never an answer
    if not line or (not line.endswith("\n") and sys.stdin.isatty()):
        echo()
        return None
    return line.strip()


def _input_for(finding, option) -> tuple[bool, str | None]:
    """(answered, text) for an option that needs input; (False, None) at end of input."""
    if option.multi_select:
        for i, choice in enumerate(option.multi_select, 1):
            echo(f"    {i}. {choice}")
        text = _ask("  Which? (numbers or ids, separated by spaces or commas): ")
        return text is not None, text
    if option.needs_input:
        if option.action == "draft_lesson":
            draft = finding.data.get("draft") or {}
            echo("  Draft lesson:")
            for key in ("id", "trigger", "action", "rationale", "tags"):
                if draft.get(key):
                    echo(f"    {key}: {draft[key]}")
        text = _ask(f"  {option.needs_input}: ")
        return text is not None, text
    return True, None


@rem_app.command("review")
def review(project: Project = None, config: Config = None, db: Db = None):
    """Review pending findings one at a time: pick an option number, s to skip, q to quit.

    Works in a terminal and from a pipe. Example: mgcp rem review --project .
    """
    from mgcp import engine
    from mgcp.surfaces import format

    cfg, path = load_config(config), project_path(project)
    step = with_store(db, lambda s: engine.next_finding(s, path), create=False)
    if step.finding is None:
        return echo("No findings pending review.")
    index, done, skipped = 0, 0, 0

    def stopped() -> None:  # the count as it is now: others may have answered, or undone, meanwhile
        pending = with_store(db, lambda s: engine.next_finding(s, path)).pending
        echo(f"Stopped. {done} applied, {skipped} skipped; {pending} finding(s) still pending.")

    while step.finding is not None:
        finding, index = step.finding, index + 1
        echo()
        echo(format.finding(finding, index, index + step.remaining))
        while True:
            answer = _ask(f"\nChoose 1-{len(finding.options)}, s to skip, q to quit: ")
            if answer is None or answer.lower() in ("q", "quit"):
                return stopped()
            if answer.lower() in ("s", "skip", ""):
                skipped += 1
                break
            if not numeral(answer) or not 1 <= int(answer) <= len(finding.options):
                echo(f"Please answer a number from 1 to {len(finding.options)}, s or q.")
                continue
            option = finding.options[int(answer) - 1]
            if option.needs_input or option.multi_select:  # not asked for text no answer would apply
                now = with_store(db, lambda s: s.rem.get_finding(finding.id))
                if now.status.value != "pending":
                    echo(f"  Not applied: finding {finding.id} was answered meanwhile ({now.status.value})")
                    break
            answered, text = _input_for(finding, option)
            if not answered:
                return stopped()
            try:
                outcome = with_store(db, lambda s: engine.resolve(s, cfg, finding.id, int(answer), text or None,
                                                                  project_path=path))
            except MgcpError as exc:
                echo(f"  Not applied: {exc}")
                if isinstance(exc, InvalidInputError):
                    continue
                break
            echo(f"  -> {outcome.message}")
            if outcome.action == "skip":
                skipped += 1
            else:
                done += 1
            break
        step = with_store(db, lambda s: engine.next_finding(s, path, after=finding.id))
    echo()
    echo(f"Review finished: {done} applied, {skipped} skipped.")


@rem_app.command("resolve")
def resolve(finding_id: Annotated[str, typer.Argument(metavar="FINDING_ID")],
            option: Annotated[int, typer.Option("--option", min=1, max=1000, help="The option number (from 1).")],
            input_text: Annotated[Optional[str], typer.Option("--input", help="Text the option asks for (ids or numbers for a selection).")] = None,
            project: Project = None, config: Config = None, db: Db = None, json: Json = False):
    """Apply one option of a finding of this project (for scripts and agents).

    Example: mgcp rem resolve 3fa2c1d0 --option 1
    """
    from mgcp import engine

    cfg, path = load_config(config), project_path(project)
    outcome = with_store(db, lambda s: engine.resolve(s, cfg, finding_id, option, input_text, project_path=path),
                         create=False)
    if json:
        return print_json(outcome)
    echo(outcome.message)


@rem_app.command("undo")
def undo(finding_id: Annotated[Optional[str], typer.Argument(metavar="[FINDING_ID]")] = None,
         run: Annotated[Optional[int], typer.Option("--run", min=1, max=2**62, help="Undo every action of this run.")] = None,
         force: Annotated[bool, typer.Option("--force", help="If later changes would be overwritten, show them and ask.")] = False,
         yes: Annotated[bool, typer.Option("--yes", help="With --force: overwrite without asking.")] = False,
         project: Annotated[Optional[str], typer.Option("--project", help="Only a finding or run of this project.")] = None,
         db: Db = None, json: Json = False):
    """Undo an applied finding, or every action of a run, restoring exactly what changed.

    Example: mgcp rem undo 3fa2c1d0   |   mgcp rem undo --run 12 --force
    """
    from mgcp import engine

    if (finding_id is None) == (run is None):
        raise InvalidInputError("name a finding id or --run RUN_ID (one of them)")
    if yes and not force:
        raise InvalidInputError("--yes goes with --force")

    path = project_path(project) if project else None

    def undo_it(overwrite: bool, confirmed: list[str] | None = None) -> str:
        return with_store(db, lambda s: engine.undo_finding(s, finding_id, overwrite, confirmed, path) if finding_id
                          else engine.undo_run(s, run, overwrite, confirmed, path), create=False)

    overwritten: list[str] = []
    try:
        message = undo_it(False)
    except ConflictError as exc:
        if not force:
            raise
        overwritten = exc.details
        note("Undoing would overwrite these later changes:")
        for line in overwritten:
            note(f"  - {line}")
        if not yes and (_ask("Overwrite them? [y/N] ") or "").lower() not in ("y", "yes"):
            raise ConflictError("nothing was undone") from None
        message = undo_it(True, overwritten)  # what changed since the list was shown is not overwritten
    if json:
        return print_json({"message": message, "overwritten": overwritten})
    echo(message)


@rem_app.command("show")
def show(finding_id: Annotated[str, typer.Argument(metavar="FINDING_ID")], db: Db = None, json: Json = False):
    """Show one finding whole: its question, options, data, status, the answer given and its recorded actions.

    Example: mgcp rem show 3fa2c1d0
    """
    async def work(store):
        finding = await store.rem.get_finding(finding_id)
        return finding, await store.rem.actions_for(finding_id=finding.id)

    finding, actions = with_store(db, work, create=False)
    if json:
        return print_json({"finding": finding, "actions": actions})
    import json as jsonlib

    from mgcp.surfaces import format

    echo(format.finding(finding))
    echo()
    echo(f"status: {finding.status.value}" + (f", answered with option {finding.chosen_option}" if finding.chosen_option else "")
         + (f" at {finding.resolved_at}" if finding.resolved_at else "") + f"; created {finding.created_at}"
         + (f" by run {finding.run_id}" if finding.run_id else ""))
    if finding.data:
        echo("data: " + jsonlib.dumps(finding.data, indent=2, ensure_ascii=False, sort_keys=True))
    for action in actions:
        changes = action.get("changes") or []
        echo(f"action {action['id']}: {action['action']} at {action['applied_at']}" + (" (auto)" if action.get("auto") else "")
             + (f", undone at {action['undone_at']}" if action.get("undone_at") else "")
             + f"; {len(changes)} row change(s): "
             + ", ".join(f"{c['table']} {'/'.join(str(v) for v in c['key'].values())}" for c in changes))
