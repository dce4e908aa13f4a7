"""The MCP server (`mgcp serve`), driven over stdio by the official MCP client (mcp 2.x:
`mcp.client.stdio.stdio_client` + `ClientSession`).

One server process serves the whole module (starting one costs about two seconds, mostly the SDK's
imports). Tests stay independent because the server opens the database per call: before each test
the database file is replaced with a fresh one, and the running server simply opens the new file.
"""

import asyncio
import concurrent.futures
import json
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from clihelp import mgcp
from conftest import ROOT, dump
from mgcp.models import LessonStatus
from mgcp.persistence.migrate import open_and_migrate

SERVE = ["-c", "from mgcp.surfaces.cli import main; main()", "serve"]
PROJECT = "/work/projects/shop"
SECRET = "sk-ant-" + "abcdefghijklmnopqrstuvwxyzabcd"

TOOLS = {
    "add_lesson", "refine_lesson", "query_lessons", "get_lesson_history", "link_lessons",
    "save_project_context", "get_project_context", "get_context_history", "get_context_at_session",
    "rem_status", "rem_report", "rem_run", "rem_answer", "rem_undo",
    "list_lessons", "get_lesson",
    "lesson_outcome", "recall", "lesson_stats",
    "pattern_reinforcement_run",
}
READ_ONLY = {"get_lesson_history", "get_project_context", "get_context_history", "get_context_at_session",
             "list_lessons", "get_lesson", "lesson_stats"}

# Two near-identical lessons (a duplicate) and four unlinked lessons on one topic (a cluster).
KB = [
    ("verify-method-exists", "calling a method on an unfamiliar library object",
     "Before calling any method, verify it exists in the library docs or source", ["api"]),
    ("check-method-exists", "calling a method on an unfamiliar library object",
     "Before calling any method, verify that it exists in the library docs or source code", ["api"]),
    ("webhook-retry-logic", "handling webhook delivery failures and retries",
     "Retry webhook deliveries with exponential backoff and idempotency keys", ["webhooks"]),
    ("stripe-signature-verify", "receiving stripe webhook events",
     "Verify the webhook signature header before trusting the payload", ["webhooks"]),
    ("dead-letter-queue-replay", "webhook events that failed permanently",
     "Send failed webhook events to a dead letter queue and replay them later", ["webhooks"]),
    ("webhook-timeout-handling", "slow webhook handlers timing out",
     "Acknowledge webhooks quickly and process the event in a background job", ["webhooks"]),
]
REM_OPS = ["duplicate_detection", "community_detection"]


