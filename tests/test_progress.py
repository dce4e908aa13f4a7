"""Progress of a REM run: start and end lines per operation, fractions from inside the long loops,
plain lines on a pipe, and nothing on stderr when --json output goes to a pipe."""

from clihelp import mgcp

from mgcp import engine
from mgcp.config import parse_config

CONFIG = parse_config({}, "test")


async def _many_lessons(store, n=300):
    for i in range(n):
        await store.lessons.add(f"rule-{i:03d}", f"when handling case {i} of the parser {i % 7}",
                                f"Check the parser state {i % 11} and the token {i} before returning.")


def test_a_run_reports_each_operation_and_how_far_its_long_loop_has_come(db, run):
    heard = []

    async def scenario(store):
        await _many_lessons(store)
        await engine.run(store, CONFIG, "/p", ["duplicate_detection", "community_detection"],
                         progress=lambda message, fraction=None: heard.append((message, fraction)))

    run(db, scenario)
    lines = [m for m, f in heard if f is None]
    assert lines[0] == "[1/2] duplicate_detection ..." and lines[2] == "[2/2] community_detection ..."
    assert "finding(s) in" in lines[1] and "finding(s) in" in lines[3]
    for op in ("[1/2] duplicate_detection", "[2/2] community_detection"):
        fractions = [f for m, f in heard if m == op and f is not None]
        assert len(fractions) >= 50 and fractions == sorted(fractions) and 0 <= fractions[0] and fractions[-1] < 1


def test_the_cli_prints_plain_progress_lines_on_a_pipe_and_nothing_under_json(tmp_path):
    db = str(tmp_path / "p.db")
    for i in range(5):
        code, _, err = mgcp("lesson", "add", f"rule-{i:03d}", "--db", db, "--trigger", f"when parsing case {i}",
                            "--action", f"Check the token {i} and the parser state {i % 9} first.")
        assert code == 0, err
    code, out, err = mgcp("rem", "run", "--db", db, "--project", "/p", "--op", "duplicate_detection")
    assert code == 0 and "[1/1] duplicate_detection ..." in err and "finding(s) in" in err
    code, out, err = mgcp("rem", "run", "--db", db, "--project", "/p", "--op", "duplicate_detection", "--json")
    assert code == 0 and err == "" and out.startswith("{")
