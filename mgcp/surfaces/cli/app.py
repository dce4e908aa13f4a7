"""The `mgcp` Typer app, the options every command shares, output helpers, and `main`: the one
place where errors become messages and exit codes.

Exit codes: 0 success; 1 a failure the message explains (MgcpError); 2 bad usage or bad input
(InvalidInputError, and Typer's usage errors); 130 interrupted. Results go to stdout (`--json`: one
document), progress and logs to stderr; under `--json` an error is a JSON document on stderr too.
Command modules (one per noun) import this module; this module imports none of them.

Every line printed for a person goes through `echo`, `note` or `_fail`, which show control
characters in stored text as escapes (`format.terminal_safe`): a lesson holding ESC sequences can
neither retitle nor recolour the terminal. `--json` output is JSON, which escapes them.
"""

import json
import os
import signal
import sys
from typing import Annotated, Any, Awaitable, Callable, Optional

import typer

from mgcp.errors import MgcpError
from mgcp.surfaces.common import json_text, print_json  # noqa: F401  (the commands' JSON output)
from mgcp.surfaces.format import terminal_safe

app = typer.Typer(help="mgcp: versioned lessons and project context for coding agents, with REM consolidation.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)

Db = Annotated[Optional[str], typer.Option("--db", help="Database file (default: $MGCP_DB, $MGCP_DATA_DIR/lessons.db, ~/.mgcp/lessons.db).")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
Project = Annotated[Optional[str], typer.Option("--project", help="Project path (default: the current directory); need not exist.")]
Config = Annotated[Optional[str], typer.Option("--config", help="rem-config.yaml to use (default: $MGCP_REM_CONFIG, the data dir's, else built-in defaults).")]
# The options above belong to each command, not to `mgcp` or a noun: given before the command's
# name (`mgcp --config f config show`) they get a hint that shows them moved (`_moved_after`).
COMMAND_OPTIONS = {"--db": True, "--project": True, "--config": True, "--json": False}  # takes a value
INTERRUPTED = 130  # the exit code of Ctrl-C (Typer returns it for a KeyboardInterrupt)


def _version(value: bool) -> None:
    if value:
        from mgcp import __version__

        print(f"mgcp {__version__}")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                   help="Print the version and exit.")] = False) -> None:
    """mgcp: versioned lessons and project context for coding agents, with REM consolidation."""


def noun(name: str, help: str) -> typer.Typer:
    """A sub-app for one noun (`mgcp lesson ...`), registered on the main app."""
    sub = typer.Typer(help=help, no_args_is_help=True)
    app.add_typer(sub, name=name)
    return sub


def echo(text: str = "") -> None:
    """A result for a person: stdout, control characters shown as escapes."""
    sys.stdout.write(terminal_safe(text) + "\n")


def note(text: str) -> None:
    """Progress and remarks: stderr, so that stdout stays the result."""
    print(terminal_safe(text), file=sys.stderr, flush=True)


def with_store(db: str | None, work: Callable[[Any], Awaitable[Any]], create: bool = True) -> Any:
    """Open (and upgrade) the database, run `work(store)` and return its result. Commands that only
    read pass `create=False`: a missing database is then an error and nothing is created."""
    import asyncio

    from mgcp.config import db_path
    from mgcp.persistence.store import Store

    async def run():
        async with Store.open(db_path(db), create=create) as store:
            return await work(store)

    return asyncio.run(run())


def project_path(path: str | None) -> str:
    from mgcp.config import normalize_path

    return normalize_path(path if path else os.getcwd())


def load_config(path: str | None):
    from mgcp.config import load_config as load

    return load(path)


def _fail(message: str, code: int) -> None:
    if "--json" in sys.argv[1:]:
        print(json_text({"error": message, "exit_code": code}), file=sys.stderr)
    else:
        print(f"Error: {terminal_safe(message)}", file=sys.stderr)
    sys.exit(code)


# Options naming a file or a project: an empty value (an unset shell variable, say) would otherwise
# mean the default database or the current directory.
PATH_OPTIONS = ("--db", "--project", "--config", "--out", "--token-file")


