"""The SessionStart hook's logic (hooks/rem-cycle-trigger.py is its executable skin).

Reads Claude Code's SessionStart JSON on stdin (`session_id`, `cwd`, `source` = startup | resume |
clear | compact), registers the session for the project at `cwd` (a session id never seen for the
project advances its session number, whatever its source; a known one, resumed or compacted, does
not), and, when REM operations are due or findings await review, prints one JSON object whose
`hookSpecificOutput.additionalContext` is a short reminder. On startup and clear (not resume or
compact, whose conversation still holds it) it adds the project's recall section (mgcp.recall, no
task: project state, constraints, preferences, top-ranked lessons) under `recall.hook_budget`
characters (rem-config.yaml; 0 turns it off). The lessons it shows do not count as used: every
session start would count them again, making the most used ever more used, validating lessons
nobody asked for and hiding unused ones from the staleness scan. Otherwise it prints nothing.

With `MGCP_SERVER` set (the URL of a team's `mgcp serve --http`), the hook asks that server
instead (`ask`: POST /hook, with `MGCP_TOKEN` as the bearer token): the session is registered in
the team's database and the reminder and recall speak of it; a server that cannot be reached means
nothing shown within REMOTE_TIMEOUT_S and a line in the hook log, as any other failure.

Contract:
- It never runs the cycle; it only registers the session and reminds.
- It never fails the session: any error (bad input, a missing, locked, corrupt, foreign or newer
  database, a bad config) means exit status 0, nothing on stdout, and one line in the hook log
  (`config.hook_log_path()`).
- It is fast: it runs before every session. The steady state imports only the stdlib, mgcp.config,
  mgcp.schedule, mgcp.validation and persistence.sessions (stdlib plus mgcp.config), and for the
  recall section mgcp.recall, mgcp.ranking, mgcp.quality and persistence.recall_data (all stdlib
  only) -- never pydantic, typer, networkx, aiosqlite or mcp; sqlite-utils only when the database
  must be created or upgraded, yaml only when a config file exists. A locked database fails open
  after a short busy timeout. A recall that fails is logged and left out; the reminder still shows.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

from mgcp import config
from mgcp.errors import InvalidInputError
from mgcp.persistence import migrate, sessions
from mgcp.schedule import plan

BUSY_TIMEOUT_S = 2.0
REMOTE_TIMEOUT_S = 2.0  # the hook's whole wait for a shared server, as for a locked database
MAX_ANSWER = 1 << 20
MAX_REMINDER = 600


class HookInputError(ValueError):
    """The SessionStart payload is not what Claude Code sends."""


def main() -> int:
    """Run the hook on stdin/stdout. Always returns 0 (Claude Code must never see the hook fail)."""
    payload = None
    try:
        payload = parse_input(sys.stdin.read())
        server = os.environ.get("MGCP_SERVER", "").strip()
        reminder = ask(server, payload) if server else \
            run(payload["session_id"], payload["cwd"], payload.get("source"))
        if reminder:
            sys.stdout.write(json.dumps({"hookSpecificOutput": {
                "hookEventName": "SessionStart", "additionalContext": reminder}}) + "\n")
            sys.stdout.flush()
    except BaseException as exc:  # noqa: BLE001 -- failing open is the contract, whatever happened
        if isinstance(exc, KeyboardInterrupt):
            return 0
        _log(exc, payload)
    return 0


def parse_input(text: str) -> dict:
    try:
        payload = json.loads(text)
    except ValueError:
        raise HookInputError("stdin is not JSON") from None
    if not isinstance(payload, dict):
        raise HookInputError("stdin is not a JSON object")
    for key in ("session_id", "cwd"):
        if not isinstance(payload.get(key), str) or not payload[key].strip():
            raise HookInputError(f"'{key}' is missing or empty")
    if not os.path.isabs(payload["cwd"]):  # it would resolve against the hook's own directory: no project
        raise HookInputError("'cwd' is not an absolute path")
    from mgcp.validation import MAX_SESSION_ID, check_no_nul, check_project_path, check_text  # stdlib only

    try:
        check_no_nul("'cwd'", payload["cwd"])  # no path holds one
        check_project_path(payload["cwd"])  # stored as the project's path
        # stored as a context save stores it: no NUL, no secret, not too long
        check_text("'session_id'", payload["session_id"], limit=MAX_SESSION_ID)
    except InvalidInputError as exc:
        raise HookInputError(str(exc)) from None
    source = payload.get("source")
    if source is not None and not (isinstance(source, str) and SOURCE.fullmatch(source)):
        raise HookInputError("'source' is not a word (startup, resume, clear, compact or another of at most 32 "
                             "letters)")
    return payload


SOURCE = re.compile(r"[A-Za-z_-]{1,32}")  # what Claude Code says started the session; stored with it


RECALL_SOURCES = (None, "startup", "clear")  # a resumed or compacted conversation still holds it


def run(session_id: str, cwd: str, source: str | None, db: str | None = None,
        config_file: str | None = None, local: bool = True) -> str | None:
    """Register the session and return the text to show (reminder and recall), or None when there
    is nothing to say. `db` and `config_file`: as `--db` and `--config` (default: the environment's).
    `local`: the session's machine holds the database (not a team server's), so the reminder may
    name the CLI's commands."""
    conn = _open(str(config.db_path(db)))
    try:
        project_id, session, _ = sessions.register_session(conn, cwd, session_id, source, utcnow())
        rem_config = config.load_config(config_file)
        settings = rem_config.for_project(config.normalize_path(cwd))
        last_runs = sessions.last_runs(conn, project_id)
        due = [op for op, _strategy, _params, _last, _due_at, due_now in plan(settings, last_runs, session)
               if due_now]
        pending = sessions.pending_findings(conn, project_id)
        section = None
        budget = int(rem_config.recall["hook_budget"])
        if source in RECALL_SOURCES and budget > 0:
            section = _recall(conn, cwd, budget, rem_config, {"session_id": session_id, "source": source, "cwd": cwd})
    finally:
        conn.close()
    parts = [text for text in (reminder(session, due, pending, local), section) if text]
    return "\n\n".join(parts) or None


