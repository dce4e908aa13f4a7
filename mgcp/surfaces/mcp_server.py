"""The MCP server (`mgcp serve`): lessons, project context and REM review as tools, over stdio or,
with `--http`, over the SDK's streamable HTTP transport for a team sharing one database.

The only importer of the `mcp` SDK (2.x: `mcp.server.mcpserver.MCPServer`, the successor of
FastMCP). The tools' bodies are in `mcp_tools`; this module registers them and owns the contract:

- stdout carries nothing but the protocol; logs go to stderr.
- Every call opens the store and closes it before returning, so the server never holds a write lock
  between calls and other processes (the CLI, the hook) can use the database meanwhile. REM
  analysis runs in a worker thread, so the server keeps answering during a long cycle.
- An `MgcpError` becomes a tool error (isError) whose text is the message the CLI prints after
  "Error: "; any other exception becomes a tool error too (and a traceback on stderr); the server
  keeps running. Arguments the tool's schema refuses (the SDK validates them before the tool runs)
  get a tool error of one line per argument: its name, the value given and what is allowed.
- Every request gets an answer. A line the SDK cannot parse (not JSON, not UTF-8, text with an
  unpaired surrogate, nested too deeply) gets a JSON-RPC error, with the request's id when it can be
  read, instead of leaving the client waiting; the server goes on.
- Ctrl-C (SIGINT) or SIGTERM ends it promptly: a call in flight is rolled back, never half-applied.
- Over HTTP it listens on 127.0.0.1 unless told otherwise. Any other address requires a bearer
  token; with a token set, every request must carry `Authorization: Bearer <token>` (compared in
  constant time) or gets 401 before the MCP layer sees it.
"""

from __future__ import annotations

import functools
import hmac
import inspect
import io
import json
import logging
import os
import signal
import sys
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
import mcp_types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from mgcp import __version__
from mgcp.errors import InvalidInputError, MgcpError
from mgcp.surfaces.mcp_tools import Service, Tools

log = logging.getLogger("mgcp.mcp")


def _progress(message: str, fraction: float | None = None) -> None:
    """A REM run's progress in the server's log: its lines, and every quarter of a long operation."""
    if fraction is None:
        log.info(message)
    elif round(fraction * 100) % 25 == 0 and fraction > 0:
        log.info("%s: %d%%", message, round(fraction * 100))

INSTRUCTIONS = """\
mgcp keeps versioned lessons (what to do in which situation, and why) and each project's context
across sessions. Call query_lessons before unfamiliar work; add_lesson when you learn something
reusable, refine_lesson when a lesson proved insufficient (say why). Call get_project_context at the
start of a session and save_project_context before it ends. When reminded that a REM cycle is due,
call rem_run and walk the user through each finding with rem_answer, one question at a time."""
INSTRUCTIONS += """
Call recall with the task when you start one: it returns one memory section (project state,
constraints, preferences, relevant lessons) within a character budget; use it, do not quote it.
After applying a lesson, report with lesson_outcome whether it helped."""


def tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def guarded(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn MgcpError into a tool error whose text is exactly the CLI's message, and anything else
    into a tool error that names the failure (with a traceback on stderr) instead of ending the
    server. (A raised ToolError would reach the client prefixed with "Error executing tool ...".)"""

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        for name, value in kwargs.items():
            if not _valid_text(value):
                return tool_error(f"{name} is not valid text (an unpaired surrogate); nothing was done")
        try:
            return await fn(*args, **kwargs)
        except MgcpError as exc:
            return tool_error(str(exc))
        except Exception as exc:
            log.exception("tool %s failed unexpectedly", fn.__name__)
            return tool_error(f"unexpected error in {fn.__name__}: {type(exc).__name__}: {exc} "
                              "(a bug in mgcp; the traceback is in the server's log)")

    return wrapper


class Server(MCPServer):
    """The SDK's server, but a call whose arguments the tool's schema refuses gets the problems in
    plain words (`argument_errors`) instead of pydantic's report: several lines per problem, the
    model's internal name and a link to pydantic's documentation. An argument the tool does not
    take (`tag` for `tags`) is refused too: the SDK would drop it, and what it said with it."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        schema = next((t.input_schema for t in await self.list_tools() if t.name == name), None)
        taken = (schema or {}).get("properties", {})
        unknown = [key for key in arguments or {} if key not in taken]
        if schema is not None and unknown:
            raise ToolError(f"{name} takes no argument {', '.join(map(repr, unknown))}; "
                            f"it takes {', '.join(taken) or 'none'}")
        wrong = type_errors(arguments or {}, schema or {})
        if wrong:
            raise ToolError("\n".join(wrong))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(argument_errors(exc.__cause__, schema or {})) from exc.__cause__


JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object",
              type(None): "null"}


