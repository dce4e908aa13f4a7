"""The commands people reach for: --version, lesson diff|archive|restore|unlink, rem show,
config show, context diff; and errors under --json as JSON on stderr."""

import json
import sqlite3
import subprocess
import sys

import pytest

from clihelp import mgcp
from conftest import ROOT, dump
from mgcp import __version__


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "l.db"
    mgcp("lesson", "add", "verify-api", "--trigger", "calling an unfamiliar API", "--action", "Read its signature first",
         "--tag", "api", "--db", path)
    mgcp("lesson", "refine", "verify-api", "--action", "Read the signature and one real call site",
         "--reason", "signatures alone mislead", "--db", path)
    mgcp("lesson", "refine", "verify-api", "--rationale", "Docs drift", "--reason", "say why", "--db", path)
    mgcp("lesson", "add", "read-the-tests", "--trigger", "learning a codebase", "--action", "Read the tests first",
         "--db", path)
    return path


def test_version_prints_the_version():
    result = subprocess.run([sys.executable, "-m", "mgcp", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"mgcp {__version__}\n", "")


def test_lesson_diff_defaults_to_the_last_two_versions(db):
    code, out, err = mgcp("lesson", "diff", "verify-api", "--db", db)
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == ["--- verify-api v2", "+++ verify-api v3"]
    assert "-rationale:" in out and "+rationale: Docs drift" in out and "action" not in out.replace(" action:", "")


def test_lesson_diff_of_two_named_versions_as_json(db):
    code, out, _ = mgcp("lesson", "diff", "verify-api", "1", "2", "--db", db, "--json")
    result = json.loads(out)
    assert code == 0 and (result["from"], result["to"], result["reason"]) == (1, 2, "signatures alone mislead")
    assert "-action: Read its signature first" in result["diff"]
    assert "+action: Read the signature and one real call site" in result["diff"]


def test_lesson_diff_reads_tags_as_a_set(db):
    """An older writer's tags in another order, written sorted by a later version: no change."""
    with sqlite3.connect(db) as conn:
        conn.execute("""UPDATE lesson_versions SET tags = '["zeta", "api"]' WHERE lesson_id = 'read-the-tests'""")
        conn.execute("""UPDATE lessons SET tags = '["zeta", "api"]' WHERE id = 'read-the-tests'""")
    code, _, err = mgcp("lesson", "refine", "read-the-tests", "--tag", "api", "--tag", "zeta", "--tag", "new",
                        "--reason", "one more tag", "--db", db)
    assert code == 0, err
    code, out, err = mgcp("lesson", "diff", "read-the-tests", "--db", db)
    assert code == 0 and [line for line in out.splitlines()[2:] if line[:1] in "+-"] == ["+tag: new"], out


@pytest.mark.parametrize("args, message", [(["read-the-tests"], "only version 1"),
                                           (["verify-api", "1", "9"], "no version 9"),
                                           (["verify-api", "1"], "two version numbers"),
                                           (["nope"], "no lesson with id 'nope'")])
def test_lesson_diff_refuses_what_it_cannot_compare(db, args, message):
    code, out, err = mgcp("lesson", "diff", *args, "--db", db)
    assert code == 2 and out == "" and message in err


def test_archive_hides_a_lesson_and_restore_brings_it_back(db):
    code, out, _ = mgcp("lesson", "archive", "read-the-tests", "--reason", "obvious", "--db", db)
    assert code == 0 and out == "archived read-the-tests (was active)\n"
    assert [x["id"] for x in json.loads(mgcp("lesson", "list", "--db", db, "--json")[1])] == ["verify-api"]
    found = json.loads(mgcp("lesson", "query", "reading tests codebase", "--db", db, "--json")[1])
    assert "read-the-tests" not in [x["id"] for x in found]
    code, out, _ = mgcp("lesson", "restore", "read-the-tests", "--db", db, "--json")
    assert code == 0 and json.loads(out)["previous_status"] == "archived"
    assert len(json.loads(mgcp("lesson", "list", "--db", db, "--json")[1])) == 2
    assert json.loads(mgcp("lesson", "history", "read-the-tests", "--db", db, "--json")[1])[0]["version"] == 1


def test_unlink_removes_the_link_both_ways(db):
    mgcp("lesson", "link", "verify-api", "read-the-tests", "--type", "complements", "--db", db)
    code, out, _ = mgcp("lesson", "unlink", "read-the-tests", "verify-api", "--db", db, "--json")
    assert code == 0 and json.loads(out)["removed"] == ["complements"]
    for lesson_id in ("verify-api", "read-the-tests"):
        assert json.loads(mgcp("lesson", "show", lesson_id, "--db", db, "--json")[1])["relationships"] == []
    assert "were not linked" in mgcp("lesson", "unlink", "read-the-tests", "verify-api", "--db", db)[1]


def test_linking_again_with_another_type_changes_the_link_both_ways(db):
    mgcp("lesson", "link", "verify-api", "read-the-tests", "--db", db)
    code, out, _ = mgcp("lesson", "link", "read-the-tests", "verify-api", "--type", "prerequisite", "--db", db)
    assert code == 0 and out == "the link read-the-tests <-> verify-api was related; it is now prerequisite\n"
    for lesson_id in ("verify-api", "read-the-tests"):
        rels = json.loads(mgcp("lesson", "show", lesson_id, "--db", db, "--json")[1])["relationships"]
        assert [r["type"] for r in rels] == ["prerequisite"]
    code, out, _ = mgcp("lesson", "link", "verify-api", "read-the-tests", "--type", "prerequisite", "--db", db,
                        "--json")
    assert code == 0 and json.loads(out) == {"source": "verify-api", "target": "read-the-tests",
                                                 "type": "prerequisite", "added": False, "changed_from": None}


def test_linking_a_one_way_link_with_another_type_makes_both_halves_that_type(db):
    """Legacy data holds links one way only: linking again adds the missing half and retypes the other."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("""UPDATE lessons SET relationships = '[{"target": "read-the-tests", "type": "related",
                        "weight": 0.5, "context": [], "bidirectional": true}]' WHERE id = 'verify-api'""")
    code, out, _ = mgcp("lesson", "link", "verify-api", "read-the-tests", "--type", "prerequisite", "--db", db,
                        "--json")
    assert code == 0 and (json.loads(out)["added"], json.loads(out)["changed_from"]) == (False, "related")
    for lesson_id in ("verify-api", "read-the-tests"):
        rels = json.loads(mgcp("lesson", "show", lesson_id, "--db", db, "--json")[1])["relationships"]
        assert [r["type"] for r in rels] == ["prerequisite"]


