"""`mgcp init`: put the REM SessionStart hook (and, with --mcp, the MCP server) into Claude Code's
settings, idempotently, and take exactly that out again with --remove.

The hook goes into `<project>/.claude/settings.json` (or `~/.claude/settings.json` for the user) in
Claude Code's hook format:

    {"hooks": {"SessionStart": [{"matcher": "", "hooks": [{"type": "command", "command": "mgcp-hook || true"}]}]}}

A project's settings are committed and shared, so its command is the portable `mgcp-hook`, the
console script found on PATH wherever mgcp is installed. The user's settings belong to one machine:
they get the absolute path of this installation's `mgcp-hook`, which works whatever PATH Claude Code
starts with. Either way `|| true` follows: on a machine where the program is missing (a teammate who
does not use mgcp, a removed virtualenv) the session starts as if no hook were there, as it does
when the hook itself fails. An entry mgcp wrote earlier (`mgcp-hook` anywhere in the command, or the older
`"<python>" ".../rem-cycle-trigger.py"`) is recognised and rewritten in place, so running `mgcp init`
again moves an old install to the new command; a second entry of ours is removed, never kept twice.
A command a person changed (anything around `mgcp-hook` beyond `|| true`: a variable set before it,
options after it, another fallback) is theirs: init keeps it as written and says so.

The MCP server goes into `<project>/.mcp.json` (Claude Code's project MCP file) as
`{"mcpServers": {"mgcp": {"type": "stdio", "command": "mgcp", "args": ["serve"]}}}`; an entry of any
name that already runs `mgcp serve` is left as it is. An entry named "mgcp" that runs something else
is refused rather than overwritten.

Every other setting is kept as it was (key order, values; files are rewritten with a 2-space indent
through a temporary file and a rename). A file that is not valid JSON, or whose structure is not
Claude Code's, is refused with InvalidInputError and left untouched. `--remove` deletes our entries,
then the containers init created that are left empty, then the file itself if nothing is left in it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from mgcp import files
from mgcp.errors import InvalidInputError, MgcpError

HOOK_COMMAND = "mgcp-hook"
OLD_SCRIPT_NAME = "rem-cycle-trigger.py"
EVENT = "SessionStart"
SERVER_NAME = "mgcp"


def hook_command(user: bool) -> str:
    """The shell command Claude Code runs: portable for a project, absolute for the user."""
    program = HOOK_COMMAND if not user else _quote(str(installed_hook()))
    return f"{program} || true"


def installed_hook() -> Path:
    """This installation's `mgcp-hook` console script."""
    name = HOOK_COMMAND + (".exe" if os.name == "nt" else "")
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (folder / name).is_file():
            return folder / name
    found = shutil.which(HOOK_COMMAND)
    if found:
        return Path(found)
    raise MgcpError(f"cannot find the {HOOK_COMMAND} command of this installation; reinstall mgcp "
                    "(pip install mgcp) so that its console scripts are created")


def _quote(value: str) -> str:
    # Double quotes read naturally in settings.json and survive paths with spaces; fall back to
    # shlex for the rare path that holds characters a double-quoted shell word would expand.
    if not any(c in value for c in '"$`\\!'):
        return f'"{value}"'
    return shlex.quote(value)


def is_ours(command: object) -> bool:
    return isinstance(command, str) and (HOOK_COMMAND in command or OLD_SCRIPT_NAME in command)


def is_customised(command: str) -> bool:
    """A command of ours that a person changed: more than a `mgcp-hook` program (any path to one)
    with or without `|| true`."""
    if OLD_SCRIPT_NAME in command:
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return True
    program = Path(words[0]).name.removesuffix(".exe") if words else ""
    return not (program == HOOK_COMMAND and words[1:] in ([], ["||", "true"]))


def settings_path(project_path: str | None) -> Path:
    if project_path is None:
        return Path(os.path.expanduser("~")) / ".claude" / "settings.json"
    return Path(project_path) / ".claude" / "settings.json"


