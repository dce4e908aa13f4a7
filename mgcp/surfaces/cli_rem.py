"""The `mgcp rem ...` commands, interactive review, and the `init`, `serve` and `demo` commands."""


import sys
from typing import Annotated, Optional

import typer

from mgcp.errors import InvalidInputError, MgcpError
from mgcp.surfaces import common
from mgcp.surfaces.cli import Db, Json, Project, app, echo

rem_app = typer.Typer(help="The REM consolidation cycle: status, run, review, resolve, undo.", no_args_is_help=True)
app.add_typer(rem_app, name="rem")

Config = Annotated[Optional[str], typer.Option("--config", help="rem-config.yaml to use (default: $MGCP_REM_CONFIG, the data dir's, else built-in defaults).")]


def _config(path: str | None):
    from mgcp.config import load_config

    return load_config(path)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@rem_app.command("status")
def rem_status(project: Project = None, config: Config = None, db: Db = None, json: Json = False):
    """Show each operation's schedule for the project: last run, next due, due now; and pending findings.

    Example: mgcp rem status --project .
    """
    from mgcp import engine
    from mgcp.surfaces import format

    cfg, path = _config(config), common.project_path(project)
    result = common.with_store(db, lambda s: engine.status(s, cfg, path))
    if json:
        return common.print_json(result)
    echo(format.rem_status(result))


@rem_app.command("run")
def rem_run(project: Project = None,
            op: Annotated[Optional[list[str]], typer.Option("--op", help="Run this operation even if not due (repeatable).")] = None,
            auto: Annotated[bool, typer.Option("--auto", help="Apply the recommended option where the policy allows (CI).")] = False,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="With --auto: show what would be applied, write nothing.")] = False,
            config: Config = None, db: Db = None, json: Json = False):
    """Run the due REM operations (or the named ones) and store their findings.

    Example: mgcp rem run --project . --op duplicate_detection
    """
    from mgcp import engine

    cfg, path = _config(config), common.project_path(project)
    engine.check_operations(op)
    if dry_run and not auto:
        raise InvalidInputError("--dry-run goes with --auto")

    async def work(store):
        async def cycle():
            rep = await engine.run_cycle(store, cfg, path, op, progress=_progress, auto=auto)
            if not auto:
                return rep, [], []
            pending = await engine.pending_findings(store, path)
            return rep, *(await engine.apply_auto(store, cfg, path, pending))

        if not dry_run:
            return await cycle()
        async with store.preview():  # everything is rolled back: a dry run writes nothing
            return await cycle()

    report, applied, left = common.with_store(db, work)
    failed = [o for o in (report.operations if report else []) if o.error]
    if json:
        common.print_json({"report": report, "auto": auto, "dry_run": dry_run,
                           "applied": applied, "left_pending": left})
    else:
        _print_run(report, auto, dry_run, applied, left)
    if failed:
        raise typer.Exit(1)


def _print_run(report, auto, dry_run, applied, left):
    if report is not None:
        ran = ", ".join(o.operation for o in report.operations) or "nothing (no operation is due)"
        echo(f"REM run {report.run_id} at session {report.session_number}: ran {ran} in {report.duration_ms:.0f} ms")
        for o in report.operations:
            echo(f"  {o.operation:22} {o.findings:>4} new finding(s)" + (f"  FAILED: {o.error}" if o.error else ""))
    if auto:
        verb = "would apply" if dry_run else "applied"
        echo(f"--auto {verb} {len(applied)} finding(s), left {len(left)} pending for review")
        for a in applied:
            echo(f"  {verb}: {a['id']}  {a['title']}  ->  {a['option']} ({a['why']})")
        if left:
            echo("  review the rest with `mgcp rem review`")
    elif report is not None and report.findings:
        echo(f"{len(report.findings)} new finding(s); review them with `mgcp rem review`")


@rem_app.command("report")
def rem_report(project: Project = None, db: Db = None, json: Json = False):
    """Show the last REM run of the project and its findings, without running anything.

    Example: mgcp rem report --json
    """
    from mgcp import engine

    path = common.project_path(project)
    result = common.with_store(db, lambda s: engine.report(s, path))
    if json:
        return common.print_json(result)
    if result is None:
        return echo("no REM run yet for this project; start one with `mgcp rem run`")
    _print_run(result, False, False, [], [])
    for f in result.findings:
        echo(f"  {f.id}  [{f.status.value:8}] {f.operation:20} {f.title}")