def test_rem_show_prints_one_finding_whole_with_its_actions(tmp_path):
    path, project = tmp_path / "r.db", str(tmp_path / "proj")
    for n in range(3):
        mgcp("lesson", "add", f"copy-{n}", "--trigger", f"opening sqlite from {n + 2} processes",
             "--action", "Use WAL mode and a busy timeout", "--db", path)
    mgcp("rem", "run", "--project", project, "--op", "duplicate_detection", "--db", path)
    finding = json.loads(mgcp("rem", "report", "--project", project, "--db", path, "--json")[1])["pending"][0]
    mgcp("rem", "resolve", finding["id"][:8], "--option", str(finding["recommended"]), "--project", project,
         "--db", path)
    code, out, err = mgcp("rem", "show", finding["id"][:8], "--db", path, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["finding"]["id"] == finding["id"] and shown["finding"]["status"] == "applied"
    assert shown["actions"] and shown["actions"][0]["changes"]
    code, out, _ = mgcp("rem", "show", finding["id"], "--db", path)
    assert code == 0 and finding["title"] in out and "status: applied" in out and "action " in out


def test_config_show_names_where_each_setting_came_from(tmp_path):
    config = tmp_path / "rem-config.yaml"
    config.write_text("rem:\n  duplicate_detection:\n    interval: 7\n"
                      "projects:\n  /p/x:\n    staleness_scan:\n      interval: 2\n")
    code, out, _ = mgcp("config", "show", "--config", config, "--project", "/p/x", "--json")
    settings = {row["key"]: row for row in json.loads(out)["settings"]}
    assert code == 0
    assert settings["rem.duplicate_detection.interval"] == {"key": "rem.duplicate_detection.interval", "value": 7,
                                                            "source": f"{config}: rem"}
    assert settings["rem.staleness_scan.interval"]["source"] == f"{config}: projects./p/x"
    assert settings["rem.staleness_scan.interval"]["value"] == 2
    assert settings["rem.duplicate_detection.merge_threshold"]["source"] == "built-in default"
    assert json.loads(out)["config_file"] == {"value": str(config), "source": "--config"}


def test_config_show_without_a_file_is_the_built_in_defaults(tmp_path):
    code, out, _ = mgcp("config", "show", "--db", tmp_path / "x.db")
    assert code == 0 and "none: built-in defaults" in out and "(--db)" in out
    assert not (tmp_path / "x.db").exists()


def test_context_diff_between_two_sessions(tmp_path):
    path, project = tmp_path / "c.db", "/work/shop"
    mgcp("context", "save", "--project", project, "--session-id", "s1", "--notes", "started", "--todo", "write tests",
         "--db", path)
    mgcp("context", "save", "--project", project, "--session-id", "s2", "--notes", "tests written",
         "--done", "write tests", "--decision", "Use WAL", "--db", path)
    code, out, err = mgcp("context", "diff", "--project", project, "--from", "1", "--to", "2", "--db", path)
    assert (code, err) == (0, "")
    assert "-notes: started" in out and "+notes: tests written" in out
    assert "-todo [ ]: write tests" in out and "+todo [x]: write tests" in out and "+decision: Use WAL" in out


def test_done_marks_one_todo_and_keeps_the_others(tmp_path):
    path, project = tmp_path / "c.db", "/work/shop"
    mgcp("context", "save", "--project", project, "--todo", "one", "--todo", "two", "--todo", "three", "--db", path)
    code, _, err = mgcp("context", "save", "--project", project, "--done", "two", "--db", path)
    assert (code, err) == (0, "")
    code, out, _ = mgcp("context", "show", "--project", project, "--db", path, "--json")
    assert [(t["content"], t["status"]) for t in json.loads(out)["todos"]] == [
        ("one", "pending"), ("two", "completed"), ("three", "pending")]
    code, _, err = mgcp("context", "save", "--project", project, "--done", " ", "--db", path)
    assert code == 2 and "todo" in err


@pytest.mark.parametrize("done, hint", [("nonexistent todo", "open todos: 'load test', 'write tests'"),
                                        ("Load tset", "did you mean 'load test'?")])
def test_done_with_a_todo_the_project_lacks_is_refused_and_nothing_written(tmp_path, done, hint):
    path, project = tmp_path / "c.db", "/p/x"
    mgcp("context", "save", "--project", project, "--session-id", "S1", "--todo", "load test",
         "--todo", "write tests", "--db", path)
    before = dump(path)
    code, out, err = mgcp("context", "save", "--project", project, "--session-id", "S9", "--notes", "n",
                          "--done", done, "--db", path)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and repr(done) in err and hint in err
    assert dump(path) == before


def test_done_may_name_a_todo_the_same_save_gives_or_the_list_had(tmp_path):
    path, project = tmp_path / "c.db", "/p/x"
    mgcp("context", "save", "--project", project, "--todo", "old", "--db", path)
    code, _, err = mgcp("context", "save", "--project", project, "--todo", "new", "--todo", "quick fix",
                        "--done", "quick fix", "--done", "old", "--db", path)
    assert (code, err) == (0, "")
    code, out, _ = mgcp("context", "show", "--project", project, "--db", path, "--json")
    assert [(t["content"], t["status"]) for t in json.loads(out)["todos"]] == [
        ("new", "pending"), ("quick fix", "completed"), ("old", "completed")]


@pytest.mark.parametrize("args", [["lesson", "show", "nope"], ["lesson", "diff", "nope", "1"],
                                  ["lesson", "list", "--limit", "x"]])
def test_errors_under_json_are_json_on_stderr(tmp_path, args):
    mgcp("db", "migrate", "--db", tmp_path / "e.db")
    code, out, err = mgcp(*args, "--db", tmp_path / "e.db", "--json")
    error = json.loads(err)
    assert out == "" and code == 2 and error["exit_code"] == 2 and error["error"]


def test_fail_on_pending_goes_with_auto(tmp_path):
    code, out, err = mgcp("rem", "run", "--fail-on-pending", "--db", tmp_path / "x.db")
    assert code == 2 and "--fail-on-pending goes with --auto" in err and not (tmp_path / "x.db").exists()


def test_auto_with_nothing_left_for_people_exits_0(tmp_path):
    code, out, err = mgcp("rem", "run", "--auto", "--fail-on-pending", "--op", "duplicate_detection",
                          "--project", "/p", "--db", tmp_path / "x.db")
    assert code == 0, err


def test_config_show_prints_values_as_yaml_and_shares_as_weights(tmp_path):
    config = tmp_path / "rem-config.yaml"
    config.write_text("recall:\n  shares: {state: 0.5, constraints: 0.5, preferences: 0.3, lessons: 0.3, errors: 0.2}\n")
    code, out, _ = mgcp("config", "show", "--config", config, "--db", tmp_path / "x.db")
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert code == 0
    assert lines["rem.pattern_reinforcement.enabled"].split()[1] == "false"
    assert lines["similarity.model"].split()[1] == "null"
    assert "[lesson, decision, note]" in lines["rem.pattern_reinforcement.categories"]
    assert "28% of the budget when all subsections have content: shares are divided by their sum, 1.8" in lines["recall.shares.state"]


def test_contradicting_config_is_refused_by_every_command(tmp_path):
    config = tmp_path / "rem-config.yaml"
    config.write_text("rem:\n  duplicate_detection:\n    merge_threshold: 0.5\n    review_threshold: 0.99\n")
    for args in (["config", "show"], ["rem", "status", "--project", "/p"]):
        code, out, err = mgcp(*args, "--config", config, "--db", tmp_path / "x.db")
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "review_threshold must be at most merge_threshold" in err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("args, hint", [
    (["--config", "my conf.yaml", "config", "show"], "mgcp config show --config 'my conf.yaml'"),
    (["--config=f.yaml", "config", "show"], "mgcp config show --config=f.yaml"),
    (["config", "--db", "x.db", "show", "--json"], "mgcp config show --json --db x.db"),
])
def test_a_command_option_before_the_command_gets_a_hint(args, hint):
    code, out, err = mgcp(*args)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "No such option" in err and hint in err and "goes after the command" in err


def test_an_unknown_option_gets_no_hint():
    code, _, err = mgcp("--colour", "config", "show")
    assert code == 2 and "No such option: --colour" in err and "goes after" not in err
