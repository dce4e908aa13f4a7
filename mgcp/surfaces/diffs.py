"""Unified diffs of two lesson versions and of a project's context at two sessions, as people read
them in a terminal or a pull request. Each side is rendered as labelled lines (one field, or one
list item, per line) so that the diff names exactly what changed."""

from __future__ import annotations

import difflib
import json

from mgcp.models import LessonVersion
from mgcp.surfaces.format import TODO_MARKS


def version_lines(v: LessonVersion) -> list[str]:
    lines = [f"trigger: {v.trigger}",
             f"action: {v.action if v.action is not None else '(not recoverable: overwritten before versioning)'}",
             f"rationale: {v.rationale}" if v.rationale else "rationale:"]
    lines += [f"tag: {t}" for t in sorted(v.tags)]  # a set: the same tags in another order are no change
    return lines


def context_lines(state: dict) -> list[str]:
    """`state`: a context-at-session document (notes, todos, decisions, active files, catalogue)."""
    lines = [f"notes: {line}" for line in (state.get("notes") or "").splitlines()] or ["notes:"]
    lines += [f"todo [{TODO_MARKS.get(t.get('status'), ' ')}]: {t.get('content')}" for t in state.get("todos") or []]
    lines += [f"decision: {d}" for d in state.get("recent_decisions") or []]
    lines += [f"active file: {f}" for f in state.get("active_files") or []]
    catalogue = state.get("catalogue") or {}
    lines += [f"catalogue: {line}" for line in json.dumps(catalogue, indent=2, sort_keys=True, ensure_ascii=False).splitlines()]
    return lines


def unified(before: list[str], after: list[str], from_label: str, to_label: str) -> list[str]:
    return [line.rstrip("\n") for line in difflib.unified_diff(before, after, from_label, to_label, lineterm="", n=3)]
