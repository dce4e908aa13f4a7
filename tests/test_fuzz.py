"""Hostile input, generated (hypothesis), through every surface: command-line arguments, MCP tool
arguments, catalogues, rem-config files, SessionStart payloads and raw JSON-RPC lines.

The properties: never a traceback or an "unexpected error"; input that is refused writes nothing;
input that is accepted reads back exactly (text is stored as given, less surrounding whitespace).
`MGCP_FUZZ_EXAMPLES` sets the examples per test (default 30; the chaos figures use 500), and
`MGCP_FUZZ_REPORT=FILE` writes how many inputs each surface received.
"""

import asyncio
import io
import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from clihelp import mgcp
from conftest import dump
from mgcp.persistence.migrate import open_and_migrate

EXAMPLES = int(os.environ.get("MGCP_FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("MGCP_FUZZ_EXAMPLES"),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])
INPUTS: Counter = Counter()

# Text as hostile callers send it: any code point, lone surrogates (what invalid UTF-8 becomes),
# control characters, SQL and FTS syntax, and now and then something huge.
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
ANY_CHAR = st.one_of(st.characters(codec=None, exclude_categories=["Cs"]), SURROGATES,
                     st.sampled_from(list("\x00\x01\x1b\x7f\n\r\t\u2028\ufeff\ufffd")))
NASTY = st.sampled_from(["'; DROP TABLE lessons; --", '"unterminated', "NEAR(a b)", "a OR b NOT c", "*", "^",
                         "col:value", "../../etc/passwd", "~", "/", ".", "", " ", "\\", "%s%n", "{0}", "NULL"])
TEXT = st.one_of(st.text(ANY_CHAR, max_size=60), NASTY, st.builds(lambda c, n: c * n, ANY_CHAR,
                                                                  st.integers(1_000, 30_000)))
NUMBER = st.one_of(st.integers(), st.integers(-3, 3), st.integers(2**62, 2**80).map(lambda n: n * (-1) ** n))


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if os.environ.get("MGCP_FUZZ_REPORT"):
        with open(os.environ["MGCP_FUZZ_REPORT"], "a") as fh:
            fh.write(json.dumps(dict(INPUTS)) + "\n")


@pytest.fixture
def base(tmp_path) -> Path:
    path = tmp_path / "fuzz.db"
    open_and_migrate(path)
    code, _, err = mgcp("lesson", "add", "target", "--trigger", "when fuzzing", "--action", "hold on, then retry", "--db", path)
    assert code == 0, err
    return path


def clean_exit(code: int, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err and "unexpected error" not in err, err
    if code:
        assert err.count("\n") == 1, err
        assert err.startswith("Error: ") or json.loads(err)["exit_code"] == code, err  # --json: a document


def stored(text: str) -> str:
    return text.strip()


# -- command line ---------------------------------------------------------------------------------

@FUZZ
@given(lesson_id=TEXT, trigger=TEXT, action=TEXT, tags=st.lists(TEXT, max_size=3))
def test_cli_lesson_add(base, lesson_id, trigger, action, tags):
    INPUTS["command line"] += 1
    before = dump(base)
    args = ["lesson", "add", lesson_id, "--trigger", trigger, "--action", action, "--db", base]
    for tag in tags:
        args += ["--tag", tag]
    code, out, err = mgcp(*args)
    clean_exit(code, err)
    if code:
        assert dump(base) == before
        return
    row = sqlite3.connect(base).execute("SELECT trigger, action, tags FROM lessons WHERE id = ?", [lesson_id]).fetchone()
    assert row[:2] == (stored(trigger), stored(action))
    assert json.loads(row[2]) == sorted({stored(t) for t in tags})  # tags are a set, kept sorted


@FUZZ
@given(reason=TEXT, action=TEXT, rationale=st.one_of(st.none(), TEXT))
def test_cli_lesson_refine(base, reason, action, rationale):
    INPUTS["command line"] += 1
    before = dump(base)
    args = ["lesson", "refine", "target", "--reason", reason, "--action", action, "--db", base]
    if rationale is not None:
        args += ["--rationale", rationale]
    code, _, err = mgcp(*args)
    clean_exit(code, err)
    if code:
        assert dump(base) == before
        return
    latest, previous = sqlite3.connect(base).execute(
        "SELECT action, refinement_reason FROM lesson_versions WHERE lesson_id = 'target' ORDER BY version DESC LIMIT 2")
    assert latest[0] == stored(action) and previous[1] == stored(reason)  # the reason is why v N was replaced


@FUZZ
@given(project=TEXT, session_id=st.one_of(st.none(), TEXT), notes=TEXT, todos=st.lists(TEXT, max_size=3),
       decision=st.one_of(st.none(), TEXT))
def test_cli_context_save(base, project, session_id, notes, todos, decision):
    INPUTS["command line"] += 1
    before = dump(base)
    args = ["context", "save", "--project", project, "--notes", notes, "--json", "--db", base]
    if session_id is not None:
        args += ["--session-id", session_id]
    for todo in todos:
        args += ["--todo", todo]
    if decision is not None:
        args += ["--decision", decision]
    code, out, err = mgcp(*args)
    clean_exit(code, err)
    if code:
        assert dump(base) == before
        return
    result = json.loads(out)
    if result["saved"]:
        snapshot = result["snapshot"]
        assert snapshot["notes"] == stored(notes) or (not stored(notes) and snapshot["notes"] is None)
        if todos:  # no --todo keeps the list as it was
            assert [t["content"] for t in snapshot["todos"]] == [stored(t) for t in todos]
        shown = mgcp("context", "show", "--project", project, "--json", "--db", base)
        assert shown[0] == 0, shown[2]


@FUZZ
@given(text=TEXT, limit=NUMBER, project=st.one_of(st.none(), TEXT))
def test_cli_query_and_numbers(base, text, limit, project):
    INPUTS["command line"] += 1
    args = ["lesson", "query", text, "--limit", str(limit), "--db", base]
    if project is not None:
        args += ["--project", project]
    clean_exit(*[mgcp(*args)[i] for i in (0, 2)])
    for args in (["context", "at", "--project", "/p", "--session", str(limit)],
                 ["context", "history", "--project", "/p", "--limit", str(limit)],
                 ["rem", "undo", "--run", str(limit)],
                 ["rem", "resolve", text or "x", "--option", str(limit), "--project", "/p"]):
        code, _, err = mgcp(*args, "--db", base)
        clean_exit(code, err)


# -- catalogues -----------------------------------------------------------------------------------

JSON_SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, st.floats(allow_nan=True, allow_infinity=True), TEXT)
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                               st.dictionaries(TEXT, inner, max_size=4)), max_leaves=30)