def type_errors(arguments: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Arguments, or items of a list argument, whose JSON type the tool's schema does not name, one
    line each. The SDK's validation would take "true" or 1 for true, "3" or 3.0 for 3 and act on
    them, while it refuses 123 for text: one rule instead, the types the schema says."""
    defs = schema.get("$defs", {})
    return [problem for key, value in arguments.items()
            for problem in _wrong_type(key, value, _alternatives(schema.get("properties", {}).get(key, {}), defs), defs)]


def _wrong_type(path: str, value: Any, alternatives: list[dict], defs: dict) -> list[str]:
    named = {a.get("type") for a in alternatives}
    if not named <= {*TYPE_WORDS, "null"}:
        return []  # a schema that names no type (any value): pydantic's checks alone
    kind = JSON_TYPES.get(type(value))
    if kind == "array" and "array" in named:
        items = [i for a in alternatives if a.get("type") == "array" for i in _alternatives(a.get("items", {}), defs)]
        return next(([p] for i, item in enumerate(value) for p in _wrong_type(f"{path}[{i}]", item, items, defs)), [])
    if kind in named or (kind == "integer" and "number" in named):
        return []
    return [f"{path} must be {_describe(alternatives, defs) or 'left out'} (got {_shown(value)})"]


def argument_errors(error: ValidationError, schema: dict[str, Any]) -> str:
    """One line per refused argument (or item of one), read against the tool's JSON schema: e.g.
    "confidence must be between 0 and 1 (got 1.5)", 'todos[0].status must be one of pending,
    in_progress, completed (got "wip")'. Values are shown as JSON, as the client sent them."""
    defs = schema.get("$defs", {})
    problems: dict[str, list[tuple[dict, list[dict]]]] = {}
    for err in error.errors(include_url=False):
        path, node = _follow(err["loc"], schema, defs)
        # A value no member of a union accepts fails once per member, all at one path.
        problems.setdefault(path or "the arguments", []).append((err, _alternatives(node, defs)))
    return "\n".join(_problem(path, found, defs) for path, found in problems.items())


TYPE_WORDS = {"string": ("text", "strings"), "integer": ("a whole number", "whole numbers"),
              "number": ("a number", "numbers"), "boolean": ("true or false", "true or false values"),
              "array": ("a list", "lists"), "object": ("an object", "objects")}
BOUND_WORDS = (("minimum", "at least"), ("exclusiveMinimum", "greater than"),
               ("maximum", "at most"), ("exclusiveMaximum", "less than"))


def _problem(path: str, found: list[tuple[dict, list[dict]]], defs: dict) -> str:
    err, alternatives = found[0]
    kind = err["type"]
    if kind == "missing":
        return f"{path} is required"
    got = f" (got {_shown(err.get('input'))})"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        limits = next((a for a in alternatives if any(k in a for k, _ in BOUND_WORDS)), {})
        if "minimum" in limits and "maximum" in limits:
            return f"{path} must be between {limits['minimum']} and {limits['maximum']}{got}"
        bounds = [f"{words} {limits[key]}" for key, words in BOUND_WORDS if key in limits]
        if bounds:
            return f"{path} must be {' and '.join(bounds)}{got}"
    if kind in ("literal_error", "enum"):
        values = next((a["enum"] for a in alternatives if "enum" in a), None)
        allowed = ", ".join(map(str, values)) if values else err.get("ctx", {}).get("expected")
        if allowed:
            return f"{path} must be one of {allowed}{got}"
    if all(e["type"].endswith(("_type", "_parsing")) or e["type"] == "int_from_float" for e, _ in found):
        allowed = _describe(alternatives, defs)
        if allowed:
            return f"{path} must be {allowed}{got}"
    return f"{path}: {err['msg'][:1].lower()}{err['msg'][1:]}{got}"


def _follow(loc: tuple, schema: dict, defs: dict) -> tuple[str, dict]:
    """The argument path an error's location names ("todos[0].status") and its schema. A part
    that is neither an item's index nor a property names the member of a union that was tried."""
    node, path = schema, ""
    for part in loc:
        alternatives = _alternatives(node, defs)
        if isinstance(part, int):
            arrays = [a for a in alternatives if a.get("type") == "array"]
            if arrays:
                node, path = arrays[0].get("items", {}), f"{path}[{part}]"
            continue
        owners = [a for a in alternatives if part in a.get("properties", {})]
        if owners:
            node, path = owners[0]["properties"][part], f"{path}.{part}" if path else str(part)
    return path, node


def _alternatives(node: dict, defs: dict) -> list[dict]:
    """The schemas a value may match at `node`: references followed, unions flattened."""
    if "$ref" in node:
        node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
    members = node.get("anyOf") or node.get("oneOf")
    if members:
        return [a for member in members for a in _alternatives(member, defs)]
    return [node]


def _describe(alternatives: list[dict], defs: dict) -> str:
    """What the schemas accept, in words: "text or an object", "a list of strings"."""
    words = []
    for a in alternatives:
        kind = a.get("type")
        if kind not in TYPE_WORDS:
            continue  # null: leaving an optional argument out is always allowed
        word = TYPE_WORDS[kind][0]
        if kind == "array":
            items = {i.get("type") for i in _alternatives(a.get("items", {}), defs)}
            if len(items) == 1 and next(iter(items)) in TYPE_WORDS:
                word += f" of {TYPE_WORDS[items.pop()][1]}"
        words.append(word)
    return " or ".join(dict.fromkeys(words))


def _shown(value: Any) -> str:
    """A value as JSON, cut to a readable length."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if not _valid_text(text):
        text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def build_server(db: str | None = None, config: str | None = None) -> MCPServer:
    """The MCP server with every tool registered (not started)."""
    server = Server("mgcp", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    tools = Tools(Service(db, config, _progress))
    for name in Tools.NAMES:
        method = getattr(tools, name)
        # Descriptions without the source's indentation; read-only tools say so to the client.
        server.add_tool(guarded(method), name=name, description=inspect.cleandoc(method.__doc__ or ""),
                        annotations=ToolAnnotations(read_only_hint=True) if name in Tools.READ_ONLY else None)
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
    anyio.run(_run_stdio, server)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


class BearerTokenGate:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401; any other
    kind of connection but the server's own lifespan events is closed unanswered."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode("utf-8")

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "lifespan"):
            return  # e.g. a websocket: the tools are served over HTTP only
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps({"error": "unauthorized: send Authorization: Bearer <token>"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="mgcp"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(db: str | None, config: str | None, host: str, port: int, token: str | None) -> None:
    """Run the MCP server over streamable HTTP at http://host:port/mcp until SIGINT / SIGTERM."""
    import uvicorn

    from mgcp.config import db_path

    if host not in LOOPBACK and not token:
        raise InvalidInputError(f"serving on {host} (not this machine only) needs a bearer token: "
                                "pass --token-file FILE or set MGCP_TOKEN")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    log.setLevel(logging.INFO)
    server = build_server(db, config)
    # The hook's route gets the checks the SDK gives /mcp: a JSON body, and on this machine only
    # (no token) a Host and an Origin of this machine, against DNS rebinding from a web page.
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    ) if host in LOOPBACK else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server.custom_route("/hook", methods=["POST"])(
        functools.partial(_hook, db, config, TransportSecurityMiddleware(security)))
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    if token:
        app = BearerTokenGate(app, token)
    shown = f"[{host}]" if ":" in host else host
    log.info("mgcp %s: MCP server on http://%s:%d/mcp (%s), database %s", __version__, shown, port,
             "bearer token required" if token else "no token: this machine only", db_path(db))
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()


