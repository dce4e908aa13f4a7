import json

from clihelp import mgcp
from mgcp.config import OPERATIONS


def test_demo_builds_its_own_database_and_finds_something_for_every_operation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = mgcp("demo", "--json")
    result = json.loads(out)
    assert code == 0 and (tmp_path / "mgcp-demo.db").exists()
    assert result["lessons"] >= 30 and result["snapshots"] >= 40
    ops = {o["operation"]: o for o in result["report"]["operations"]}
    assert list(ops) == list(OPERATIONS) and all(o["error"] is None for o in ops.values())
    assert all(ops[op]["findings"] > 0 for op in OPERATIONS if op != "context_summary")
    assert ops["context_summary"]["summary"]["to_session"] == result["report"]["session_number"]


def test_demo_never_overwrites_an_existing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.db").write_text("precious")
    code, _, err = mgcp("demo", "--db", "mine.db")
    assert code == 2 and "already exists" in err and (tmp_path / "mine.db").read_text() == "precious"
    assert mgcp("demo")[0] == 0 and mgcp("demo")[0] == 0
    assert (tmp_path / "mgcp-demo-2.db").exists()


def test_demo_text_output_tells_how_to_review(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = mgcp("demo")
    assert code == 0 and "mgcp rem review --db mgcp-demo.db --project /demo/harbor" in out
