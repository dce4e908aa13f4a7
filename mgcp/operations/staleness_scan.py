"""staleness_scan: lessons nobody uses, popular lessons nobody refreshes, triggers nobody asks about.

Rules, each configurable (settings = config.DEFAULTS["staleness_scan"]):
1. `stale_unused`: never retrieved (usage_count 0) and created `unused_min_age_days` or more ago.
2. `popular_unrefined`: retrieved `popular_min_retrievals` times or more and last refined
   `popular_unrefined_days` or more ago.
0. `speculative_unconfirmed`: added with a confidence below `speculative_confidence` (0.5), and
   neither used nor confirmed (no retrieval, no "helped" outcome, confidence not raised) within
   `speculative_max_age_days` (30) of its creation: confirm it or archive it (recommended: nothing
   bore it out), never a silent expiry.
3. `unmatched_trigger`: none of the trigger's keywords (stemmed, stop words out) occurs in any query
   of the window (`recent_queries`, logged within `query_window_days`). With fewer than
   `unmatched_min_queries` queries in the window there is no signal (a few queries leave most
   triggers unasked for) and no such finding; a lesson younger than the window is not judged by it
   either (it has not had the whole window to be asked for).

One finding per lesson: its kind is the first rule it hits (in the order above) and
data["reasons"] lists every rule it hits, so "never used and nobody asks for it" is one question.
Strongest first: more reasons, then longer idle, then id; at most `max_findings`, not counting those
already answered "keep" (`settled` fingerprints), so such answers make room for the next ones; how
many more lessons the rules hit is counted (`scan`), for the run's report to say.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from mgcp import text
from mgcp.models import FindingOption, LessonUse, RemFinding
from mgcp.operations import fingerprint, parse_time, subject_identity, subject_of

OPERATION = "staleness_scan"


def run(lessons: list[LessonUse], recent_queries: list[str], now: datetime,
        settings: dict, settled: frozenset[str] = frozenset()) -> list[RemFinding]:
    return scan(lessons, recent_queries, now, settings, settled)[0]


RULES = ("speculative_unconfirmed", "stale_unused", "popular_unrefined", "unmatched_trigger")


def unjudged(settings: dict, recent_queries: list[str]) -> tuple[int, int] | None:
    """The usage counts (low, high) of the lessons no rule can judge, now or later, given the
    queries of the window: with fewer than `unmatched_min_queries`, a lesson retrieved at least once
    (neither unused nor speculative) but fewer than `popular_min_retrievals` times; None when every
    lesson can be judged.
    `scan` of the lessons without them gives what `scan` of all gives (such a lesson adds no
    reason and no moment), so they need not be read."""
    popular = int(settings["popular_min_retrievals"])
    if _enough(settings, recent_queries) or popular <= 1:
        return None
    return 1, popular - 1


def _enough(settings: dict, recent_queries: list[str]) -> bool:
    """Whether the window holds enough queries to judge triggers by (`unmatched_min_queries`)."""
    return len(recent_queries) >= max(int(settings["unmatched_min_queries"]), 1)


def scan(lessons: list[LessonUse], recent_queries: list[str], now: datetime, settings: dict,
         settled: frozenset[str] = frozenset(), first_query: str | None = None
         ) -> tuple[list[RemFinding], datetime | None, int]:
    """The findings at `now`; until when the same inputs (lessons, their use, the queries, the
    answers) keep giving the same findings' subjects and kinds (None: for ever); and how many more
    lessons the rules hit than the findings show (beyond `max_findings`). That span ends at
    the first of: the oldest query of the window (logged at `first_query`) leaving it; a lesson
    beyond the cut reaching the age that gives it as many reasons as the last one shown; a lesson
    shown reaching the age of a rule that comes before its kind; a lesson beyond the cut
    overtaking one shown (`_reorderings`)."""
    query_words: set[str] = set()
    for query in recent_queries if _enough(settings, recent_queries) else ():
        query_words.update(text.keywords(query))
    window = int(settings["query_window_days"])
    speculative = settings.get("speculative_confidence", 0.5), settings.get("speculative_max_age_days", 30)
    unused_age, popular = settings["unused_min_age_days"], settings["popular_min_retrievals"]
    popular_age = settings["popular_unrefined_days"]
    changes: list[datetime] = []  # the moments a finding could change, in the future
    oldest = parse_time(first_query)
    if recent_queries:  # a second early, as the window compares stored text (unknown: at once)
        changes.append(oldest + timedelta(days=window, seconds=-1) if oldest else now)
    scored = []
    ageing = []  # (lesson id, reasons now, [(when, rule) reached later]) of lessons a rule awaits

    # each rule's age as a span of time, made once (a rule holds from `since` + its span on)
    spans = {days: timedelta(days=days) for days in (speculative[1], unused_age, popular_age, window)}

    def rule(reasons: list, later: list, name: str, holds: bool, since: datetime | None, days) -> None:
        if holds:
            reasons.append(name)
        elif since is not None and since + spans[days] > now:
            later.append((since + spans[days], name))

    for lesson in lessons:
        # a time that does not parse reads as `now` at every run: a constant age of 0, no change
        created_at = parse_time(lesson.created_at)
        age = (now - (created_at or now)).days
        reasons, later = [], []
        if lesson.confidence < speculative[0] and lesson.usage_count == 0 and lesson.helped == 0:
            rule(reasons, later, "speculative_unconfirmed", age >= speculative[1], created_at, speculative[1])
        if lesson.usage_count == 0:
            rule(reasons, later, "stale_unused", age >= unused_age, created_at, unused_age)
        if lesson.usage_count >= popular:
            refined_at = _refined(lesson, created_at)
            rule(reasons, later, "popular_unrefined", (now - (refined_at or now)).days >= popular_age, refined_at,
                 popular_age)
        if query_words:
            trigger_words = text.keywords(lesson.trigger)
            if trigger_words and not query_words.intersection(trigger_words):
                rule(reasons, later, "unmatched_trigger", age >= window, created_at, window)
        if later:
            ageing.append((lesson.id, reasons, sorted(later)))
        if not reasons or (settled and fingerprint(OPERATION, reasons[0],
                                                   subject_identity(subject_of(lesson))) in settled):
            continue
        if reasons[0] == "popular_unrefined":
            idle_from = _refined(lesson, created_at)
        else:
            idle_from = parse_time(lesson.last_used) or created_at
        idle = (now - (idle_from or now)).days
        scored.append(((-len(reasons), -idle, lesson.id), lesson, reasons, created_at, idle_from))
    scored.sort(key=lambda item: item[0])
    limit = int(settings.get("max_findings", 50))
    if limit <= 0:
        return [], None, len(scored)
    shown = {key[2] for key, *_ in scored[:limit]}
    enough = -scored[limit - 1][0][0] if len(scored) >= limit else 1  # reasons that can enter the cut
    for lesson_id, reasons, later in ageing:
        if lesson_id in shown:  # its kind changes when a rule before it applies
            changes += [when for when, name in later if RULES.index(name) < RULES.index(reasons[0])][:1]
        else:
            changes += [when for i, (when, _) in enumerate(later, 1) if len(reasons) + i >= enough][:1]
    changes += _reorderings(scored, limit, now)
    findings = [_finding(lesson, reasons, {
        "age_days": (now - (created_at or now)).days, "idle_days": -minus_idle,
        "unrefined_days": (now - (_refined(lesson, created_at) or now)).days,
        "trigger_keywords": text.keywords(lesson.trigger)}, len(recent_queries), window)
        for (_, minus_idle, _), lesson, reasons, created_at, _ in scored[:limit]]
    return findings, min(changes, default=None), len(scored) - len(findings)


def _refined(lesson: LessonUse, created_at: datetime | None) -> datetime | None:
    """When the lesson was last refined (its creation when that does not parse)."""
    return parse_time(lesson.last_refined) or created_at


def _reorderings(scored: list, limit: int, now: datetime) -> list[datetime]:
    """When a lesson cut (beyond the first `limit` of `scored`) could overtake one shown. Only
    lessons of as many reasons as the last one shown compete, by idle days and then id; idle days
    count up at the same pace for all. A cut lesson overtakes a shown one when it next counts a day
    if it has been idle longer (the same count now, a later id), or less than a day shorter with an
    earlier id; otherwise never."""
    if limit <= 0 or len(scored) <= limit or scored[limit - 1][0][0] != scored[limit][0][0]:
        return []
    reasons, least = scored[limit - 1][0][0], -scored[limit - 1][0][1]
    shown = [(since, key[2]) for key, _, _, _, since in scored[:limit] if key[0] == reasons]
    day = timedelta(days=1)
    moments = []
    for (count, minus_idle, lesson_id), _, _, _, since in scored[limit:]:
        if count != reasons or -minus_idle < least - 1:
            break  # sorted: the rest have fewer reasons, or two idle days fewer than any shown
        if since is not None and any(
                other is None or since < other or (other < since < other + day and lesson_id < other_id)
                for other, other_id in shown):
            moments.append(since + timedelta(days=1 - minus_idle))
    return [m for m in moments if m > now]


def _finding(lesson: LessonUse, reasons: list[str], facts: dict, query_count: int,
             window: int) -> RemFinding:
    kind = reasons[0]
    subject = subject_of(lesson)
    sentences = []
    if "speculative_unconfirmed" in reasons:
        sentences.append(f"was added as speculative (confidence {lesson.confidence:.2f}) {facts['age_days']} "
                         "days ago and has been neither used nor confirmed since")
    if "stale_unused" in reasons and "speculative_unconfirmed" not in reasons:  # said already: never used
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
        # a speculative lesson nothing has borne out: keeping it is the claim that needs evidence
        options=options, recommended=2 if kind == "speculative_unconfirmed" else 1,
        data={"lesson": lesson.id, "reasons": reasons, "usage_count": lesson.usage_count,
              "age_days": facts["age_days"], "unrefined_days": facts["unrefined_days"],
              "idle_days": facts["idle_days"], "trigger": lesson.trigger,
              "trigger_keywords": facts["trigger_keywords"]},
        subject=subject,
        fingerprint=fingerprint(OPERATION, kind, subject_identity(subject)),
    )