def nested(depth: int) -> dict:
    value: object = "bottom"
    for _ in range(depth):
        value = {"d": value}
    return value


@FUZZ
@given(catalogue=st.one_of(st.dictionaries(TEXT, JSON_VALUE, max_size=5),
                           st.integers(1, 2000).map(nested)))
def test_catalogue_is_refused_or_reads_back_exactly(base, run, catalogue):
    from mgcp.errors import InvalidInputError

    INPUTS["catalogue"] += 1
    before = dump(base)

    async def save_and_read(store):
        await store.context.save("/fuzz", None, notes="catalogue", catalogue=catalogue)
        project = await store.context.get_project("/fuzz")
        at = await store.context.at("/fuzz", project.session_count)
        return project.catalogue, at.catalogue

    try:
        current, replayed = run(base, save_and_read)
    except InvalidInputError:
        assert dump(base) == before
        return
    except RecursionError:  # too deep for Python itself to compare or encode: must have been refused
        raise AssertionError("a catalogue too deep to handle was accepted")
    assert current == catalogue and replayed == catalogue


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), st.text(ANY_CHAR, max_size=200).map(
    lambda t: t.encode("utf-8", "surrogatepass"))))
def test_catalogue_files_of_any_bytes(base, tmp_path, data):
    INPUTS["catalogue"] += 1
    before = dump(base)
    (tmp_path / "cat.json").write_bytes(data)
    code, _, err = mgcp("context", "save", "--project", "/fuzz", "--catalogue", tmp_path / "cat.json", "--db", base)
    clean_exit(code, err)
    if code:
        assert dump(base) == before


# -- rem-config files -----------------------------------------------------------------------------

YAML_LINES = st.lists(st.one_of(
    st.sampled_from(["rem:", "  staleness_scan:", "    interval: 3", "    strategy: fibonacci", "projects:",
                     "  /p:", "    duplicate_detection:", "      merge_threshold: .nan", "      max_findings: 1e999",
                     "a: &a [*a]", "b: !!python/object:os.system ls", "- [[[[[[", "interval: " + "9" * 5000,
                     "\t\tbad indent", "%YAML 9.9", "---", "...", "? complex key"]),
    st.text(ANY_CHAR, max_size=40)), max_size=8)


@FUZZ
@given(lines=YAML_LINES, encoding=st.sampled_from(["utf-8", "utf-16", "latin-1", "utf-8-sig"]))
def test_rem_config_files(base, tmp_path, lines, encoding):
    from mgcp.config import load_config
    from mgcp.errors import ConfigError

    INPUTS["rem-config"] += 1
    config = tmp_path / "rem-config.yaml"
    config.write_bytes("\n".join(lines).encode(encoding, "surrogatepass") if encoding != "latin-1"
                       else "\n".join(lines).encode("latin-1", "replace"))
    try:
        load_config(config)
    except ConfigError as exc:
        assert str(config) in str(exc)
    code, _, err = mgcp("rem", "status", "--project", "/p", "--config", config, "--db", base)
    clean_exit(code, err)