HOOK_BODY_LIMIT = 64 * 1024


async def _hook(db: str | None, config: str | None, security, request):
    """POST /hook: the SessionStart hook of a machine whose `MGCP_SERVER` names this server, run
    against this server's database: {"session_id", "cwd", "source"} as JSON in, {"reminder": text or
    null} out; 400 for a payload the hook refuses, 413 past HOOK_BODY_LIMIT bytes, the SDK's answers
    to a wrong Content-Type, Host or Origin (`security`), 500 (with the error) when the hook fails."""
    from starlette.responses import JSONResponse

    from mgcp.surfaces import hook

    refused = await security.validate_request(request, is_post=True)
    if refused is not None:
        return refused
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > HOOK_BODY_LIMIT:
            return JSONResponse({"error": f"a SessionStart payload is at most {HOOK_BODY_LIMIT} bytes"},
                                status_code=413)
    try:
        payload = hook.parse_input(body.decode("utf-8"))
    except (hook.HookInputError, UnicodeDecodeError) as exc:
        return JSONResponse({"error": f"bad SessionStart payload: {exc}"}, status_code=400)
    try:
        text = await anyio.to_thread.run_sync(
            functools.partial(hook.run, payload["session_id"], payload["cwd"], payload.get("source"), db, config,
                              local=False))
    except Exception as exc:  # noqa: BLE001 -- the client fails open and logs what it is told
        log.warning("mgcp: the hook for %s failed: %s: %s", payload["cwd"], type(exc).__name__, exc)
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)
    return JSONResponse({"reminder": text})


