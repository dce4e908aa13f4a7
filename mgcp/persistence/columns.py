"""How the JSON-ish columns of the legacy tables read, whatever wrote them. Stdlib only: the
SessionStart hook's recall reads them too."""

from __future__ import annotations

import json


# JSON columns without a default whose value the store reads as one shape (the others' default,
# '[]' or '{}', says theirs).
JSON_SHAPES = {("rem_findings", "options"): list, ("rem_state", "last_run_result"): dict}


def json_shape(table: str, column: str, default: str | None) -> type | None:
    """The shape (list or dict) the store reads a JSON column of `table` as, from its declared
    default; None when any JSON value is read."""
    return JSON_SHAPES.get((table, column)) or {"'[]'": list, "'{}'": dict}.get(default)


def json_list(text: str | None) -> list:
    """A JSON list column; an older writer's value that is not one reads as empty."""
    if not text or text == "[]":  # most lists are empty: skip the parser
        return []
    try:
        value = json.loads(text)
    except (TypeError, ValueError):  # not JSON, or not text at all
        return []
    return value if isinstance(value, list) else []


# The tags columns: besides a JSON list, an older writer left comma-separated words in some (any
# value that does not open with "["), which mgcp reads as the tags.
TAGS = {("lessons", "tags"), ("lesson_versions", "tags")}


def comma_separated(text: str | None) -> bool:
    """Whether a tags column holds comma-separated words (text, not a JSON list)."""
    return isinstance(text, str) and bool(text) and not text.lstrip().startswith("[")


def tags(text: str | None) -> list[str]:
    """The tags column: a JSON list, or (as an older writer left some) comma-separated words."""
    if comma_separated(text):
        return [t.strip() for t in text.split(",") if t.strip()]
    return [str(t) for t in json_list(text)]


def relationships(text: str | None) -> list[dict]:
    """The relationships column as lessons hold it: the entries that are objects with a target,
    each field read as an older writer meant it (`_link`)."""
    return [_link(r) for r in json_list(text) if isinstance(r, dict) and isinstance(r.get("target"), str)]


LINK_DEFAULTS = {"type": "related", "weight": 0.5, "bidirectional": True}
_TRUTH = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _link(entry: dict) -> dict:
    """One relationship entry, each field read as an older writer meant it: a weight written as
    text ("0.7") or a direction as 0/1 or "false" as what they say, a field left empty (null) or
    unreadable as its default; a context of one string holds that one context, and a context
    list's entries read as text."""
    link = dict(entry)
    for key, default in LINK_DEFAULTS.items():
        if key in link:
            link[key] = _lax(link[key], default)
    if "context" in link:
        context = link["context"]
        link["context"] = ([context] if context else []) if isinstance(context, str) else (
            [c if isinstance(c, str) else json.dumps(c) for c in context] if isinstance(context, list) else [])
    return link


def _lax(value, default):
    """A link field's value as the type of its default, converted as pydantic's lax mode converts
    it; the default when it cannot be."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        return _TRUTH.get(value.strip().lower(), default) if isinstance(value, str) else default
    if isinstance(default, float):
        try:
            return float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else default
        except (ValueError, OverflowError):  # not a number, or a whole number past any float
            return default
    return value if isinstance(value, str) else default