def mcp_path(project_path: str) -> Path:
    return Path(project_path) / ".mcp.json"


# -- the hook ----------------------------------------------------------------------------------------

def install_hook(project_path: str | None) -> dict:
    """Add (or update) the REM SessionStart hook in the project's (None: the user's) settings.json."""
    path = settings_path(project_path)
    command = hook_command(user=project_path is None)
    settings = _read(path)
    changed, updated, kept = _install(settings, command, path)
    if changed:
        _write(path, settings)
    if kept:
        message = (f"Kept the REM SessionStart hook in {path} as you wrote it (`{kept}`)"
                   + (", and removed a second entry of it." if changed else "."))
    elif not changed:
        message = f"The REM SessionStart hook is already installed in {path}."
    elif updated:
        message = f"Updated the REM SessionStart hook in {path} (now `{command}`)."
    else:
        message = f"Added the REM SessionStart hook to {path}."
    return {"settings": str(path), "changed": changed, "command": command, "message": message}


def remove_hook(project_path: str | None) -> dict:
    """Take the REM SessionStart hook out of the settings, and nothing else."""
    path = settings_path(project_path)
    settings = _read(path) if path.exists() else None
    removed = _uninstall(settings, path) if settings else 0
    deleted = False
    if removed:
        deleted = _write_or_delete(path, settings)
    if not removed:
        message = f"The REM SessionStart hook is not installed in {path}; nothing changed."
    else:
        message = f"Removed the REM SessionStart hook from {path}" + (" (the file is now empty: deleted)." if deleted else ".")
    return {"settings": str(path), "changed": bool(removed), "deleted": deleted, "message": message}


def _groups(settings: dict, path: Path, create: bool) -> list | None:
    hooks = settings.setdefault("hooks", {}) if create else settings.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        raise InvalidInputError(f"{path}: 'hooks' must be a JSON object; it was not changed")
    groups = hooks.setdefault(EVENT, []) if create else hooks.get(EVENT)
    if groups is None:
        return None
    if not isinstance(groups, list):
        raise InvalidInputError(f"{path}: 'hooks.{EVENT}' must be a JSON list; it was not changed")
    return groups


def _our_hooks(groups: list) -> list[tuple[dict, dict]]:
    """(group, hook) for every hook entry of ours, in file order."""
    return [(group, hook) for group in groups if isinstance(group, dict)
            for hook in (group.get("hooks") if isinstance(group.get("hooks"), list) else [])
            if isinstance(hook, dict) and is_ours(hook.get("command"))]


def _install(settings: dict, command: str, path: Path) -> tuple[bool, bool, str | None]:
    """Put the hook into `settings` in place. Returns (changed, updated an existing entry, the
    customised command kept as written or None)."""
    groups = _groups(settings, path, create=True)
    found = _our_hooks(groups)
    if not found:
        groups.append({"matcher": "", "hooks": [{"type": "command", "command": command}]})
        return True, False, None
    custom = [entry for entry in found if is_customised(entry[1]["command"])]
    keep = (custom or found)[0]
    changed = False
    if not custom:
        changed = keep[1].get("command") != command
        keep[1]["command"] = command
    for group, hook in found:  # an entry of ours twice (an old and a new one): keep one
        if hook is not keep[1]:
            group["hooks"].remove(hook)
            changed = True
    _drop_empty_groups(groups)
    return changed, changed and not custom, keep[1]["command"] if custom else None


def _uninstall(settings: dict, path: Path) -> int:
    groups = _groups(settings, path, create=False)
    if not groups:
        return 0
    found = _our_hooks(groups)
    for group, hook in found:
        group["hooks"].remove(hook)
    if found:
        _drop_empty_groups(groups)
        if not groups:
            del settings["hooks"][EVENT]
        if not settings["hooks"]:
            del settings["hooks"]
    return len(found)


def _drop_empty_groups(groups: list) -> None:
    groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]


# -- the MCP server ----------------------------------------------------------------------------------

def server_entry() -> dict:
    return {"type": "stdio", "command": "mgcp", "args": ["serve"]}


