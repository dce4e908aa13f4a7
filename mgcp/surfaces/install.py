"""`mgcp init`: install the REM SessionStart hook into Claude Code's settings, idempotently.

Writes `<project>/.claude/settings.json` (or `~/.claude/settings.json` for the user) in Claude Code's
hook format:

    {"hooks": {"SessionStart": [{"matcher": "", "hooks": [{"type": "command", "command": "..."}]}]}}

The command is `"<this python>" "<the shipped hook script>"`, quoted for a shell, so it runs with the
interpreter that has mgcp installed, from a wheel as well as from a checkout. Every other setting and
hook is kept as it was (key order, values; the file is rewritten with a 2-space indent). An existing
entry is recognised by the script name and never added twice; if the script has moved (a new virtualenv,
a new mgcp), its command is updated in place. A settings file that is not valid JSON is refused with
InvalidInputError and left untouched.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from mgcp.errors import InvalidInputError, MgcpError
from mgcp.resources import hook_script

SCRIPT_NAME = "rem-cycle-trigger.py"
EVENT = "SessionStart"


def hook_command() -> str:
    """The shell command Claude Code runs: this interpreter on the shipped script."""
    return f"{_quote(sys.executable)} {_quote(str(hook_script()))}"


def _quote(value: str) -> str:
    # Double quotes read naturally in settings.json and survive paths with spaces; fall back to
    # shlex for the rare path that holds characters a double-quoted shell word would expand.
    if not any(c in value for c in '"$`\\!'):
        return f'"{value}"'
    return shlex.quote(value)


def settings_path(project_path: str | None) -> Path:
    if project_path is None:
        return Path(os.path.expanduser("~")) / ".claude" / "settings.json"
    return Path(project_path) / ".claude" / "settings.json"


def install_hook(project_path: str | None) -> dict:
    """Add (or update) the REM SessionStart hook in the project's (None: the user's) settings.json."""
    path = settings_path(project_path)
    command = hook_command()
    settings = _read(path)
    changed, updated = _install(settings, command, path)
    if changed:
        _write(path, settings)
    if not changed:
        message = f"The REM SessionStart hook is already installed in {path}."
    elif updated:
        message = f"Updated the REM SessionStart hook in {path} (the hook script moved)."
    else:
        message = f"Added the REM SessionStart hook to {path}."
    return {"settings": str(path), "changed": changed, "command": command, "message": message}


def _write(path: Path, settings: dict) -> None:
    # Through a temporary file and a rename, so Claude Code never reads a half-written file.
    tmp = path.with_name(path.name + ".mgcp-tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise MgcpError(f"cannot write {path}: {exc.strerror or exc}") from None


def _read(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        return {}
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}); fix it and run `mgcp init` again "
            "(it was not changed)") from None
    if not isinstance(settings, dict):
        raise InvalidInputError(f"{path} must hold a JSON object at the top level; it was not changed")
    return settings


def _install(settings: dict, command: str, path: Path) -> tuple[bool, bool]:
    """Put the hook into `settings` in place. Returns (changed, updated an existing entry)."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInputError(f"{path}: 'hooks' must be a JSON object; it was not changed")
    groups = hooks.setdefault(EVENT, [])
    if not isinstance(groups, list):
        raise InvalidInputError(f"{path}: 'hooks.{EVENT}' must be a JSON list; it was not changed")
    for group in groups:
        for hook in (group.get("hooks") if isinstance(group, dict) else None) or []:
            if isinstance(hook, dict) and SCRIPT_NAME in str(hook.get("command", "")):
                if hook["command"] == command:
                    return False, False
                hook["command"] = command
                return True, True
    groups.append({"matcher": "", "hooks": [{"type": "command", "command": command}]})
    return True, False
