"""What the CLI and the MCP server share: JSON conversion, JSON output and catalogue files."""

from __future__ import annotations

import json
import sys
from typing import Any

from mgcp.errors import InvalidInputError


def to_jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: to_jsonable(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(value), indent=2, ensure_ascii=False) + "\n")


def read_catalogue(source: str) -> dict:
    """A catalogue from a JSON file, or '-' for standard input; must be a JSON object."""
    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    except OSError as exc:
        raise InvalidInputError(f"cannot read catalogue {source}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"catalogue {source} is not UTF-8 text") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"catalogue {source} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"catalogue {source} must be a JSON object at the top level")
    return value