def _runs_mgcp_serve(entry: object) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    words = shlex.split(entry["command"]) if " " in entry["command"] else [entry["command"]]
    args = entry.get("args") if isinstance(entry.get("args"), list) else []
    words += [str(a) for a in args]
    program = Path(words[0]).name if words else ""
    return program in ("mgcp", "mgcp.exe") and "serve" in words[1:]


def _servers(config: dict, path: Path, create: bool) -> dict | None:
    servers = config.setdefault("mcpServers", {}) if create else config.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInputError(f"{path}: 'mcpServers' must be a JSON object; it was not changed")
    return servers


def install_mcp(project_path: str, dry_run: bool = False) -> dict:
    """Register `mgcp serve` in the project's .mcp.json (once)."""
    path = mcp_path(project_path)
    config = _read(path)
    servers = _servers(config, path, create=True)
    existing = next((name for name, entry in servers.items() if _runs_mgcp_serve(entry)), None)
    if existing is not None:
        return {"mcp_config": str(path), "changed": False, "server": existing,
                "message": f"The mgcp MCP server is already registered in {path} (as {existing!r})."}
    if SERVER_NAME in servers:
        raise InvalidInputError(f"{path}: an MCP server named {SERVER_NAME!r} already exists and does not run "
                                "`mgcp serve`; rename or remove it first (the file was not changed)")
    servers[SERVER_NAME] = server_entry()
    if not dry_run:
        _write(path, config)
    return {"mcp_config": str(path), "changed": True, "server": SERVER_NAME,
            "message": f"Added the mgcp MCP server to {path} (`mgcp serve`; Claude Code asks once to approve it)."}


def remove_mcp(project_path: str) -> dict:
    """Take mgcp's server entries out of the project's .mcp.json, and nothing else."""
    path = mcp_path(project_path)
    config = _read(path) if path.exists() else {}
    servers = _servers(config, path, create=False) or {}
    names = [name for name, entry in servers.items() if _runs_mgcp_serve(entry)]
    for name in names:
        del servers[name]
    deleted = False
    if names:
        if not servers:
            del config["mcpServers"]
        deleted = _write_or_delete(path, config)
    message = (f"Removed the mgcp MCP server from {path}" + (" (the file is now empty: deleted)." if deleted else ".")
               if names else f"The mgcp MCP server is not registered in {path}; nothing changed.")
    return {"mcp_config": str(path), "changed": bool(names), "deleted": deleted, "message": message}


def check_files(project_path: str | None, mcp: bool) -> None:
    """Refuse, before either file is written, settings or an .mcp.json that init could not use."""
    path = settings_path(project_path)
    _groups(_read(path), path, create=False)
    if mcp and project_path is not None:
        install_mcp(project_path, dry_run=True)


# -- files -------------------------------------------------------------------------------------------

def _write_or_delete(path: Path, content: dict) -> bool:
    """Write `content`, or delete the file when nothing is left in it (a symlink's file is written,
    never deleted: it is someone's, kept elsewhere). True when deleted."""
    if content or path.is_symlink():
        _write(path, content)
        return False
    try:
        path.unlink()
    except OSError as exc:
        raise MgcpError(f"cannot remove {path}: {exc.strerror or exc}") from None
    return True


def _write(path: Path, settings: dict) -> None:
    """Replace the file whole (Claude Code never reads half of one), through a symlink, keeping its
    permissions: settings may hold secrets (`files.replace`)."""
    if path.parent.exists() and not path.parent.is_dir():
        raise InvalidInputError(f"cannot write {path}: {path.parent} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.replace(path, lambda handle: handle.write(json.dumps(settings, indent=2, ensure_ascii=False) + "\n"))
    except OSError as exc:
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
    try:  # what is read is written back as UTF-8: a lone surrogate ("\ud800") cannot be
        json.dumps(settings, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{path} holds an escaped lone surrogate (such as \\ud800), which is not text "
                                "mgcp can write back; fix it and run `mgcp init` again (it was not changed)") from None
    return settings
