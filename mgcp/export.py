"""Training data from lesson history: DPO preference pairs.

One record per pair of consecutive *real* versions of a lesson (reconstructed rows, whose action text
was lost before versioning, are never paired): the newer action is `chosen`, the older `rejected`,
and the prompt presents the trigger as a situation. Pairs whose actions are equal (a refinement of
the trigger, rationale or tags only) teach nothing and are left out.
"""

from __future__ import annotations

from mgcp.models import LessonVersion


def prompt_for(trigger: str) -> str:
    return f"You are a coding agent. Situation: {trigger.strip()}\nWhat should you do?"


def dpo_records(pairs: list[tuple[LessonVersion, LessonVersion]]) -> list[dict]:
    records = []
    for older, newer in pairs:
        if older.reconstructed or newer.reconstructed or older.action is None or newer.action is None:
            continue
        if older.action.strip() == newer.action.strip():
            continue
        records.append({
            "prompt": prompt_for(newer.trigger),
            "chosen": newer.action,
            "rejected": older.action,
            "lesson_id": newer.lesson_id,
            "chosen_version": newer.version,
            "rejected_version": older.version,
            "refinement_reason": older.refinement_reason,
            "rejected_at": older.timestamp,
            "chosen_at": newer.timestamp,
            "session_id": older.session_id,
        })
    return records
