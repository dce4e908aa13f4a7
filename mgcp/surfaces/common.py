"""What the CLI and the MCP server share: JSON conversion, JSON output and catalogue files."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from mgcp.errors import InvalidInputError
from mgcp.shown import json_escaped


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


def json_text(value: Any, indent: int | None = None) -> str:
    """`value` as JSON for a terminal: non-ASCII text as is, every control character escaped."""
    return json_escaped(json.dumps(value, indent=indent, ensure_ascii=False))


def print_json(value: Any) -> None:
    sys.stdout.write(json_text(to_jsonable(value), indent=2) + "\n")


def read_catalogue(source: str) -> dict:
    """A catalogue from a JSON file, or '-' for standard input: UTF-8 text (a byte-order mark is
    allowed) holding one JSON object. What it holds is checked when it is saved."""
    try:
        data = _read_stdin() if source == "-" else open(source, "rb").read()
    except OSError as exc:
        raise InvalidInputError(f"cannot read catalogue {source}: {exc.strerror}") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InvalidInputError(f"catalogue {source} is UTF-16 text; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"catalogue {source} is not UTF-8 text (byte {exc.start + 1} is "
                                f"0x{data[exc.start]:02x})") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_exact_float, object_pairs_hook=_object)
    except _TwiceError as exc:
        raise InvalidInputError(f"catalogue {source} gives the key {exc.args[0]!r} twice in one object (JSON "
                                "would keep only the last); give each key once") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"catalogue {source} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise InvalidInputError(f"catalogue {source} is nested too deeply") from None
    except ValueError as exc:  # NaN or Infinity, or a whole number of thousands of digits
        what = "a whole number too large to store (at most 64 bits)" if "integer" in str(exc) else exc
        raise InvalidInputError(f"catalogue {source} cannot be stored: it holds {what}") from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"catalogue {source} must be a JSON object at the top level")
    return value


class _TwiceError(Exception):
    """A key given twice in one JSON object."""


def _object(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object whose keys are all different: a key given twice would lose its first value."""
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _TwiceError(key)
        seen.add(key)
    return dict(pairs)


def _exact_float(text: str) -> float:
    """A JSON decimal as a float, when the float reads back as the same number: one with more
    digits than a float holds, or too small or too large for one, would be stored changed."""
    from decimal import Decimal

    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text}, too large to store")
    if value == 0 and Decimal(text) != 0:
        raise ValueError(f"the number {text}, too small to store (it would be stored as 0)")
    if Decimal(text) != Decimal(repr(value)):
        raise ValueError(f"the number {text}, which would be stored as {value!r} (a float holds about 16 digits)")
    return value


def _refuse_constant(name: str):
    raise ValueError(f"{name}, which JSON cannot carry")


def _read_stdin() -> bytes:
    if hasattr(sys.stdin, "buffer"):
        return sys.stdin.buffer.read()
    return sys.stdin.read().encode("utf-8", "surrogateescape")  # a text stream put in its place
