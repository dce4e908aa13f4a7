"""Where the files that ship beside the package live: `migrations/`, `hooks/`, `rem-config.yaml`.

A wheel carries them inside the package (hatchling force-include); an editable install or a checkout
finds them at the repository's top level.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource(name: str) -> Path:
    """The path of a shipped resource, preferring the copy inside the installed package."""
    inside = _PACKAGE / name
    return inside if inside.exists() else _PACKAGE.parent / name


def migrations_dir() -> Path:
    return resource("migrations")


def hook_script() -> Path:
    return resource("hooks") / "rem-cycle-trigger.py"


def default_config_file() -> Path:
    return resource("rem-config.yaml")