# -- the SessionStart hook ------------------------------------------------------------------------

@FUZZ
@given(payload=st.one_of(
    st.binary(max_size=300),
    st.fixed_dictionaries({}, optional={"session_id": st.one_of(TEXT, NUMBER, st.none()),
                                        "cwd": st.one_of(TEXT, NUMBER, st.lists(TEXT, max_size=2)),
                                        "source": st.one_of(TEXT, st.none(), NUMBER),
                                        "hook_event_name": TEXT}).map(
        lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass"))))
def test_session_start_payloads(base, monkeypatch, payload):
    from mgcp.surfaces import hook

    INPUTS["SessionStart hook"] += 1
    monkeypatch.setenv("MGCP_DB", str(base))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload), encoding="utf-8", errors="surrogateescape"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert hook.main() == 0
    if out.getvalue():
        reminder = json.loads(out.getvalue())
        assert reminder["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert sqlite3.connect(base).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- MCP: tool arguments and raw lines ------------------------------------------------------------

ARGUMENTS = st.dictionaries(st.sampled_from(["lesson_id", "trigger", "action", "rationale", "tags", "reason",
                                             "text", "limit", "project_path", "session_id", "notes", "todos",
                                             "decisions", "catalogue", "session", "finding_id", "option",
                                             "input", "selection", "run_id", "force", "source", "target",
                                             "type", "operations"]),
                            st.one_of(TEXT, NUMBER, st.booleans(), st.none(), st.lists(TEXT, max_size=3),
                                      st.dictionaries(TEXT, JSON_SCALAR, max_size=3)), max_size=6)
TOOLS = ["add_lesson", "refine_lesson", "query_lessons", "get_lesson_history", "link_lessons",
         "save_project_context", "get_project_context", "get_context_history", "get_context_at_session",
         "rem_status", "rem_report", "rem_run", "rem_answer", "rem_undo"]


@FUZZ
@given(tool=st.sampled_from(TOOLS), arguments=ARGUMENTS)
def test_mcp_tool_arguments(base, tool, arguments):
    from mcp.server.mcpserver.exceptions import ToolError

    from mgcp.surfaces.mcp_server import build_server

    INPUTS["MCP tools"] += 1
    if tool == "rem_run":
        arguments["operations"] = ["staleness_scan"]  # the cheap one: fuzzing is about the input
    server = build_server(str(base))
    try:
        result = asyncio.run(server.call_tool(tool, arguments))
    except ToolError as exc:
        # the arguments were refused (wrong type, out of range): the client gets them named in words
        assert "pydantic" not in str(exc) and "validation error" not in str(exc), str(exc)
        return
    text = result.content[0].text if result.content else ""
    assert "unexpected error" not in text, text


@FUZZ
@given(line=st.one_of(
    st.binary(max_size=200).filter(lambda b: b"\n" not in b),
    st.recursive(JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(TEXT, inner, max_size=3)), max_leaves=10).map(
        lambda v: json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": v},
                             ensure_ascii=False).encode("utf-8", "surrogatepass"))))
def test_raw_lines_are_accepted_or_refused_never_dropped(line):
    from mgcp.surfaces.mcp_server import rejection

    INPUTS["JSON-RPC lines"] += 1
    text = line.decode("utf-8", "surrogateescape")
    refused = rejection(text)
    if refused is not None:
        error, answer = refused
        assert error.error.code in (-32700, -32600, -32602)
        if text.lstrip().startswith('{"jsonrpc": "2.0", "id": 7'):
            assert answer and error.id in (7, None)


def test_a_burst_of_raw_lines_leaves_the_server_answering(base):
    """Malformed, deep, binary and huge lines in one burst; then a real request is answered."""
    lines = [b"", b"{", b"[]", b"null", b'{"jsonrpc": "2.0"}', b'{"jsonrpc": "2.0", "id": true, "method": "x"}',
             b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
             b"\xff\xfe\xfd", b"x" * 10_000_000, b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 5}']
    proc = subprocess.Popen([sys.executable, "-m", "mgcp", "serve", "--db", str(base)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}
    ping = {"jsonrpc": "2.0", "id": 99, "method": "tools/list"}
    data = b"\n".join([json.dumps(init).encode(), b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                       *lines, json.dumps(ping).encode()]) + b"\n"
    # stdin closed after the burst: the server answers every request it took before it stops
    out, _ = proc.communicate(data, timeout=180)
    replies = [json.loads(line) for line in out.splitlines()]
    INPUTS["JSON-RPC lines"] += len(lines)
    # replies may come in any order (JSON-RPC does not order them): an error for a line before the
    # request can follow its answer when the machine is busy
    answered = [r for r in replies if r.get("id") == 99]
    assert len(answered) == 1 and answered[0]["result"]["tools"]
    assert all(r.get("error", {}).get("code", 0) in (0, -32700, -32600, -32602, -32601) for r in replies)