def ask(server: str, payload: dict) -> str | None:
    """The text to show, from a team's shared `mgcp serve --http` at `server` (its base URL, or its
    /mcp URL): the session is registered in the team's database, and the reminder and recall speak
    of it. Sends `MGCP_TOKEN` as the bearer token when set; follows no redirect and no proxy. Gives
    up after REMOTE_TIMEOUT_S in all (name lookup, connection, answer)."""
    import http.client
    import threading
    from urllib.parse import urlsplit

    url = urlsplit(server.rstrip("/").removesuffix("/mcp"))
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"MGCP_SERVER {server!r} is not an http:// or https:// URL")
    body = json.dumps({key: payload.get(key) for key in ("session_id", "cwd", "source")}).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if os.environ.get("MGCP_TOKEN", "").strip():
        headers["Authorization"] = f"Bearer {os.environ['MGCP_TOKEN'].strip()}"
    outcome: dict = {}

    def post() -> None:
        try:
            kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
            conn = kind(url.hostname, url.port, timeout=REMOTE_TIMEOUT_S)
            conn.request("POST", f"{url.path}/hook", body, headers)
            response = conn.getresponse()
            outcome["answer"] = (response.status, response.read(MAX_ANSWER).decode("utf-8", "replace"))
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller
            outcome["error"] = exc

    worker = threading.Thread(target=post, daemon=True)  # a daemon: left behind if it overruns
    worker.start()
    worker.join(REMOTE_TIMEOUT_S)
    if worker.is_alive():
        raise TimeoutError(f"{server} did not answer within {REMOTE_TIMEOUT_S:g} s")
    if "error" in outcome:
        raise outcome["error"]
    status, text = outcome["answer"]
    if status != 200:
        raise RuntimeError(f"{server} answered {status}: {' '.join(text.split())[:300]}")
    answer = json.loads(text)
    reminder = answer.get("reminder") if isinstance(answer, dict) else None
    return reminder if isinstance(reminder, str) and reminder else None


