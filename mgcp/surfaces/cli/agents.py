"""`mgcp init`, `mgcp serve` and `mgcp demo`: what connects mgcp to agents and newcomers."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Config, Db, Json, Project, app, echo, load_config, print_json, project_path


@app.command("init")
def init(project: Project = None,
         user: Annotated[bool, typer.Option("--user", help="Install into ~/.claude/settings.json instead.")] = False,
         mcp: Annotated[bool, typer.Option("--mcp", help="Also register the MCP server in the project's .mcp.json.")] = False,
         remove: Annotated[bool, typer.Option("--remove", help="Take out what init added (with --mcp: the MCP entry too).")] = False,
         json: Json = False):
    """Install the REM SessionStart hook into .claude/settings.json (idempotent); --remove takes it out.

    Example: mgcp init --project . --mcp
    """
    from mgcp.errors import InvalidInputError
    from mgcp.surfaces import install

    if user and mcp:
        raise InvalidInputError("--mcp registers the server for a project (.mcp.json); for every project use "
                                "`claude mcp add --scope user mgcp -- mgcp serve`")
    where = None if user else project_path(project)
    install.check_files(where, mcp)
    results = [install.remove_hook(where) if remove else install.install_hook(where)]
    if mcp:
        results.append(install.remove_mcp(where) if remove else install.install_mcp(where))
    if json:
        return print_json(results[0] if len(results) == 1 else {"hook": results[0], "mcp": results[1]})
    for result in results:
        echo(result["message"])


@app.command("serve")
def serve(db: Db = None, config: Config = None,
          http: Annotated[bool, typer.Option("--http", help="Serve over streamable HTTP (at /mcp) instead of stdio.")] = False,
          host: Annotated[str, typer.Option("--host", help="With --http: the address to listen on; any but 127.0.0.1, localhost or ::1 needs a token.")] = "127.0.0.1",
          port: Annotated[int, typer.Option("--port", min=1, max=65535, help="With --http: the port.")] = 8765,
          token_file: Annotated[Optional[str], typer.Option("--token-file", help="With --http: a file holding the bearer token (else $MGCP_TOKEN).")] = None):
    """Run the MCP server on stdio (for Claude Code and other MCP clients), or over HTTP for a team.

    Example: mgcp serve --http --host 0.0.0.0 --port 8765 --token-file ~/.mgcp/token
    """
    from mgcp.config import db_path
    from mgcp.errors import InvalidInputError
    from mgcp.persistence.migrate import check_file

    check_file(db_path(db), allow_empty=True)  # a database it could never use: refused at start
    load_config(config)
    if not http:
        if host != "127.0.0.1" or port != 8765 or token_file:
            raise InvalidInputError("--host, --port and --token-file go with --http")
        from mgcp.surfaces.mcp_server import serve as run_server

        return run_server(db, config)
    from mgcp.config import http_token
    from mgcp.surfaces.mcp_server import serve_http

    token = http_token(token_file)
    _check_port(host, port)
    serve_http(db, config, host, port, token)


def _check_port(host: str, port: int) -> None:
    """Refuse at start a port another server holds (else the server would announce itself, then
    fail)."""
    import socket

    from mgcp.errors import MgcpError

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise MgcpError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@app.command("demo")
def demo(db: Annotated[Optional[str], typer.Option("--db", help="Where to build the demo database (default: a new file here).")] = None,
         json: Json = False):
    """Build a demo knowledge base of a fictional project, run a REM cycle and show the findings.

    Example: mgcp demo
    """
    from mgcp.surfaces.demo import run_demo

    run_demo(db, json)
