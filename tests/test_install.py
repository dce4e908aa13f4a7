"""`mgcp init`: the SessionStart hook lands in Claude Code's settings once, and nothing else changes."""

import json
import shlex
import sys
from pathlib import Path

import pytest

from clihelp import mgcp
from mgcp.surfaces.install import install_hook, installed_hook, is_ours

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
    return [h for group in settings["hooks"]["SessionStart"] for h in group["hooks"] if is_ours(h["command"])]


def without_ours(settings: dict) -> dict:
    settings = json.loads(json.dumps(settings))
    groups = settings["hooks"]["SessionStart"]
    settings["hooks"]["SessionStart"] = [g for g in groups if not any(is_ours(h["command"]) for h in g["hooks"])]
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


def test_a_project_entry_is_claude_codes_format_with_the_portable_command(tmp_path):
    mgcp("init", "--project", tmp_path)
    group = json.loads(settings_of(tmp_path).read_text())["hooks"]["SessionStart"][0]
    assert group == {"matcher": "", "hooks": [{"type": "command", "command": "mgcp-hook || true"}]}


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
    assert code == 0 and json.loads(out)["settings"] == str(path)
    assert [shlex.split(h["command"]) for h in ours(json.loads(path.read_text()))] == [[str(installed_hook()), "||", "true"]]


def test_an_old_absolute_entry_moves_to_the_portable_command_in_place(tmp_path):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    old = '"/old/venv/bin/python" "/old/venv/lib/mgcp/hooks/rem-cycle-trigger.py"'
    entry = {"matcher": "", "hooks": [{"type": "command", "command": old}]}
    path.write_text(json.dumps({"hooks": {"SessionStart": [entry]}}))
    result = install_hook(str(tmp_path))
    settings = json.loads(path.read_text())
    assert result["changed"] and [h["command"] for h in ours(settings)] == ["mgcp-hook || true"]
    assert len(settings["hooks"]["SessionStart"]) == 1
    assert install_hook(str(tmp_path))["changed"] is False  # and the move happens once


def test_an_old_and_a_new_entry_become_one(tmp_path):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    old = {"matcher": "", "hooks": [{"type": "command", "command": '"/v/bin/python" "/v/hooks/rem-cycle-trigger.py"'}]}
    new = {"matcher": "", "hooks": [{"type": "command", "command": "mgcp-hook || true"}]}
    path.write_text(json.dumps({"hooks": {"SessionStart": [old, new]}}))
    install_hook(str(tmp_path))
    assert json.loads(path.read_text()) == {"hooks": {"SessionStart": [new]}}


def test_a_customised_command_is_kept_as_written(tmp_path):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    custom = {"matcher": "", "hooks": [{"type": "command", "command": "MGCP_DB=/team/kb.db mgcp-hook || true"}]}
    old = {"matcher": "", "hooks": [{"type": "command", "command": '"/v/bin/python" "/v/hooks/rem-cycle-trigger.py"'}]}
    path.write_text(json.dumps({"hooks": {"SessionStart": [old, custom]}}))
    result = install_hook(str(tmp_path))
    assert json.loads(path.read_text()) == {"hooks": {"SessionStart": [custom]}}
    assert result["changed"] and "as you wrote it (`MGCP_DB=/team/kb.db mgcp-hook || true`)" in result["message"]
    again = install_hook(str(tmp_path))
    assert again["changed"] is False and "as you wrote it" in again["message"]
    assert json.loads(path.read_text()) == {"hooks": {"SessionStart": [custom]}}
    for moved in ('"/gone/venv/bin/mgcp-hook" || true', "mgcp-hook"):  # only the program differs: ours
        path.write_text(json.dumps({"hooks": {"SessionStart": [
            {"matcher": "", "hooks": [{"type": "command", "command": moved}]}]}}))
        install_hook(str(tmp_path))
        assert [h["command"] for h in ours(json.loads(path.read_text()))] == ["mgcp-hook || true"]


def test_remove_takes_out_exactly_what_init_added(tmp_path):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    before = json.dumps(OTHER_SETTINGS, indent=2) + "\n"
    path.write_text(before)
    mgcp("init", "--project", tmp_path, "--mcp")
    code, out, err = mgcp("init", "--project", tmp_path, "--remove", "--mcp")
    assert (code, err) == (0, "") and "Removed the REM SessionStart hook" in out and "Removed the mgcp MCP server" in out
    assert path.read_text() == before and not (tmp_path / ".mcp.json").exists()


