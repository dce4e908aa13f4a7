"""staleness_scan: lessons nobody uses, popular lessons nobody refreshes, triggers nobody asks about.

Rules, each configurable (settings = config.DEFAULTS["staleness_scan"]):
1. `stale_unused`: never retrieved (usage_count 0) and created `unused_min_age_days` or more ago.
2. `popular_unrefined`: retrieved `popular_min_retrievals` times or more and last refined
   `popular_unrefined_days` or more ago.
0. `speculative_unconfirmed`: added with a confidence below `speculative_confidence` (0.5), and
   neither used nor confirmed (no retrieval, no "helped" outcome, confidence not raised) within
   `speculative_max_age_days` (30) of its creation: confirm it or archive it, never a silent expiry.
3. `unmatched_trigger`: none of the trigger's keywords (stemmed, stop words out) occurs in any query
   of the window (`recent_queries`, logged within `query_window_days`). Without queries there is no
   signal and no such finding; a lesson younger than the window is not judged by it either (it has
   not had the whole window to be asked for).

One finding per lesson: its kind is the first rule it hits (in the order above) and
data["reasons"] lists every rule it hits, so "never used and nobody asks for it" is one question.
Strongest first: more reasons, then longer idle, then id; at most `max_findings`, not counting those
already answered "keep" (`settled` fingerprints), so such answers make room for the next ones.
"""

from __future__ import annotations

from datetime import datetime

from mgcp import text
from mgcp.models import FindingOption, LessonUse, RemFinding
from mgcp.operations import fingerprint, parse_time, subject_identity, subject_of

OPERATION = "staleness_scan"


def run(lessons: list[LessonUse], recent_queries: list[str], now: datetime,
        settings: dict, settled: frozenset[str] = frozenset()) -> list[RemFinding]:
    query_words: set[str] = set()
    for query in recent_queries:
        query_words.update(text.keywords(query))
    window = int(settings["query_window_days"])
    scored = []
    for lesson in lessons:
        created = parse_time(lesson.created_at) or now
        refined = parse_time(lesson.last_refined) or created
        last_used = parse_time(lesson.last_used)
        age = (now - created).days
        reasons = []
        if (lesson.confidence < settings.get("speculative_confidence", 0.5) and lesson.usage_count == 0
                and lesson.helped == 0 and age >= settings.get("speculative_max_age_days", 30)):
            reasons.append("speculative_unconfirmed")
        if lesson.usage_count == 0 and age >= settings["unused_min_age_days"]:
            reasons.append("stale_unused")
        if (lesson.usage_count >= settings["popular_min_retrievals"]
                and (now - refined).days >= settings["popular_unrefined_days"]):
            reasons.append("popular_unrefined")
        trigger_words = text.keywords(lesson.trigger)
        if query_words and trigger_words and age >= window and not query_words.intersection(trigger_words):
            reasons.append("unmatched_trigger")
        if not reasons or fingerprint(OPERATION, reasons[0], subject_identity(subject_of(lesson))) in settled:
            continue
        idle = (now - (last_used or created)).days
        if reasons[0] == "popular_unrefined":
            idle = (now - refined).days
        scored.append(((-len(reasons), -idle, lesson.id), lesson, reasons, {
            "age_days": age, "idle_days": idle, "unrefined_days": (now - refined).days,
            "trigger_keywords": trigger_words}))
    scored.sort(key=lambda item: item[0])
    limit = int(settings.get("max_findings", 50))
    return [_finding(lesson, reasons, facts, len(recent_queries), window)
            for _, lesson, reasons, facts in scored[:limit]]


def _finding(lesson: LessonUse, reasons: list[str], facts: dict, query_count: int,
             window: int) -> RemFinding:
    kind = reasons[0]
    subject = subject_of(lesson)
    sentences = []
    if "speculative_unconfirmed" in reasons:
        sentences.append(f"was added as speculative (confidence {lesson.confidence:.2f}) {facts['age_days']} "
                         "days ago and has been neither used nor confirmed since")
    if "stale_unused" in reasons:
        sentences.append(f"has never been retrieved since it was created {facts['age_days']} days ago")
    if "popular_unrefined" in reasons:
        sentences.append(f"has been retrieved {lesson.usage_count} times but not refined for "
                         f"{facts['unrefined_days']} days")
    if "unmatched_trigger" in reasons:
        shown = ", ".join(facts["trigger_keywords"][:8])
        sentences.append(f"has trigger keywords ({shown}) that match none of the {query_count} "
                         f"queries logged in the last {window} days")
    summary = f'Lesson "{lesson.id}" ' + text.join_words(sentences) + "."
    description = "\n".join([
        summary, "",
        f"Trigger: {text.shorten(lesson.trigger, 200)}",
        f"Action: {text.shorten(lesson.action, 200)}",
        f"(v{lesson.version}, retrieved {lesson.usage_count} times, last used "
        f"{lesson.last_used[:10] if lesson.last_used else 'never'})",
        "", "What should we do?",
    ])
    titles = {
        "speculative_unconfirmed": f'Speculative lesson "{lesson.id}" unconfirmed after {facts["age_days"]} days',
        "stale_unused": f'Unused lesson "{lesson.id}" ({facts["age_days"]} days, never retrieved)',
        "popular_unrefined": f'Popular lesson "{lesson.id}" not refined for {facts["unrefined_days"]} days',
        "unmatched_trigger": f'Lesson "{lesson.id}": trigger matches no recent query',
    }
    archive = FindingOption(label="Archive it", action="archive",
                            description="Remove from active retrieval, keep in history")
    delete = FindingOption(label="Delete it", action="delete",
                           description="Soft-delete; history is kept and it can be undone")
    retrigger = FindingOption(label="Update trigger keywords", action="update_trigger",
                              description="Rewrite the trigger so it matches how you ask for it",
                              needs_input=f'New trigger for "{lesson.id}" (now: {text.shorten(lesson.trigger, 80)})')
    refine = FindingOption(label="Refine it", action="refine",
                           description="Write a better action text (a new version)",
                           needs_input=f'New action text for "{lesson.id}"')
    keep = FindingOption(label="Keep as-is", action="keep",
                         description="Remember this answer; not raised again unless the lesson changes")
    skip = FindingOption(label="Skip for now", action="skip", description="Leave this finding pending")
    confirm = FindingOption(label="Confirm it", action="confirm",
                            description="It holds: raise its confidence to 0.8 (a new version)")
    if kind == "speculative_unconfirmed":
        options = [confirm, archive, keep, skip]
    elif kind == "stale_unused":
        options = [archive, delete, retrigger, keep, skip]
    elif kind == "popular_unrefined":
        options = [refine, retrigger, keep, skip]
    else:
        options = [retrigger, archive, keep, skip]
    return RemFinding(
        operation=OPERATION, kind=kind, title=titles[kind], description=description,
        options=options, recommended=1,
        data={"lesson": lesson.id, "reasons": reasons, "usage_count": lesson.usage_count,
              "age_days": facts["age_days"], "unrefined_days": facts["unrefined_days"],
              "idle_days": facts["idle_days"], "trigger": lesson.trigger,
              "trigger_keywords": facts["trigger_keywords"]},
        subject=subject,
        fingerprint=fingerprint(OPERATION, kind, subject_identity(subject)),
    )