async def _run_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport, reading its lines through CheckedLines. (The SDK's own
    `run("stdio")` does the same with unchecked lines; its low-level server has no public name.)"""
    lines = CheckedLines()
    async with stdio_server(stdin=lines) as (read_stream, write_stream):
        lines.answer_through(write_stream)
        lowlevel = server._lowlevel_server
        await lowlevel.run(read_stream, _Answers(write_stream, lines), lowlevel.create_initialization_options())


DRAIN_SECONDS = 600  # how long requests still running at the end of the input are waited for


class CheckedLines:
    """Standard input for the stdio transport, one JSON-RPC message a line. A line the SDK would
    reject is answered here with a JSON-RPC error and not passed on: the SDK only logs such a line,
    and a client would wait for ever for the answer.

    At the end of the input (a client that sends its requests and closes stdin: `printf ... | mgcp
    serve`) the lines end only once every request passed on has been answered (`answered`): the
    SDK stops at the end of its input and answers a request still running "Connection closed"."""

    def __init__(self):
        self._ready = anyio.Event()
        self._answers = None
        self._open: dict = {}  # the id of each request passed on and not yet answered: how many
        self._settled = anyio.Event()

    def answered(self, request_id) -> None:
        """The SDK has answered the request `request_id`."""
        if request_id in self._open:
            self._open[request_id] -= 1
            if not self._open[request_id]:
                del self._open[request_id]
        if not self._open:
            self._settled.set()

    def answer_through(self, write_stream) -> None:
        self._answers = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        # Invalid UTF-8 becomes lone surrogates (not U+FFFD, which would store altered text).
        stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape"))
        async for line in stdin:
            if not line.strip():
                continue
            refused = rejection(line)
            if refused is None:
                self._passed_on(json.loads(line))
                yield line
                continue
            error, answer = refused
            log.warning("mgcp: refused a message: %s", error.error.message)
            if answer:
                await self._ready.wait()
                try:
                    await self._answers.send(SessionMessage(error))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
        if self._open:
            with anyio.move_on_after(DRAIN_SECONDS):  # a request never answered must not hold the exit
                await self._settled.wait()

    def _passed_on(self, message: dict) -> None:
        if "method" in message and "id" in message:  # a request: the SDK answers it
            self._open[message["id"]] = self._open.get(message["id"], 0) + 1
            self._settled = anyio.Event()
        elif message.get("method") == "notifications/cancelled":  # a cancelled request is not answered
            params = message.get("params")
            if isinstance(params, dict) and params.get("requestId") in self._open:
                self.answered(params["requestId"])


class _Answers:
    """The SDK's side of the stdio transport's output stream, telling `CheckedLines` of each answer
    sent (a response or an error with a request's id)."""

    def __init__(self, stream, lines: CheckedLines):
        self._stream, self._lines = stream, lines

    async def send(self, item: SessionMessage) -> None:
        await self._stream.send(item)
        message = item.message
        if isinstance(message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)) and message.id is not None:
            self._lines.answered(message.id)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self):
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self._stream.__aexit__(*exc)

    def __getattr__(self, name):  # whatever else the SDK asks of its stream
        return getattr(self._stream, name)


def rejection(line: str) -> tuple[mcp_types.JSONRPCError, bool] | None:
    """None for a line the SDK accepts; otherwise the JSON-RPC error that refuses it, and whether
    to send it: a request is answered (with its id, or id null when the line is not JSON or the id
    cannot be read); a notification or a response is not."""
    try:
        parsed = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # noqa: BLE001 -- whatever the SDK's parser says, the line is refused
        lines = str(exc).splitlines()
        reason = (lines[1] if len(lines) > 1 else str(exc)).split(" [type=")[0].strip()
    else:
        # The SDK takes a request whose id is not a string or an integer (1.5, null, true, an
        # object) for a notification and never answers it: refuse it, as JSON-RPC asks.
        if isinstance(parsed, mcp_types.JSONRPCNotification) and '"id"' in line and "id" in json.loads(line):
            return _error(None, INVALID_REQUEST, "Invalid Request: an id is a string or an integer"), True
        return None
    try:
        message = json.loads(line)  # more lenient: lone surrogates and deeper nesting parse
    except RecursionError:
        return _error(None, PARSE_ERROR, "Parse error: the message is nested too deeply"), True
    except ValueError:
        return _error(None, PARSE_ERROR, "Parse error: the line is not JSON"
                      + ("" if _valid_text(line) else " in UTF-8")), True
    if not isinstance(message, dict):
        return _error(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object"), True
    request_id = message.get("id")
    answer = "method" in message and "id" in message
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)) or not _valid_text(request_id):
        request_id = None
    if not _valid_text(line) or not _valid_text(message):
        return _error(request_id, INVALID_PARAMS, "Invalid params: text is not valid Unicode "
                      "(invalid UTF-8 or an unpaired surrogate)"), answer
    return _error(request_id, INVALID_REQUEST, f"Invalid Request: {reason[:300]}"), answer


def _error(request_id, code: int, message: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                  error=mcp_types.ErrorData(code=code, message=message))


def _valid_text(value: Any) -> bool:
    """Whether every string in `value` (nested lists and dicts included) is valid Unicode."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif hasattr(item, "model_dump"):
            stack.append(item.model_dump())
    return True