def _recall(conn, cwd: str, budget: int, rem_config, payload: dict) -> str | None:
    """The project's recall section for a session's start (read only); None (and a line in the hook
    log) if it cannot be built."""
    try:
        from mgcp import recall
        from mgcp.persistence import recall_data

        reader = recall_data.Reader(conn)
        result = recall.build(reader, cwd, budget, weights=rem_config.ranking,
                              shares=rem_config.recall["shares"], errors=False,
                              reinforcement=rem_config.reinforcement)
        has_content = result.lessons or result.sections.get("state")
        return result.text if has_content else None
    except Exception as exc:  # noqa: BLE001 -- the reminder must still reach the session
        _log(exc, payload, "left out the recall section")
        return None


def reminder(session: int, due: list[str], pending: int, local: bool = True) -> str | None:
    """The text shown to the agent (at most MAX_REMINDER characters), or None. `local`: see `run`
    (a team's database is reached through the MCP tools alone: the CLI there reads another)."""
    if not due and not pending:
        return None
    parts = []
    if due:
        parts.append(f"REM cycle due at session {session}. Operations ready: {', '.join(due)}.")
    if pending:
        noun = "finding awaits" if pending == 1 else "findings await"
        parts.append(f"{pending} REM {noun} review" + ("." if due else f" (session {session})."))
    if due:
        parts.append("Run rem_run to consolidate" + (" (or `mgcp rem run` / `mgcp rem review`)." if local else "."))
    else:
        parts.append(f"Run rem_run to review {'it' if pending == 1 else 'them'}"
                     + (" (or `mgcp rem review`)." if local else "."))
    text = " ".join(parts)
    return text if len(text) <= MAX_REMINDER else text[: MAX_REMINDER - 3] + "..."


def utcnow() -> str:
    """ISO-8601 UTC with microseconds, as `datetime.now(timezone.utc).isoformat()` writes it
    (the format of every other timestamp), without importing datetime on the hook's path."""
    ns = time.time_ns()
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000))
    return f"{seconds}.{ns // 1000 % 1_000_000:06d}+00:00"


def _open(db: str):
    """A connection with a short busy timeout, after creating or upgrading the database if needed."""
    conn = sessions.open_current(db, BUSY_TIMEOUT_S, set(migrate.migration_names()))
    if conn is not None:
        return conn
    # Slow path, once per upgrade: create or upgrade (a foreign, corrupt or newer file is refused
    # before anything is written to it).
    report = migrate.open_and_migrate(db)
    if report.failures:  # the good records are in; the rest is retried at the next start
        _log(RuntimeError(f"migration failures: {report.failures}"), None, "upgraded the database partly")
    conn = sessions.open_current(db, BUSY_TIMEOUT_S)
    if conn is None:
        raise FileNotFoundError(f"{db} vanished while it was being opened")
    return conn


def _log(exc: BaseException, payload: dict | None, what: str = "failed open") -> None:
    """Append one line to the hook log. Never raises: logging must not break the fail-open rule."""
    try:
        log = config.hook_log_path()
        log.parent.mkdir(parents=True, exist_ok=True)
        payload = payload if isinstance(payload, dict) else {}
        where = " ".join(f"{k}={str(payload.get(k))[:200]!r}" for k in ("session_id", "source", "cwd")
                         if payload.get(k) is not None)
        message = f"{type(exc).__name__}: {exc}"
        # The cause may hide behind a later error (a lock timeout behind a failed rollback): keep both.
        if exc.__context__ is not None and not exc.__suppress_context__:
            message += f" (while handling {type(exc.__context__).__name__}: {exc.__context__})"
        message = " ".join(message.split())[:1000]
        line = f"{utcnow()} rem-cycle-trigger {what}: {message}"
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(line + (f" ({where})" if where else "") + "\n")
    except BaseException:  # noqa: BLE001
        pass
