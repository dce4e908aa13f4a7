"""The MCP server (`mgcp serve`): lessons, project context and REM review as tools, over stdio.

The only importer of the `mcp` SDK (2.x: `mcp.server.mcpserver.MCPServer`, the successor of
FastMCP). The tools' bodies are in `mcp_tools`; this module registers them and owns the contract:

- stdout carries nothing but the protocol; logs go to stderr.
- Every call opens the store and closes it before returning, so the server never holds a write lock
  between calls and other processes (the CLI, the hook) can use the database meanwhile. REM
  analysis runs in a worker thread, so the server keeps answering during a long cycle.
- An `MgcpError` becomes a tool error (isError) whose text is the message the CLI prints after
  "Error: "; any other exception becomes a tool error too (and a traceback on stderr); the server
  keeps running.
- Ctrl-C (SIGINT) or SIGTERM ends it promptly: a call in flight is rolled back, never half-applied.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
from typing import Any, Awaitable, Callable

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from mgcp import __version__
from mgcp.errors import MgcpError
from mgcp.surfaces.mcp_tools import Service, Tools

log = logging.getLogger("mgcp.mcp")

INSTRUCTIONS = """\
mgcp keeps versioned lessons (what to do in which situation, and why) and each project's context
across sessions. Call query_lessons before unfamiliar work; add_lesson when you learn something
reusable, refine_lesson when a lesson proved insufficient (say why). Call get_project_context at the
start of a session and save_project_context before it ends. When reminded that a REM cycle is due,
call rem_run and walk the user through each finding with rem_answer, one question at a time."""


def tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def guarded(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn MgcpError into a tool error whose text is exactly the CLI's message, and anything else
    into a tool error that names the failure (with a traceback on stderr) instead of ending the
    server. (A raised ToolError would reach the client prefixed with "Error executing tool ...".)"""

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except MgcpError as exc:
            return tool_error(str(exc))
        except Exception as exc:
            log.exception("tool %s failed unexpectedly", fn.__name__)
            return tool_error(f"unexpected error in {fn.__name__}: {type(exc).__name__}: {exc} "
                              "(a bug in mgcp; the traceback is in the server's log)")

    return wrapper


def build_server(db: str | None = None, config: str | None = None) -> MCPServer:
    """The MCP server with every tool registered (not started)."""
    server = MCPServer("mgcp", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    tools = Tools(Service(db, config, log.info))
    for name in Tools.NAMES:
        server.add_tool(guarded(getattr(tools, name)), name=name)
    return server


def serve(db: str | None, config: str | None) -> None:
    """Run the MCP server on stdio until the client closes it, or until SIGINT / SIGTERM."""
    from mgcp.config import db_path

    # Plain one-line logs on stderr; configured first, so the SDK's own setup (a rich console
    # handler) leaves it alone.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    log.setLevel(logging.INFO)  # mgcp's own progress lines; the SDK's stay at WARNING
    server = build_server(db, config)

    def stop(signum, frame):
        # The stdio transport reads stdin in a worker thread that a KeyboardInterrupt cannot reach,
        # so the server would wait for the client's next line. Every write is one SQLite
        # transaction, which an exit in the middle rolls back: leaving at once is safe.
        log.info("mgcp: stopped by signal %s", signum)
        os._exit(130 if signum == signal.SIGINT else 143)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    log.info("mgcp %s: MCP server on stdio, database %s", __version__, db_path(db))
    server.run("stdio")
