"""Writing lessons with write-time quality controls: the gate, dedup and near matches.

- The gate (mgcp.quality.trivial_reason) refuses trivial content before anything is written.
- Dedup: a lesson whose trigger and action equal an active lesson's once normalized (case,
  punctuation, underscores and spacing aside) is not added again; the existing lesson is returned
  with `existing` set, whatever id was asked for.
- Near matches: the new lesson's best text matches among the active lessons are scored as
  duplicate detection scores pairs; those at or above its review threshold are named in the answer,
  with the suggestion to refine one of them instead (the lesson is added all the same).

The check and the write share one transaction: two agents adding the same text at once get one
lesson.
"""

from __future__ import annotations

import asyncio

from mgcp import quality
from mgcp.config import RemConfig
from mgcp.errors import InvalidInputError
from mgcp.models import Lesson, LessonStatus
from mgcp.persistence.store import Store
from mgcp.validation import MAX_SHORT, check_text

NEAR_CANDIDATES = 20


class AddResult:
    def __init__(self, lesson: Lesson, existing: bool, similar: list[dict]):
        self.lesson, self.existing, self.similar = lesson, existing, similar

    @property
    def message(self) -> str:
        if self.existing:
            return (f"lesson {self.lesson.id} already says this (same trigger and action); "
                    "nothing was added")
        opposite = [s["id"] for s in self.similar if s.get("opposite")]
        if opposite:  # "A before B" beside "B before A", "Do X" beside "Never do X": not a lesson to refine
            return (f"added {self.lesson.id}; it is alike in words to {', '.join(opposite)} but may say the "
                    "opposite: check which of them holds")
        if self.similar:
            names = ", ".join(f"{s['id']} ({s['similarity']:.2f})" for s in self.similar)
            return (f"added {self.lesson.id}; it is similar to {names}: consider refining that lesson "
                    "instead (`mgcp lesson refine`)")
        return f"added {self.lesson.id}"

    def to_dict(self) -> dict:
        return {**self.lesson.model_dump(mode="json"), "existing": self.existing, "similar": self.similar,
                "message": self.message}


def gate(trigger: str | None, action: str | None, required: bool = True) -> tuple[str | None, str | None]:
    """Refuse empty, oversized or secret-bearing text, then trivial content (InvalidInputError
    naming why); the two texts as checked (stripped). `required=False` (a refinement): a missing
    field is left as it is."""
    trigger = check_text("trigger", trigger, required=required, limit=MAX_SHORT)
    action = check_text("action", action, required=required)
    for field, value in (("trigger", trigger), ("action", action)):
        if value:
            reason = quality.trivial_reason(field, value)
            if reason:
                raise InvalidInputError(f"{reason}; a lesson must say when it applies and what to do")
    return trigger, action


async def add_lesson(store: Store, config: RemConfig, lesson_id: str, trigger: str, action: str,
                     rationale: str | None = None, tags: list[str] | None = None,
                     parent_id: str | None = None, session_id: str | None = None,
                     kind: str | None = None, confidence: float | None = None) -> AddResult:
    gate(trigger, action)
    async with store.transaction():
        if isinstance(trigger, str) and isinstance(action, str):
            same = await store.lessons.same_text(trigger.strip(), action.strip())
            if same is not None:
                return AddResult(same, True, [])
        lesson = await store.lessons.add(lesson_id, trigger, action, rationale, tags or [], parent_id,
                                         session_id=session_id, kind=kind, confidence=confidence)
    similar = await near_matches(store, config, lesson)
    return AddResult(lesson, False, similar)


async def near_matches(store: Store, config: RemConfig, lesson: Lesson) -> list[dict]:
    """Active lessons that duplicate detection would put up for review with `lesson`, best first."""
    from mgcp.operations import duplicate_detection

    candidates = [c for c in await store.lessons.search(f"{lesson.trigger} {lesson.action}", NEAR_CANDIDATES)
                  if c.id != lesson.id]
    if not candidates:
        return []
    settings = config.operation("duplicate_detection")
    review_at = float(settings["review_threshold"])
    scores = await asyncio.to_thread(duplicate_detection.score_pairs, [lesson, *candidates], settings,
                                     duplicate_detection.LexicalBackend())
    actions = {c.id: c.action for c in candidates}
    found = []
    for (a, b), score in scores.items():
        if lesson.id in (a, b) and score.value >= review_at:
            other = b if a == lesson.id else a
            found.append({"id": other, "similarity": round(score.value, 3),
                          "opposite": duplicate_detection.opposite(lesson.action, actions[other])})
    return sorted(found, key=lambda s: (-s["similarity"], s["id"]))[:3]


def require_active(lesson: Lesson, verb: str, purpose: str) -> None:
    """Refuse what is done to a lesson agents are given (`verb` it: "refine"), unless it is active:
    one merged into another names that one, one archived or deleted says to restore it first."""
    if lesson.status == LessonStatus.active:
        return
    if lesson.status == LessonStatus.superseded and lesson.superseded_by:
        raise InvalidInputError(f"lesson {lesson.id} was merged into {lesson.superseded_by}; {verb} "
                                f"{lesson.superseded_by}")
    raise InvalidInputError(f"lesson {lesson.id} is {lesson.status.value}; restore it first "
                            f"(`mgcp lesson restore {lesson.id}`) {purpose}")


async def refine_lesson(store: Store, lesson_id: str, reason: str, trigger: str | None = None,
                        action: str | None = None, rationale: str | None = None, tags: list[str] | None = None,
                        session_id: str | None = None, kind: str | None = None,
                        confidence: float | None = None) -> Lesson:
    """A refinement through the gate (new trigger or action text must not be trivial), of an active
    lesson: a version of a merged, archived or deleted one would be retrieved by nobody."""
    require_active(await store.lessons.get(lesson_id), "refine", "to refine it")
    gate(trigger, action, required=False)
    return await store.lessons.refine(lesson_id, reason, trigger, action, rationale, tags, session_id,
                                      kind=kind, confidence=confidence)