class Client:
    """An MCP client session to one `mgcp serve` process, run on an event loop in a background
    thread so that plain (sync) tests can share it."""

    def __init__(self, params: StdioServerParameters, errlog):
        self.stream_errors: list[Exception] = []
        self.longest = 0  # the longest reply's text, in characters
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ready: concurrent.futures.Future = concurrent.futures.Future()
        self.done = asyncio.run_coroutine_threadsafe(self._connect(params, errlog), self.loop)
        self.session: ClientSession = self.ready.result(timeout=60)

    async def _connect(self, params, errlog):
        self.stop = asyncio.Event()
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, message_handler=self._on_message) as session:
                    await session.initialize()
                    self.ready.set_result(session)
                    await self.stop.wait()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            raise

    async def _on_message(self, message):
        if isinstance(message, Exception):  # e.g. a stdout line that is not JSON-RPC
            self.stream_errors.append(message)

    def _await(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def list_tools(self):
        return self._await(self.session.list_tools()).tools

    def call(self, name: str, **arguments):
        result = self._await(self.session.call_tool(name, arguments))
        self.longest = max(self.longest, sum(len(getattr(part, "text", "")) for part in result.content))
        return result

    def ok(self, name: str, **arguments) -> dict:
        result = self.call(name, **arguments)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    def error(self, name: str, **arguments) -> str:
        result = self.call(name, **arguments)
        assert result.is_error, result.structured_content
        assert len(result.content) == 1
        return result.content[0].text

    def close(self):
        self.loop.call_soon_threadsafe(self.stop.set)
        self.done.result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def server_db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "lessons.db"


@pytest.fixture(scope="module")
def client(server_db):
    base = server_db.parent
    params = StdioServerParameters(
        command=sys.executable, args=[*SERVE, "--db", str(server_db)],
        # Never a real ~/.mgcp, even for the config lookup.
        env={"MGCP_DATA_DIR": str(base / "data"), "HOME": str(base / "home")})
    with open(base / "server.log", "w") as errlog:
        c = Client(params, errlog)
        yield c
        c.close()


@pytest.fixture
def db(server_db, client) -> Path:
    """A fresh database under the running server (it opens the file anew on every call)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{server_db}{suffix}").unlink(missing_ok=True)
    open_and_migrate(server_db)
    return server_db


@pytest.fixture
def kb(db, run) -> Path:
    async def seed(store):
        for lesson_id, trigger, action, tags in KB:
            await store.lessons.add(lesson_id, trigger, action, tags=tags)
    run(db, seed)
    return db


def first_finding(client) -> dict:
    return client.ok("rem_run", project_path=PROJECT, operations=REM_OPS)["finding"]


def choose(finding: dict, label_start: str) -> int:
    return next(o["number"] for o in finding["options"] if o["label"].startswith(label_start))


# -- the tool list ---------------------------------------------------------------------------------

def test_every_tool_is_listed_with_a_description(client):
    tools = {t.name: t for t in client.list_tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
    readme = (ROOT / "README.md").read_text()
    assert [name for name in sorted(TOOLS) if f"`{name}`" not in readme] == []  # the README lists them all


def test_descriptions_carry_no_source_indentation(client):
    for tool in client.list_tools():
        assert not any(line.startswith(" ") for line in tool.description.splitlines()), tool.name


def test_read_only_tools_are_annotated_so_and_only_they(client):
    annotated = {t.name for t in client.list_tools() if t.annotations and t.annotations.read_only_hint}
    assert annotated == READ_ONLY


def test_list_and_get_lessons_by_id_count_no_retrieval(client, db):
    client.ok("add_lesson", lesson_id="b-two", trigger="second", action="Do the second thing", tags=["x"])
    client.ok("add_lesson", lesson_id="a-one", trigger="first", action="Do the first thing")
    listed = client.ok("list_lessons")["lessons"]
    assert [x["id"] for x in listed] == ["a-one", "b-two"] and listed[1]["tags"] == ["x"]
    assert [x["id"] for x in client.ok("list_lessons", tag="x")["lessons"]] == ["b-two"]
    lesson = client.ok("get_lesson", lesson_id="b-two")
    assert lesson["action"] == "Do the second thing" and lesson["usage_count"] == 0
    assert "no lesson with id 'nope'" in client.error("get_lesson", lesson_id="nope")


def test_lessons_are_listed_a_page_at_a_time_each_once(client, db, run):
    async def seed(store):
        for i in range(7):
            await store.lessons.add(f"rule-{i}", f"situation {i}", f"Do thing {i}", tags=["odd"] if i % 2 else [])
        await store.lessons.set_lifecycle("rule-3", LessonStatus.archived, "retired")
    run(db, seed)
    seen, after = [], None
    while True:
        page = client.ok("list_lessons", limit=2, **({"after": after} if after else {}))
        seen += [x["id"] for x in page["lessons"]]
        after = page["next_after"]
        if after is None:
            break
        assert after == seen[-1] and len(page["lessons"]) == 2
    assert seen == ["rule-0", "rule-1", "rule-2", "rule-4", "rule-5", "rule-6"]
    assert client.ok("list_lessons", tag="odd", after="rule-1") == {"lessons": [
        {"id": "rule-5", "version": 1, "status": "active", "tags": ["odd"], "trigger": "situation 5"}],
        "next_after": None}
    assert [x["id"] for x in client.ok("list_lessons", status="all", after="rule-2", limit=1)["lessons"]] == ["rule-3"]
    assert "limit" in client.error("list_lessons", limit=501)
    assert "limit" in client.error("query_lessons", text="situation", limit=21)


@pytest.mark.parametrize("as_text", [False, True])
def test_a_draft_edit_is_accepted_as_an_object_or_a_json_string(client, db, as_text):
    client.ok("save_project_context", project_path=PROJECT, session_id="s1",
              decisions=["Run every schema migration inside a transaction with a lock timeout"])
    finding = client.ok("rem_run", project_path=PROJECT, operations=["knowledge_extraction"])["finding"]
    assert finding and finding["options"][0]["needs_input"]
    edits = {"id": "migrations-in-transactions", "action": "Wrap each migration in a transaction",
             "tags": ["migrations"]}
    client.ok("rem_answer", project_path=PROJECT, finding_id=finding["finding_id"], option=1,
              input=json.dumps(edits) if as_text else edits)
    lesson = client.ok("get_lesson", lesson_id="migrations-in-transactions")
    assert (lesson["action"], lesson["tags"]) == (edits["action"], edits["tags"])


UNKNOWN = "the draft edits name an unknown field 'actoin' (a draft has id, trigger, action, rationale and tags)"
TAGS = 'a draft\'s tags must be a list of strings, e.g. ["testing"] (got "testing")'


@pytest.mark.parametrize("edits, message", [
    ({"actoin": "Use pytest fixtures for setup"}, UNKNOWN),
    ({"tags": "testing"}, TAGS),
    ({"actoin": "Use pytest fixtures for setup", "tags": "testing"}, f"{UNKNOWN}; {TAGS}"),
])
def test_a_draft_edit_with_an_unknown_field_or_tags_as_text_is_refused(client, db, run, edits, message):
    client.ok("save_project_context", project_path=PROJECT, session_id="s1",
              decisions=["Run every schema migration inside a transaction with a lock timeout"])
    finding = client.ok("rem_run", project_path=PROJECT, operations=["knowledge_extraction"])["finding"]
    assert client.error("rem_answer", project_path=PROJECT, finding_id=finding["finding_id"], option=1,
                        input=edits) == message
    assert client.ok("list_lessons")["lessons"] == []
    assert run(db, lambda s: s.rem.get_finding(finding["finding_id"])).status.value == "pending"


def test_refine_lesson_requires_a_reason(client):
    schema = next(t for t in client.list_tools() if t.name == "refine_lesson").input_schema
    assert {"lesson_id", "reason"} <= set(schema["required"])


# -- lessons ---------------------------------------------------------------------------------------

def test_add_then_refine_is_kept_in_history(client, db):
    added = client.ok("add_lesson", lesson_id="verify-api", trigger="calling an unfamiliar API",
                      action="Read its signature first", tags=["api"])
    assert added["version"] == 1
    refined = client.ok("refine_lesson", lesson_id="verify-api", reason="too vague",
                        action="Read the signature and one usage example")
    assert refined["version"] == 2
    history = client.ok("get_lesson_history", lesson_id="verify-api")["versions"]
    assert [(v["version"], v["action"], v["refinement_reason"]) for v in history] == [
        (1, "Read its signature first", "too vague"),
        (2, "Read the signature and one usage example", None)]
    last = client.ok("get_lesson_history", lesson_id="verify-api", limit=1)
    assert [v["version"] for v in last["versions"]] == [2] and last["total"] == 2


def test_text_content_carries_the_same_json(client, db):
    result = client.call("add_lesson", lesson_id="pin-deps", trigger="adding a dependency",
                         action="Pin its major version")
    assert json.loads(result.content[0].text) == result.structured_content


def test_query_counts_a_retrieval(client, db, run):
    client.ok("add_lesson", lesson_id="wal-mode", trigger="opening sqlite from several processes",
              action="Use WAL mode and a busy timeout")
    results = client.ok("query_lessons", text="sqlite processes", limit=3, project_path=PROJECT)["results"]
    assert [r["id"] for r in results] == ["wal-mode"]
    assert results[0]["usage_count"] == 1
    assert run(db, lambda s: s.lessons.get("wal-mode")).usage_count == 1


def test_link_lessons_links_both_ways(client, db, run):
    for lesson_id in ("a-lesson", "b-lesson"):
        client.ok("add_lesson", lesson_id=lesson_id, trigger=f"{lesson_id} trigger", action=f"Do the {lesson_id} thing.")
    assert client.ok("link_lessons", source="a-lesson", target="b-lesson", type="complements")["added"]
    b = run(db, lambda s: s.lessons.get("b-lesson"))
    assert [(r.target, r.type) for r in b.relationships] == [("a-lesson", "complements")]


# -- project context -------------------------------------------------------------------------------

def save_twice(client):
    client.ok("save_project_context", project_path=PROJECT, session_id="s-1", notes="started checkout",
              todos=[{"content": "write tests"}], decisions=["use stripe"], catalogue={"db": "sqlite"})
    return client.ok("save_project_context", project_path=PROJECT, session_id="s-2", notes="checkout done",
                     todos=[{"content": "write tests", "status": "completed"}],
                     active_files=["shop/checkout.py"], catalogue={"db": "sqlite", "queue": "redis"})


def test_second_save_opens_session_two(client, db):
    saved = save_twice(client)
    assert saved["saved"] and saved["snapshot"]["session_number"] == 2
    current = client.ok("get_project_context", project_path=PROJECT)
    assert current["notes"] == "checkout done" and current["session_count"] == 2
    assert current["todos"][0]["status"] == "completed"


def test_context_history_lists_both_saves(client, db):
    save_twice(client)
    history = client.ok("get_context_history", project_path=PROJECT)["history"]
    assert [(h["session_number"], h["notes"]) for h in history] == [(1, "started checkout"), (2, "checkout done")]
    assert len(client.ok("get_context_history", project_path=PROJECT, limit=1)["history"]) == 1


def test_context_history_gives_the_last_ten_saves_and_how_many_there_are(client, db):
    for i in range(12):
        client.ok("save_project_context", project_path=PROJECT, session_id=f"s{i}", notes=f"step {i}")
    reply = client.ok("get_context_history", project_path=PROJECT)
    assert [h["notes"] for h in reply["history"]] == [f"step {i}" for i in range(2, 12)] and reply["total"] == 12
    assert len(client.ok("get_context_history", project_path=PROJECT, limit=50)["history"]) == 12


def test_context_at_session_rebuilds_that_catalogue(client, db):
    save_twice(client)
    at = client.ok("get_context_at_session", project_path=PROJECT, session=1)
    assert at["snapshot"]["notes"] == "started checkout" and at["catalogue"] == {"db": "sqlite"} and at["verified"]


# -- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool, arguments, cli", [
    ("get_lesson_history", {"lesson_id": "no-such-lesson"}, ["lesson", "history", "no-such-lesson"]),
    ("refine_lesson", {"lesson_id": "no-such-lesson", "reason": "r", "action": "a"},
     ["lesson", "refine", "no-such-lesson", "--reason", "r", "--action", "a"]),
    ("save_project_context", {"project_path": PROJECT, "notes": f"key {SECRET}"},
     ["context", "save", "--project", PROJECT, "--notes", f"key {SECRET}"]),
    ("add_lesson", {"lesson_id": "leaky", "trigger": "t", "action": f"use {SECRET}"},
     ["lesson", "add", "leaky", "--trigger", "t", "--action", f"use {SECRET}"]),
])
def test_bad_input_is_a_tool_error_with_the_cli_message(client, db, tool, arguments, cli):
    message = client.error(tool, **arguments)
    code, out, err = mgcp(*cli, "--db", db)
    assert code == 2 and out == ""
    assert err == f"Error: {message}\n"


def test_secret_is_not_stored(client, db, run):
    client.error("save_project_context", project_path=PROJECT, notes=f"key {SECRET}")
    assert run(db, lambda s: s.context.find_project(PROJECT)) is None


def test_unexpected_failure_is_a_tool_error_and_the_server_lives_on(client, db):
    """A failure nobody anticipated (today: a session number beyond SQLite's integer range)."""
    save_twice(client)
    text = client.error("get_context_at_session", project_path=PROJECT, session=2**70)
    assert text
    assert client.ok("get_project_context", project_path=PROJECT)["session_count"] == 2


@pytest.mark.parametrize("path", ["", "relative/path", "~/shop"])
def test_a_project_path_that_is_not_absolute_is_refused_and_nothing_is_saved(client, db, path):
    """On a shared server, a relative path would name a project under the server's own directory."""
    assert client.error("save_project_context", project_path=path, notes="checkout done") == (
        f"project_path must be the project's absolute path (got {json.dumps(path)})")
    assert sqlite3.connect(db).execute("SELECT count(*) FROM project_contexts").fetchone() == (0,)


@pytest.mark.parametrize("tool, arguments", [
    ("get_project_context", {}), ("rem_status", {}), ("rem_answer", {"finding_id": "0" * 16, "option": 1}),
    ("query_lessons", {"text": "sqlite"}), ("recall", {"task": "add retries"}),
    ("lesson_outcome", {"lesson_id": "wal-mode", "helped": True}),
])
def test_every_tool_refuses_a_relative_project_path(client, db, tool, arguments):
    assert client.error(tool, project_path="shop", **arguments).startswith("project_path must be the project's absolute path")


@pytest.mark.parametrize("tool, arguments, message", [
    ("add_lesson", {"lesson_id": "a-b", "trigger": "t", "action": "a", "confidence": 1.5},
     "confidence must be between 0 and 1 (got 1.5)"),
    ("add_lesson", {"lesson_id": "a-b", "trigger": "t", "action": "a", "kind": "rule"},
     "kind must be one of constraint, preference, architecture, pattern, error_solution, project_fact, "
     'style, decision (got "rule")'),
    ("save_project_context", {"project_path": PROJECT, "todos": [{"content": "a", "status": "wip"}]},
     'todos[0].status must be one of pending, in_progress, completed (got "wip")'),
    ("recall", {"task": "add retries", "budget": 399}, "budget must be between 400 and 1000000 (got 399)"),
    ("rem_answer", {"project_path": PROJECT, "finding_id": "0" * 16, "option": "one"},
     'option must be a whole number (got "one")'),
    ("rem_answer", {"project_path": PROJECT, "finding_id": "0" * 16, "option": 1, "input": 5},
     "input must be text or an object (got 5)"),
    ("add_lesson", {"lesson_id": "a-b", "trigger": "t"}, "action is required"),
    ("add_lesson", {"lesson_id": "a-b", "trigger": "t", "action": "a", "tags": "testing"},
     'tags must be a list of strings (got "testing")'),
    ("add_lesson", {"lesson_id": "a-b", "trigger": "t", "action": "a", "kind": "rule", "confidence": 2},
     "kind must be one of constraint, preference, architecture, pattern, error_solution, project_fact, style, "
     'decision (got "rule")\nconfidence must be between 0 and 1 (got 2)'),
])
def test_a_bad_argument_is_named_with_its_value_and_what_is_allowed(client, db, tool, arguments, message):
    assert client.error(tool, **arguments) == message


@pytest.mark.parametrize("tool, arguments, message", [
    ("lesson_outcome", {"lesson_id": "verify-api", "helped": "true"}, 'helped must be true or false (got "true")'),
    ("lesson_outcome", {"lesson_id": "verify-api", "helped": 1}, "helped must be true or false (got 1)"),
    ("rem_answer", {"project_path": PROJECT, "finding_id": "0" * 16, "option": "1"},
     'option must be a whole number (got "1")'),
    ("query_lessons", {"text": "api", "limit": "3"}, 'limit must be a whole number (got "3")'),
    ("query_lessons", {"text": "api", "limit": 2.0}, "limit must be a whole number (got 2.0)"),
    ("get_context_at_session", {"project_path": PROJECT, "session": "1"}, 'session must be a whole number (got "1")'),
    ("add_lesson", {"lesson_id": "a-b", "trigger": "calling an api", "action": "Read it first", "confidence": "0.7"},
     'confidence must be a number (got "0.7")'),
    ("add_lesson", {"lesson_id": "a-b", "trigger": "calling an api", "action": "Read it first", "tags": ["api", True]},
     "tags[1] must be text (got true)"),
])
def test_a_value_of_another_type_is_refused_not_converted(client, db, tool, arguments, message):
    """The SDK's validation would take "true" or 1 for true and "3" or 3.0 for 3, and act on them."""
    client.ok("add_lesson", lesson_id="verify-api", trigger="calling an unfamiliar API", action="Read its signature first")
    client.ok("save_project_context", project_path=PROJECT, session_id="s1", notes="started")
    before = dump(db)
    assert client.error(tool, **arguments) == message
    assert dump(db) == before


def nul(field: str, at: int) -> str:
    return f"{field} holds a NUL character (\\x00) at character {at}, which cannot be stored"


@pytest.mark.parametrize("tool, arguments, message", [
    ("add_lesson", {"lesson_id": "nul", "trigger": "when a \x00 byte", "action": "Refuse it, clearly"}, nul("trigger", 8)),
    ("add_lesson", {"lesson_id": "nul", "trigger": "when a byte", "action": "Refuse it\x00"}, nul("action", 10)),
    ("add_lesson", {"lesson_id": "nul", "trigger": "when a byte", "action": "Refuse it, clearly", "tags": ["x\x00"]},
     nul("tag", 2)),
    ("save_project_context", {"project_path": PROJECT, "notes": "done\x00"}, nul("notes", 5)),
    ("save_project_context", {"project_path": PROJECT, "todos": [{"content": "\x00x"}]}, nul("todo", 1)),
    ("save_project_context", {"project_path": PROJECT, "decisions": ["x\x00"]}, nul("decision", 2)),
    ("save_project_context", {"project_path": PROJECT, "active_files": ["a\x00.py"]}, nul("active file", 2)),
    ("save_project_context", {"project_path": PROJECT, "notes": "n", "session_id": "s\x00"}, nul("session id", 2)),
    ("save_project_context", {"project_path": PROJECT + "\x00", "notes": "n"}, nul("project_path", len(PROJECT) + 1)),
    ("query_lessons", {"text": "a\x00"}, nul("text", 2)),  # a query is logged
])
def test_a_nul_character_is_refused_as_a_command_line_would_and_nothing_is_written(client, db, tool, arguments,
                                                                                    message):
    before = dump(db)
    assert client.error(tool, **arguments) == message
    assert dump(db) == before


def test_an_argument_the_tool_does_not_take_is_refused_and_nothing_is_written(client, db):
    message = client.error("add_lesson", lesson_id="a-b", trigger="when tagging", action="Tag it.", tag=["x"])
    assert message.startswith("add_lesson takes no argument 'tag'; it takes lesson_id, trigger, action")
    assert "tags" in message and "no lesson" in client.error("get_lesson", lesson_id="a-b")
    assert client.error("query_lessons", text="tagging", limt=3) == (
        "query_lessons takes no argument 'limt'; it takes text, limit, project_path, explain")


def test_a_finding_id_shorter_than_eight_characters_says_so(client, kb):
    finding = first_finding(client)
    assert client.error("rem_answer", project_path=PROJECT, finding_id=finding["finding_id"][:4], option=1) == (
        f"finding id {finding['finding_id'][:4]!r} is too short: give at least 8 of its 16 characters")


# -- REM -------------------------------------------------------------------------------------------

def test_rem_status_lists_every_operation(client, db):
    status = client.ok("rem_status", project_path=PROJECT)
    assert {o["operation"] for o in status["operations"]} == {
        "staleness_scan", "duplicate_detection", "community_detection", "knowledge_extraction",
        "context_summary", "pattern_reinforcement", "contradiction_scan"}
    assert status["pending_findings"] == 0


def test_rem_report_before_any_run(client, db):
    assert client.ok("rem_report", project_path=PROJECT)["report"] is None


def test_rem_report_lists_findings_as_lines_and_stays_small(client, db, run):
    """Sixty copied lessons: fifty duplicate findings and a summary of the rest wait; the report
    lists fifty, one line each, counts them all, and fits where a client takes a reply whole."""
    async def seed(store):
        for i in range(60):
            action = f"Pin the qz{i:03d}x gateway release before rolling out its wy{i:03d}k schema"
            await store.lessons.add(f"pin-{i:03d}", f"releasing the qz{i:03d}x gateway", action)
            await store.lessons.add(f"copy-{i:03d}", f"rolling out the wy{i:03d}k schema", action)
    run(db, seed)
    ran = client.ok("rem_run", project_path=PROJECT, operations=["duplicate_detection"])
    result = client.call("rem_report", project_path=PROJECT)
    assert not result.is_error and len(result.content[0].text) < 50_000
    reply = result.structured_content
    assert reply["pending_count"] == ran["pending"] > 50 and len(reply["pending"]) == 50
    assert sum(reply["pending_by_kind"].values()) == reply["pending_count"]
    assert reply["pending_by_kind"]["duplicate_merge"] == 50
    assert set(reply["pending"][0]) == {"id", "operation", "kind", "title", "status", "created_at"}
    assert reply["report"]["findings_count"] == ran["run"]["new_findings"] and len(reply["report"]["findings"]) == 50
    assert "the first 50 listed" in reply["message"]


def test_rem_run_rejects_an_unknown_operation(client, db):
    assert client.error("rem_run", project_path=PROJECT, operations=["dreaming"]).startswith(
        "unknown operation 'dreaming'")


def test_rem_run_with_nothing_due_runs_nothing(client, kb):
    result = client.ok("rem_run", project_path=PROJECT)
    assert result["run"]["operations"] == [] and result["finding"] is None and result["remaining"] == 0
    assert "nothing (no operation is due)" in result["message"]


def test_rem_run_returns_the_first_finding_as_a_question(client, kb):
    result = client.ok("rem_run", project_path=PROJECT, operations=REM_OPS)
    assert [o["operation"] for o in result["run"]["operations"]] == REM_OPS
    assert not any("error" in o for o in result["run"]["operations"])
    finding = result["finding"]
    assert finding["header"] == "Duplicate" and len(finding["header"]) <= 12
    assert "verify-method-exists" in finding["question"] and "check-method-exists" in finding["question"]
    assert [o["number"] for o in finding["options"]] == list(range(1, len(finding["options"]) + 1))
    assert all(o["label"] and "description" in o for o in finding["options"])
    assert finding["options"][finding["recommended"] - 1]["label"].startswith("Merge")
    assert finding["multiSelect"] is False and finding["choices"] == []
    assert [n["option"] for n in finding["needs_input"]] == [choose(finding, "Delete one")]
    assert result["remaining"] >= 1


def test_an_answer_with_input_or_a_selection_for_an_option_that_takes_neither_is_refused(client, kb):
    """An agent that mixed up option numbers (a refine's text sent with "keep both") gets an error,
    not the other option applied."""
    finding = first_finding(client)
    keep = choose(finding, "Keep both")
    assert "takes no input" in client.error("rem_answer", project_path=PROJECT, finding_id=finding["finding_id"],
                                            option=keep, input="merge them into verify-method-exists")
    assert "takes no selection" in client.error("rem_answer", project_path=PROJECT,
                                                finding_id=finding["finding_id"], option=keep,
                                                selection=["verify-method-exists"])
    assert first_finding(client)["finding_id"] == finding["finding_id"]  # still pending


def test_cluster_finding_is_multi_select(client, kb):
    first = first_finding(client)
    cluster = client.ok("rem_answer", project_path=PROJECT, finding_id=first["finding_id"], option=choose(first, "Skip for now"))["finding"]
    assert cluster["header"] == "Cluster" and cluster["multiSelect"] is True
    assert sorted(cluster["choices"]) == sorted(k[0] for k in KB[2:])
    subset = [o for o in cluster["options"] if o.get("multi_select")]
    assert len(subset) == 1


def test_answering_findings_one_by_one_until_none_remain(client, kb, run):
    finding, answered = first_finding(client), []
    while finding is not None:
        assert len(answered) < 10, "the review does not end"
        if finding["header"] == "Cluster":  # pick a subset: exercises the multi-select path
            option = next(o["number"] for o in finding["options"] if o.get("multi_select"))
            result = client.ok("rem_answer", project_path=PROJECT, finding_id=finding["finding_id"], option=option,
                               selection=["stripe-signature-verify", "webhook-retry-logic"])
        else:
            result = client.ok("rem_answer", project_path=PROJECT, finding_id=finding["finding_id"], option=finding["recommended"])
        answered.append((finding["header"], result["result"]["action"]))
        finding = result["finding"]
    assert result["pending"] == 0 and "No findings remain" in result["message"]
    assert ("Duplicate", "merge") in answered and ("Cluster", "link_subset") in answered

    kept = run(kb, lambda s: s.lessons.get("verify-method-exists"))
    merged = run(kb, lambda s: s.lessons.get("check-method-exists"))
    assert kept.version == 2 and merged.status.value == "superseded" and merged.superseded_by == kept.id
    stripe = run(kb, lambda s: s.lessons.get("stripe-signature-verify"))
    assert "webhook-retry-logic" in [r.target for r in stripe.relationships]
    assert client.ok("rem_status", project_path=PROJECT)["pending_findings"] == 0


def test_skip_moves_on_and_leaves_the_finding_pending(client, kb):
    first = first_finding(client)
    result = client.ok("rem_answer", project_path=PROJECT, finding_id=first["finding_id"], option=choose(first, "Skip for now"))
    assert result["result"]["action"] == "skip"
    assert result["finding"]["finding_id"] != first["finding_id"]
    report = client.ok("rem_report", project_path=PROJECT)["report"]
    assert {f["id"]: f["status"] for f in report["findings"]}[first["finding_id"]] == "pending"


def test_an_option_out_of_range_is_a_tool_error_with_the_cli_message(client, kb):
    first = first_finding(client)
    message = client.error("rem_answer", project_path=PROJECT, finding_id=first["finding_id"], option=9)
    code, _, err = mgcp("rem", "resolve", first["finding_id"], "--option", "9", "--db", kb)
    assert code == 2 and err == f"Error: {message}\n"


def test_a_subset_option_without_a_selection_is_a_tool_error(client, kb):
    first = first_finding(client)
    cluster = client.ok("rem_answer", project_path=PROJECT, finding_id=first["finding_id"], option=choose(first, "Skip for now"))["finding"]
    option = next(o["number"] for o in cluster["options"] if o.get("multi_select"))
    assert client.error("rem_answer", project_path=PROJECT, finding_id=cluster["finding_id"], option=option).startswith("pick two or more")


def test_rem_undo_restores_a_merge(client, kb):
    first = first_finding(client)
    client.ok("rem_answer", project_path=PROJECT, finding_id=first["finding_id"], option=choose(first, "Merge"))
    undone = client.ok("rem_undo", project_path=PROJECT, finding_id=first["finding_id"])
    assert first["finding_id"] in undone["message"]
    code, out, _ = mgcp("lesson", "show", "check-method-exists", "--json", "--db", kb)
    assert code == 0 and json.loads(out)["status"] == "active"


def test_a_session_id_is_checked_by_every_tool_that_stores_one(client, db):
    client.ok("add_lesson", lesson_id="verify-api", trigger="calling an unfamiliar API",
              action="Read its signature first, then one call site.")
    before = client.ok("lesson_stats")
    long = "s" * 201
    for tool, args in (("add_lesson", {"lesson_id": "other", "trigger": "when shipping", "action": "Tag the release first."}),
                       ("refine_lesson", {"lesson_id": "verify-api", "reason": "too vague", "action": "Read the signature."}),
                       ("lesson_outcome", {"lesson_id": "verify-api", "helped": False}),
                       ("save_project_context", {"project_path": PROJECT, "notes": "a note"})):
        assert "session id is too long" in client.error(tool, session_id=long, **args), tool
    assert client.ok("lesson_stats") == before


def test_rem_undo_needs_exactly_one_target(client, db):
    assert client.error("rem_undo", project_path=PROJECT) == "name a finding id or a run id (one of them)"



# -- the transport ---------------------------------------------------------------------------------

def test_stdout_carries_only_protocol_messages(client, kb):
    """Every line on the server's stdout parsed as JSON-RPC (the client reports any other line as a
    transport error), through startup, a REM run with its progress, and an error."""
    client.ok("rem_run", project_path=PROJECT, operations=REM_OPS)
    client.error("get_lesson_history", lesson_id="no-such-lesson")
    client._await(client.session.send_ping())
    assert client.stream_errors == []


# -- a long cycle does not make the server deaf ------------------------------------------------------

SLOW_SERVE = ["-c", "import time; from mgcp.operations import staleness_scan as op; scan = op.scan; "
                    "op.scan = lambda *a, **k: (time.sleep(3), scan(*a, **k))[1]; "
                    "from mgcp.surfaces.cli import main; main()", "serve"]


def test_another_call_answers_while_a_rem_cycle_runs(tmp_path, run):
    """An operation that takes 3 s (a stand-in for a cycle at scale) runs in a worker thread, so
    rem_status, sent while rem_run is still working, answers within a second."""
    path = tmp_path / "lessons.db"
    open_and_migrate(path)
    params = StdioServerParameters(command=sys.executable, args=[*SLOW_SERVE, "--db", str(path)],
                                   env={"MGCP_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path / "home")})
    with open(tmp_path / "server.log", "w") as errlog:
        client = Client(params, errlog)
        try:
            cycle = asyncio.run_coroutine_threadsafe(client.session.call_tool(
                "rem_run", {"project_path": PROJECT, "operations": ["staleness_scan"]}), client.loop)
            time.sleep(1.0)
            started = time.perf_counter()
            status = client.ok("rem_status", project_path=PROJECT)
            answered_in = time.perf_counter() - started
            assert not cycle.done() and answered_in < 1.0, answered_in
            assert status["project_path"] == PROJECT
            assert not cycle.result(timeout=60).is_error
        finally:
            client.close()


# -- write-time dedup, outcomes and recall -----------------------------------------------------------

def test_add_lesson_twice_returns_the_existing_one_and_names_a_near_match(client, db):
    first = client.ok("add_lesson", lesson_id="verify-api", trigger="calling an unfamiliar API",
                      action="Read its signature first, then one call site.", kind="pattern", confidence=0.9)
    assert first["existing"] is False and first["confidence"] == 0.9
    again = client.ok("add_lesson", lesson_id="verify-api-2", trigger="Calling an unfamiliar API.",
                      action="read its signature first; then one call-site")
    assert again["existing"] is True and again["id"] == "verify-api"
    near = client.ok("add_lesson", lesson_id="check-api", trigger="calling an unknown API",
                     action="Read its signature first, then one real call site.")
    assert near["existing"] is False and near["similar"][0]["id"] == "verify-api"
    assert "greeting or an acknowledgement" in client.error("add_lesson", lesson_id="x", trigger="thanks",
                                                            action="Read the docs first.")


def test_lesson_outcome_raises_the_finding_as_a_question(client, db):
    client.ok("add_lesson", lesson_id="verify-api", trigger="calling an unfamiliar API",
              action="Read its signature first, then one call site.")
    for _ in range(2):
        assert client.ok("lesson_outcome", lesson_id="verify-api", helped=False)["finding"] is None
    third = client.ok("lesson_outcome", lesson_id="verify-api", helped=False, note="docs were stale")
    assert third["streak"] == 3 and third["finding"]["header"] == "Failing" and "streak_started" not in third
    archive = choose(third["finding"], "Archive")
    answered = client.ok("rem_answer", project_path=PROJECT, finding_id=third["finding"]["finding_id"], option=archive)
    assert "archived verify-api" in answered["message"]
    assert client.ok("rem_undo", project_path=PROJECT, finding_id=third["finding"]["finding_id"])["message"].startswith("undid archive")
    assert client.ok("lesson_stats")["outcomes"]["failed"] == 3


def test_recall_tool_returns_the_budgeted_section(client, db):
    client.ok("add_lesson", lesson_id="never-force-push", trigger="pushing to main",
              action="Never force-push to main; open a pull request.", kind="constraint", confidence=0.97)
    client.ok("add_lesson", lesson_id="verify-api", trigger="calling an unfamiliar API",
              action="Read its signature first, then one call site.")
    client.ok("save_project_context", project_path=PROJECT, notes="Payments next. Is the retry cap right?")
    result = client.ok("recall", task="call the payments API", project_path=PROJECT, budget=1200)
    assert result["chars"] == len(result["text"]) <= 1200
    assert result["lessons"] == ["never-force-push", "verify-api"]
    assert result["text"].startswith("## Memory context (mgcp)") and "Is the retry cap right?" in result["text"]
    hits = client.ok("query_lessons", text="unfamiliar API", explain=True)["results"]
    assert hits[0]["id"] == "verify-api" and set(hits[0]["score_parts"]) >= {"relevance", "confidence", "success"}


# -- pattern reinforcement --------------------------------------------------------------------------

def test_pattern_reinforcement_runs_on_demand_only_when_forced_while_off(client, db, run):
    async def seed(store):
        for i in range(1, 4):
            await store.context.save(PROJECT, session_id=f"s{i}", decisions=["Use pnpm workspaces"])
    run(db, seed)
    skipped = client.ok("pattern_reinforcement_run", project_path=PROJECT)
    assert skipped["ran"] is False and "not enabled" in skipped["reason"] and skipped["run"] is None
    forced = client.ok("pattern_reinforcement_run", project_path=PROJECT, force=True)
    assert forced["ran"] is True and forced["run"]["summary"]["patterns"] == 1
    assert forced["finding"]["header"] == "Recurring" and "3 sessions" in forced["finding"]["question"]
    [pattern] = run(db, lambda s: s.patterns.list())
    assert pattern.reinforcement_count == 3


def _piped(db: Path, messages: list[dict]) -> list[dict]:
    """The replies of a server fed `messages` through a pipe closed right after them (as `printf ...
    | mgcp serve` does), once it has stopped."""
    import subprocess

    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}, *messages]
    proc = subprocess.Popen([sys.executable, *SERVE, "--db", str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, _ = proc.communicate("".join(json.dumps(m) + "\n" for m in lines).encode(), timeout=120)
    return [json.loads(line) for line in out.splitlines()]


def test_requests_piped_in_before_the_input_ends_are_all_answered(db):
    """The SDK stops at the end of its input and answers a request still running "Connection
    closed": the server waits for every request it took before it stops."""
    call = {"jsonrpc": "2.0", "method": "tools/call"}
    replies = _piped(db, [
        {**call, "id": 1, "params": {"name": "add_lesson", "arguments": {
            "lesson_id": "piped", "trigger": "when input comes through a pipe", "action": "Answer every request"}}},
        {**call, "id": 2, "params": {"name": "rem_run", "arguments": {"project_path": PROJECT}}},
        {**call, "id": 3, "params": {"name": "query_lessons", "arguments": {"text": "pipe"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
    ])
    by_id = {r["id"]: r for r in replies}
    assert sorted(by_id) == [0, 1, 2, 3, 4]
    assert all("result" in r and not r["result"].get("isError") for r in by_id.values()), replies
    assert mgcp("lesson", "show", "piped", "--db", db)[0] == 0


def test_a_request_cancelled_before_the_input_ends_does_not_hold_the_server(db):
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "rem_run", "arguments": {"project_path": PROJECT}}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    replies = _piped(db, [call, cancel])  # returns: the server stopped (an answer to 1 or none)
    assert [r["id"] for r in replies if r.get("id") != 1] == [0]


def test_a_todo_field_holding_a_secret_or_not_storable_is_refused_and_nothing_written(client):
    client.ok("save_project_context", project_path=PROJECT, session_id="s1", notes="started")
    before = client.ok("get_project_context", project_path=PROJECT)
    for odd in ({"priority": "password=Sup3rS3cret!"}, {"owner": {"token": "ghp_" + "a" * 36}}, {"big": 2 ** 70}):
        message = client.error("save_project_context", project_path=PROJECT, todos=[{"content": "ship it", **odd}])
        assert "a todo's fields" in message, message
    assert client.ok("get_project_context", project_path=PROJECT) == before


def test_a_todo_read_and_saved_back_keeps_every_key(client):
    """Its priority and notes were dropped; an older writer's priority ("urgent") and keys of its
    own ("owner") must come back too, or an agent could not save a list it was given."""
    todo = {"content": "fix flaky test", "priority": "urgent", "notes": "fails 1 in 20 on CI", "owner": "sam"}
    client.ok("save_project_context", project_path=PROJECT, session_id="s1", todos=[todo])
    read = client.ok("get_project_context", project_path=PROJECT)["todos"]
    client.ok("save_project_context", project_path=PROJECT, session_id="s1", notes="later", todos=read)
    again = client.ok("get_project_context", project_path=PROJECT)["todos"]
    assert again == read and {k: read[0][k] for k in todo} == todo