@rem_app.command("review")
def rem_review(project: Project = None, config: Config = None, db: Db = None):
    """Review pending findings one at a time: pick an option number, s to skip, q to quit.

    Works in a terminal and from a pipe. Example: mgcp rem review --project .
    """
    from mgcp import engine
    from mgcp.surfaces import format

    cfg, path = _config(config), common.project_path(project)

    def ask(prompt: str) -> str | None:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:  # end of input (Ctrl-D or the pipe ran dry)
            echo()
            return None
        return line.strip()

    async def work(store):
        findings = await engine.pending_findings(store, path)
        if not findings:
            echo("No findings pending review.")
            return
        done = skipped = 0
        for index, finding in enumerate(findings, 1):
            echo()
            echo(format.finding(finding, index, len(findings)))
            while True:
                answer = ask(f"\nChoose 1-{len(finding.options)}, s to skip, q to quit: ")
                if answer is None or answer.lower() in ("q", "quit"):
                    echo(f"Stopped. {done} applied, {skipped} skipped, {len(findings) - done - skipped} left pending.")
                    return
                if answer.lower() in ("s", "skip", ""):
                    skipped += 1
                    break
                if not answer.isdigit() or not 1 <= int(answer) <= len(finding.options):
                    echo(f"Please answer a number from 1 to {len(finding.options)}, s or q.")
                    continue
                option = finding.options[int(answer) - 1]
                input_text, selection = None, None
                if option.multi_select:
                    for i, choice in enumerate(option.multi_select, 1):
                        echo(f"    {i}. {choice}")
                    input_text = ask("  Which? (numbers or ids, separated by spaces or commas): ")
                    if input_text is None:
                        return
                elif option.needs_input:
                    if option.action == "draft_lesson":
                        draft = finding.data.get("draft") or {}
                        echo("  Draft lesson:")
                        for key in ("id", "trigger", "action", "rationale", "tags"):
                            if draft.get(key):
                                echo(f"    {key}: {draft[key]}")
                    input_text = ask(f"  {option.needs_input}: ")
                    if input_text is None:
                        return
                try:
                    outcome = await engine.resolve(store, cfg, finding.id, int(answer), input_text or None, selection)
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
        echo()
        echo(f"Review finished: {done} applied, {skipped} skipped.")

    common.with_store(db, work)


@rem_app.command("resolve")
def rem_resolve(finding_id: Annotated[str, typer.Argument(metavar="FINDING_ID")],
                option: Annotated[int, typer.Option("--option", help="The option number (from 1).")],
                input_text: Annotated[Optional[str], typer.Option("--input", help="Text the option asks for (ids or numbers for a selection).")] = None,
                config: Config = None, db: Db = None, json: Json = False):
    """Apply one option of a finding (for scripts and agents).

    Example: mgcp rem resolve 3fa2c1d0 --option 1
    """
    from mgcp import engine

    cfg = _config(config)
    outcome = common.with_store(db, lambda s: engine.resolve(s, cfg, finding_id, option, input_text))
    if json:
        return common.print_json(outcome)
    echo(outcome.message)


@rem_app.command("undo")
def rem_undo(finding_id: Annotated[Optional[str], typer.Argument(metavar="[FINDING_ID]")] = None,
             run: Annotated[Optional[int], typer.Option("--run", help="Undo every action of this run.")] = None,
             db: Db = None, json: Json = False):
    """Undo an applied finding, or every action of a run, restoring exactly what changed.

    Example: mgcp rem undo 3fa2c1d0   |   mgcp rem undo --run 12
    """
    from mgcp import engine

    if (finding_id is None) == (run is None):
        raise InvalidInputError("name a finding id or --run RUN_ID (one of them)")
    message = common.with_store(db, lambda s: engine.undo_finding(s, finding_id) if finding_id
                                else engine.undo_run(s, run))
    if json:
        return common.print_json({"message": message})
    echo(message)


# -- init, serve, demo ----------------------------------------------------------------------------

@app.command("init")
def init(project: Project = None,
         user: Annotated[bool, typer.Option("--user", help="Install into ~/.claude/settings.json instead.")] = False,
         json: Json = False):
    """Install the REM SessionStart hook into .claude/settings.json (idempotent).

    Example: mgcp init --project .
    """
    from mgcp.surfaces.install import install_hook

    result = install_hook(None if user else common.project_path(project))
    if json:
        return common.print_json(result)
    echo(result["message"])


@app.command("serve")
def serve(db: Db = None, config: Config = None):
    """Run the MCP server on stdio (for Claude Code and other MCP clients).

    Example: mgcp serve --db ~/.mgcp/lessons.db
    """
    from mgcp.surfaces.mcp_server import serve as run_server

    run_server(db, config)


@app.command("demo")
def demo(db: Annotated[Optional[str], typer.Option("--db", help="Where to build the demo database (default: a new file here).")] = None,
         json: Json = False):
    """Build a demo knowledge base of a fictional project, run a REM cycle and show the findings.

    Example: mgcp demo
    """
    from mgcp.surfaces.demo import run_demo

    run_demo(db, json)
