"""`mgcp init`, `mgcp serve` and `mgcp demo`: what connects mgcp to agents and newcomers."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Config, Db, Json, Project, app, echo, print_json, project_path


@app.command("init")
def init(project: Project = None,
         user: Annotated[bool, typer.Option("--user", help="Install into ~/.claude/settings.json instead.")] = False,
         json: Json = False):
    """Install the REM SessionStart hook into .claude/settings.json (idempotent).

    Example: mgcp init --project .
    """
    from mgcp.surfaces.install import install_hook

    result = install_hook(None if user else project_path(project))
    if json:
        return print_json(result)
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