def _check_arguments(args: list[str]) -> None:
    """Arguments must be valid UTF-8: an invalid byte (which Python keeps as a lone surrogate) is
    refused up front, naming the argument, before any command runs. A path option must not be
    empty."""
    for number, arg in enumerate(args, 1):
        option, _, value = arg.partition("=")
        if option in PATH_OPTIONS and ("=" in arg or number < len(args)) \
                and not (value if "=" in arg else args[number]).strip():
            _fail(f"{option} must not be empty", 2)
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            try:  # the bytes given, an invalid one shown as \xNN
                given = os.fsencode(arg)
            except UnicodeEncodeError:  # a surrogate typed as such, not an invalid byte
                given = arg.encode("utf-8", "backslashreplace")
            shown = given.decode("utf-8", "backslashreplace")[:80]
            option = args[number - 2] if number > 1 and args[number - 2].startswith("--") else None
            what = f"the value of {option}" if option else f"argument {number}"
            _fail(f"{what} ('{shown}') is not valid UTF-8 text", 2)


def _moved_after(exc: Exception, args: list[str]) -> str | None:
    """For an unknown option that is one of COMMAND_OPTIONS, given before the name of a command that
    takes it: a hint showing the command line with such options moved after the command."""
    ctx = getattr(exc, "ctx", None)
    if getattr(exc, "option_name", None) not in COMMAND_OPTIONS or ctx is None \
            or getattr(ctx.command, "commands", None) is None:  # not a group's "No such option"
        return None
    command, path, moved, rest = ctx.find_root().command, [], [], iter(args)
    for arg in rest:
        name = arg.partition("=")[0]
        commands = getattr(command, "commands", None)
        if commands is None:  # the command itself: what follows stays as given
            path.append(arg)
        elif arg in commands:
            command = commands[arg]
            path.append(arg)
        elif name in COMMAND_OPTIONS:
            moved.append(arg)
            if COMMAND_OPTIONS[name] and "=" not in arg:
                moved.append(next(rest, ""))
        else:
            return None
    taken = {opt for param in command.params for opt in getattr(param, "opts", ())}
    if getattr(command, "commands", None) is not None or not moved \
            or any(arg.partition("=")[0] not in taken for arg in moved if arg.startswith("--")):
        return None
    import shlex

    names = list(dict.fromkeys(arg.partition("=")[0] for arg in moved if arg.startswith("--")))
    root = ctx.find_root().info_name or "mgcp"
    return (f"{' and '.join(names)} {'goes' if len(names) == 1 else 'go'} after the command: "
            f"`{root} {shlex.join(path + moved)}`")


def main() -> None:
    """Run the CLI on sys.argv (the `mgcp` console script)."""
    _check_arguments(sys.argv[1:])
    try:
        code = app(standalone_mode=False)
    except MgcpError as exc:
        _fail(str(exc), exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        code = INTERRUPTED
    except typer.TyperException as exc:  # bad usage: one line, exit code 2, as for bad input
        message = exc.format_message()
        if not message:  # a bare `mgcp lesson`, whose help was just printed
            sys.exit(getattr(exc, "exit_code", 2))
        where = exc.ctx.command_path if getattr(exc, "ctx", None) else "mgcp"
        moved = _moved_after(exc, sys.argv[1:])
        _fail(f"{message}; {moved}" if moved else f"{message} (see `{where} --help`)", getattr(exc, "exit_code", 2))
    except UnicodeError as exc:  # e.g. an argument that is not valid UTF-8
        _fail(f"input is not valid text ({exc.reason})", 2)
    except json.JSONDecodeError as exc:  # what the store wrote is JSON: a value edited or damaged since
        _fail(f"the database holds a value that is not JSON ({exc.msg}); `mgcp db check` names it", 1)
    except Exception as exc:  # a stored value of a shape mgcp cannot read (the models check what is read)
        pydantic = sys.modules.get("pydantic")  # not imported on every command's path
        if pydantic is None or not isinstance(exc, pydantic.ValidationError):
            raise
        error = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
        _fail(f"a {exc.title} read cannot be used ({where}: {error['msg']}); if it is stored, `mgcp db check` "
              "names it", 1)
    if code == INTERRUPTED:
        # a change commits whole or not at all, and the interrupt may come just after its commit
        said = ("what was written before is kept, even a change that finished as you interrupted "
                "(look, e.g. `mgcp rem report`, before repeating it); nothing was applied half-way")
        if "--json" in sys.argv[1:]:  # a program reading --json output reads the error as JSON too
            _fail(f"interrupted; {said}", INTERRUPTED)
        print(f"Interrupted; {said}.", file=sys.stderr)
    sys.exit(code if isinstance(code, int) else 0)


def command() -> None:
    """The `mgcp` command: `main`, after which a Ctrl-C is ignored while the process ends (its
    threads joined): it would end the process by the signal, and a script would read
    "interrupted" for a command that finished."""
    try:
        main()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
