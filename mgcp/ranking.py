"""How `lesson query` and `recall` order lessons: a score that is a sum of named parts, each a
weight (rem-config.yaml, `ranking:`) times a signal between 0 and 1. Stdlib only (the SessionStart
hook imports it).

    relevance   text match to the query (SQLite FTS5 BM25), divided by the best match among the
                candidates: 1.0 for the best; 0 when there is no query (a session's start)
    confidence  the lesson's confidence (default 0.8)
    use         min(1, ln(1 + uses) / ln(1 + USE_SATURATION)): retrievals, saturating at 50
    success     (helped + 1) / (helped + failed + 2): the success rate, 0.5 before any outcome
    importance  the write-time importance heuristic (mgcp.quality)
    tier        1 for a validated lesson, 0 for a candidate

    score = sum(weight[part] * signal[part] for every part)

With the reinforcement boost turned on (`reinforcement: boost: true` in rem-config.yaml), a lesson
that pattern reinforcement found recurring gains one more part, `reinforcement_boost` =
min(max_boost, weight x reinforcement_count) (mgcp.reinforcement), shown only when non-zero.

Lessons are ordered by score, then by importance (a tie goes to the more important lesson), then
by id. Importance weighs 0 in the score by default: the heuristic says how much a rule is worth
keeping, not how well it fits a query, and any weight for it lowered precision@5 on the real task
queries of benchmarks/quality (benchmarks/README.md has the figures).

Tiers: a lesson is `validated` once it helped at least once or was used VALIDATED_AFTER_USES
times, `archived` when review archived it, else `candidate` (new, unproven).
"""

from __future__ import annotations

import math

from mgcp import quality
from mgcp.reinforcement import reinforcement_boost

WEIGHTS = {"relevance": 1.0, "confidence": 0.25, "use": 0.1, "success": 0.25, "importance": 0.0, "tier": 0.1}
USE_SATURATION = 50
VALIDATED_AFTER_USES = 3
TIERS = ("candidate", "validated", "archived")


def tier(status: str, helped: int, usage_count: int) -> str:
    if status == "archived":
        return "archived"
    return "validated" if helped > 0 or usage_count >= VALIDATED_AFTER_USES else "candidate"


def success_rate(helped: int, failed: int) -> float | None:
    """Helped / (helped + failed), or None before any outcome (shown as such, unsmoothed)."""
    return round(helped / (helped + failed), 4) if helped + failed else None


def signals(*, relevance: float, confidence: float, usage_count: int, helped: int, failed: int,
            importance: float, tier: str) -> dict[str, float]:
    """Each part's signal, between 0 and 1."""
    return {
        "relevance": max(0.0, min(1.0, relevance)),
        "confidence": max(0.0, min(1.0, confidence)),
        "use": min(1.0, math.log1p(max(usage_count, 0)) / math.log1p(USE_SATURATION)),
        "success": (helped + 1) / (helped + failed + 2),
        "importance": max(0.0, min(1.0, importance)),
        "tier": 1.0 if tier == "validated" else 0.0,
    }


def parts(signal: dict[str, float], weights: dict[str, float] | None = None) -> dict[str, float]:
    """Each part's contribution: its weight times its signal (a part without a weight counts 0)."""
    weights = WEIGHTS if weights is None else weights
    return {name: round(weights.get(name, 0.0) * value, 4) for name, value in signal.items()}


def boosted(score_parts: dict[str, float], reinforcement_count: int | None,
            reinforcement: dict | None) -> dict[str, float]:
    """The parts with `reinforcement_boost` added, when `reinforcement` (the config's section) turns
    the boost on and the lesson was reinforced."""
    if not (reinforcement and reinforcement.get("boost")):
        return score_parts
    boost = reinforcement_boost(reinforcement_count or 0, reinforcement["weight"], reinforcement["max_boost"])
    return {**score_parts, "reinforcement_boost": round(boost, 4)} if boost > 0 else score_parts


def score(row, best: float, tags: list[str], weights: dict | None = None,
          reinforcement: dict | None = None) -> tuple[float, dict[str, float], float, str]:
    """A candidate lesson's (score, parts, importance, tier), from a row holding its trigger, action,
    rationale, confidence, use, outcome counts, reinforcement count and BM25 relevance; `best`: the
    best relevance among the candidates."""
    importance = quality.importance(row["trigger"], row["action"], row["rationale"], tags)
    level = tier("active", row["helped"], row["usage_count"])
    signal = signals(relevance=(row["relevance"] or 0.0) / best if best > 0 else 0.0, confidence=row["confidence"],
                     usage_count=row["usage_count"], helped=row["helped"], failed=row["failed"],
                     importance=importance, tier=level)
    score_parts = boosted(parts(signal, weights), row["reinforcement_count"], reinforcement)
    return total(score_parts), score_parts, importance, level


def total(score_parts: dict[str, float]) -> float:
    return round(sum(score_parts.values()), 4)


def order_key(score: float, importance: float, lesson_id: str) -> tuple:
    """The sort key of a ranked lesson: best score first, then the more important, then by id."""
    return (-score, -importance, lesson_id)
