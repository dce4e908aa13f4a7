"""What the CLI and the MCP server share: opening the store, running a coroutine, JSON output."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Awaitable, Callable

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


def with_store(db: str | None, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """Open (and upgrade) the database, run `work(store)` and return its result."""
    from mgcp.config import db_path
    from mgcp.persistence import Store

    async def main():
        async with Store.open(db_path(db)) as store:
            return await work(store)

    return asyncio.run(main())


def project_path(path: str | None) -> str:
    from mgcp.config import normalize_path

    return normalize_path(path if path else os.getcwd())


def read_catalogue(source: str) -> dict:
    """A catalogue from a JSON file, or '-' for standard input; must be a JSON object."""
    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    except OSError as exc:
        raise InvalidInputError(f"cannot read catalogue {source}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"catalogue {source} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"catalogue {source} must be a JSON object at the top level")
    return value