def test_init_writes_through_a_symlinked_settings_file_and_keeps_its_permissions(tmp_path):
    """Settings kept in a dotfiles folder stay there, linked; a private file stays private."""
    dotfile = tmp_path / "dotfiles" / "claude-settings.json"
    dotfile.parent.mkdir()
    dotfile.write_text(json.dumps(OTHER_SETTINGS, indent=2) + "\n")
    dotfile.chmod(0o600)
    path = settings_of(tmp_path / "project")
    path.parent.mkdir(parents=True)
    path.symlink_to(dotfile)
    for args in ([], ["--remove"]):
        code, out, err = mgcp("init", "--project", tmp_path / "project", *args)
        assert (code, err) == (0, ""), out
        assert path.is_symlink() and path.resolve() == dotfile and dotfile.stat().st_mode & 0o777 == 0o600
        assert len(ours(json.loads(dotfile.read_text()))) == (0 if args else 1)
    assert json.loads(dotfile.read_text()) == OTHER_SETTINGS
    assert [p.name for p in dotfile.parent.iterdir()] == [dotfile.name]  # no temporary file left


def test_remove_leaves_a_symlinked_file_it_empties_in_place(tmp_path):
    dotfile = tmp_path / "settings.json"
    dotfile.write_text("{}")
    path = settings_of(tmp_path / "project")
    path.parent.mkdir(parents=True)
    path.symlink_to(dotfile)
    mgcp("init", "--project", tmp_path / "project")
    code, out, err = mgcp("init", "--project", tmp_path / "project", "--remove", "--json")
    assert code == 0 and json.loads(out)["deleted"] is False and path.is_symlink()
    assert "mgcp-hook" not in dotfile.read_text()


def test_remove_of_what_init_created_leaves_no_file(tmp_path):
    mgcp("init", "--project", tmp_path)
    code, out, _ = mgcp("init", "--project", tmp_path, "--remove", "--json")
    assert code == 0 and json.loads(out)["deleted"] is True and not settings_of(tmp_path).exists()
    code, out, _ = mgcp("init", "--project", tmp_path, "--remove")
    assert code == 0 and "not installed" in out


def test_user_remove_takes_the_hook_out_of_the_users_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"model": "opus"}))
    mgcp("init", "--user")
    assert ours(json.loads(path.read_text()))
    mgcp("init", "--user", "--remove")
    assert json.loads(path.read_text()) == {"model": "opus"}


def test_mcp_registers_the_server_once_beside_other_servers(tmp_path):
    path = tmp_path / ".mcp.json"
    other = {"mcpServers": {"github": {"type": "http", "url": "https://example.invalid/mcp"}}}
    path.write_text(json.dumps(other))
    first = mgcp("init", "--project", tmp_path, "--mcp", "--json")
    second = mgcp("init", "--project", tmp_path, "--mcp", "--json")
    config = json.loads(path.read_text())
    assert json.loads(first[1])["mcp"]["changed"] is True and json.loads(second[1])["mcp"]["changed"] is False
    assert config == {"mcpServers": {**other["mcpServers"],
                                     "mgcp": {"type": "stdio", "command": "mgcp", "args": ["serve"]}}}


def test_an_existing_mgcp_serve_entry_under_another_name_is_not_added_twice(tmp_path):
    path = tmp_path / ".mcp.json"
    mine = {"mcpServers": {"knowledge": {"command": "/opt/venv/bin/mgcp", "args": ["serve", "--db", "/data/l.db"]}}}
    path.write_text(json.dumps(mine))
    code, out, _ = mgcp("init", "--project", tmp_path, "--mcp")
    assert code == 0 and "already registered" in out and json.loads(path.read_text()) == mine


@pytest.mark.parametrize("text", ["{not json", '{"mcpServers": []}', '{"mcpServers": {"mgcp": {"command": "node"}}}'])
def test_an_unusable_mcp_file_is_refused_and_left_unchanged(tmp_path, text):
    path = tmp_path / ".mcp.json"
    path.write_text(text)
    code, out, err = mgcp("init", "--project", tmp_path, "--mcp")
    assert code == 2 and err.startswith("Error: ") and str(path) in err and path.read_text() == text
    assert not settings_of(tmp_path).exists()  # nothing written: not the hook either


@pytest.mark.parametrize("text", ["{not json", '["a list"]', '{"hooks": []}', '{"x": "\\ud800"}'])
def test_unusable_settings_are_refused_and_left_unchanged(tmp_path, text):
    path = settings_of(tmp_path)
    path.parent.mkdir()
    path.write_text(text)
    code, out, err = mgcp("init", "--project", tmp_path)
    assert (code, out) == (2, "") and err.startswith("Error: ") and str(path) in err
    assert path.read_text() == text
