"""`mgcp init`: the SessionStart hook lands in Claude Code's settings once, and nothing else changes."""

import json
import shlex
import sys
from pathlib import Path

import pytest

from clihelp import mgcp
from mgcp.resources import hook_script
from mgcp.surfaces.install import install_hook

OTHER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git diff:*)"], "deny": []},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check-bash.sh"}]}],
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello", "timeout": 5}]}],
    },
    "env": {"FOO": "1"},
}


def settings_of(project: Path) -> Path:
    return project / ".claude" / "settings.json"


def ours(settings: dict) -> list[dict]:
    return [h for group in settings["hooks"]["SessionStart"] for h in group["hooks"]
            if "rem-cycle-trigger.py" in h["command"]]


def without_ours(settings: dict) -> dict:
    settings = json.loads(json.dumps(settings))
    groups = settings["hooks"]["SessionStart"]
    settings["hooks"]["SessionStart"] = [g for g in groups if not any("rem-cycle-trigger.py" in h["command"]
                                                                      for h in g["hooks"])]
    return settings


def test_init_twice_adds_one_entry_and_keeps_everything_else(tmp_path):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps(OTHER_SETTINGS, indent=4))
    first = mgcp("init", "--project", tmp_path)
    second = mgcp("init", "--project", tmp_path)
    settings = json.loads(path.read_text())
    assert first[0] == second[0] == 0 and "Added" in first[1] and "already installed" in second[1]
    assert len(ours(settings)) == 1
    assert json.dumps(without_ours(settings)) == json.dumps(OTHER_SETTINGS)  # same values, same key order


def test_the_entry_is_claude_codes_format_with_this_python_and_the_shipped_script(tmp_path):
    mgcp("init", "--project", tmp_path)
    group = json.loads(settings_of(tmp_path).read_text())["hooks"]["SessionStart"][0]
    assert group["matcher"] == "" and group["hooks"][0]["type"] == "command"
    assert shlex.split(group["hooks"][0]["command"]) == [sys.executable, str(hook_script())]


def test_init_creates_missing_directories_and_writes_two_space_indent(tmp_path):
    project = tmp_path / "new-project"
    code, out, err = mgcp("init", "--project", project, "--json")
    result = json.loads(out)
    assert code == 0 and result["changed"] is True and result["settings"] == str(settings_of(project))
    assert settings_of(project).read_text().startswith('{\n  "hooks": {\n    "SessionStart"')


def test_user_install_writes_under_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "someone"))
    code, out, _ = mgcp("init", "--user", "--json")
    path = tmp_path / "someone" / ".claude" / "settings.json"
    assert code == 0 and json.loads(out)["settings"] == str(path) and len(ours(json.loads(path.read_text()))) == 1


def test_a_moved_script_is_updated_in_place(tmp_path):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    old = '"/old/venv/bin/python" "/old/venv/lib/mgcp/hooks/rem-cycle-trigger.py"'
    entry = {"matcher": "", "hooks": [{"type": "command", "command": old}]}
    path.write_text(json.dumps({"hooks": {"SessionStart": [entry]}}))
    result = install_hook(str(tmp_path))
    settings = json.loads(path.read_text())
    assert result["changed"] and [h["command"] for h in ours(settings)] == [result["command"]]
    assert len(settings["hooks"]["SessionStart"]) == 1


@pytest.mark.parametrize("text", ["{not json", '["a list"]', '{"hooks": []}'])
def test_unusable_settings_are_refused_and_left_unchanged(tmp_path, text):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    path.write_text(text)
    code, out, err = mgcp("init", "--project", tmp_path)
    assert (code, out) == (2, "") and err.startswith("Error: ") and str(path) in err
    assert path.read_text() == text
