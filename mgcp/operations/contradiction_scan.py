"""contradiction_scan: pairs of active lessons on the same situation whose actions say opposite things.

Each action is read as claims: (polarity, what it is about). The action is folded as similarity
reads it (`mgcp.text.terms`: "n't" and "never" as "not", "do not" as "not", "refrain from" and
"stay away from" as "avoid", "utilize" as "use", "favor" as "prefer") and split into sentences: a
question, or a lead-in ending with ":" whose list is not there, claims nothing, and a label before
a colon (its longer words capitalised) is dropped. Sentences split into clauses at punctuation and
at "but". In a clause:

- "A over B", "A instead of B", "A rather than B", "prefer A to B": A is claimed (+), B refused (-);
  a clause opening with "instead of" / "rather than" refuses what follows; "replace A with B"
  refuses A and claims B.
- otherwise the clause is one claim, negative when it holds an odd number of negators ("not", "no",
  "avoid", "disable", "forbid", "prohibit", "disallow", "deprecated", "discouraged", "obsolete",
  "skip", "omit", "ignore", "forget", "neglect": "never disable X" and "don't skip X" claim X), else
  positive. A clause of negators alone ("Don't:") passes them on to the next clause; a condition
  ("If not,", "when no tests changed,") claims nothing and passes nothing on.

What a claim is about is its stemmed words without function words, generic coding verbs ("use",
"make sure") and the polarity words themselves, so "always use X", "use X", "enable X" and "X is
required" are all about X.

Two lessons contradict when their triggers are alike (TF-IDF cosine >= `trigger_threshold`: the
same situation) and one claims what the other refuses: two claims of opposite polarity whose words
overlap by Jaccard >= `claim_threshold`, or one of which (of at least CONTAINED_MIN_WORDS words)
the other, at most CONTAINED_MAX_GROWTH times as long, holds whole ("use server-side cursors" /
"don't use server-side cursors behind PgBouncer": a rule and its exception, for a person to
reconcile). Only claims holding at least MIN_SHARE of their action's words are compared: a word in
a list or an aside ("..., static content, types") is not what a long rule says. Candidate claim
pairs are found by prefix filtering on the words, rarest first (exact for the Jaccard threshold),
and for held claims through their rarest word, so the scan is near-linear in the lessons.
Agreeing paraphrases ("never X" / "don't X"; "prefer X over Y" / "use X instead of Y") carry the
same polarities and are not raised.

Findings `contradiction` (at most `max_findings`, strongest first: claim overlap, then trigger
similarity), subject the two lessons. Options: keep the newer (archive the older; recommended),
keep the older (archive the newer), refine one (input: which lesson and its new action), keep both
(remembered), skip. `--auto` never applies them: which rule is right is a person's call.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from mgcp import text
from mgcp.models import FindingOption, Lesson, RemFinding
from mgcp.operations import cap, fingerprint, parse_time, subject_identity, subject_of
from mgcp.operations.shared import CycleCache
from mgcp.operations.similarity import LexicalBackend, dot

OPERATION = "contradiction_scan"
NEGATORS = frozenset({"not", "no", "avoid", "disable", "forbid", "prohibit", "disallow", "deprecated",
                      "discouraged", "obsolete", "skip", "omit", "ignore", "forget", "neglect"})
CONDITIONS = frozenset({"if", "unless", "when", "whether"})  # a clause opening so states no rule
CONNECTORS = (("instead", "of"), ("rather", "than"), ("over",))
# Words that carry a claim's force, not its subject.
FORCE_WORDS = frozenset("""
always ensure prefer preferred enable enabled allow allowed required require requires mandatory
should can will may recommended recommend okay ok fine acceptable necessary important
""".split()) | NEGATORS
_CONTENT_STOP = text.STOP_WORDS | text.CODING_STOP_WORDS | FORCE_WORDS
CONTAINED_MIN_WORDS = 2  # a claim of fewer words is judged by Jaccard alone
CONTAINED_MAX_GROWTH = 2.0  # a claim held whole by one at most this many times longer (an exception)
MIN_SHARE = 1 / 3  # a claim compared holds at least this share of its action's words
_WORDS = re.compile(r"[A-Za-z][\w'’-]*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"[.;:!?()\[\]{}\"\n\r\t,]+|\s[-–—]+\s|\bbut\b", re.IGNORECASE)


@dataclass(frozen=True)
class Claim:
    positive: bool
    about: frozenset[str]
    words: str  # the clause as read, for the finding


def claims(action: str | None) -> list[Claim]:
    """The claims of an action (see the module docstring)."""
    out: list[Claim] = []
    for sentence in _SENTENCE.split(action or ""):
        sentence = sentence.strip()
        if sentence.endswith(("?", ":")):  # a question, or a list's lead-in without its list
            continue
        head, colon, rest = sentence.partition(":")
        if colon and rest.strip() and _is_label(head):
            sentence = rest  # "Table Creation in Loops: don't ..."
        carried = 0  # the negations of a clause with nothing else: "Don't: store tokens in localStorage"
        for clause in _CLAUSE.split(sentence):
            words = text.terms(clause)
            shown = " ".join(clause.split())
            split = _connector(words)
            if split is not None:
                (start, end), flip = split
                for positive, part in ((not flip, words[:start]), (flip, words[end:])):
                    about = _about(part)
                    if about:
                        out.append(Claim(positive, about, shown))
                continue
            about = _about(words)
            if words[:1] and words[0] in CONDITIONS:
                continue  # "If no tests changed, ...": a condition states no rule, and its negation is not the rule's
            negations = carried + sum(1 for w in words if w in NEGATORS)
            if not about:
                carried = negations
                continue
            carried = 0
            out.append(Claim(negations % 2 == 0, about, shown))
    return out


def _is_label(head: str) -> bool:
    """A heading before a colon ("Table Creation in Loops", "JSON"): its longer words all capitalised,
    and about something (a bare "Don't:" is a negation, passed on)."""
    long = [w for w in _WORDS.findall(head) if len(w) > 3]
    return bool(long) and all(w[0].isupper() for w in long) and bool(_about(text.terms(head)))


def _connector(words: list[str]) -> tuple[tuple[int, int], bool] | None:
    """Where a preference splits the clause: ((start, end) of the connector, whether the part before
    it is the one refused), or None."""
    if words[:1] == ["replace"] and "with" in words:  # "replace A with B": A refused, B claimed
        at = words.index("with")
        return (at, at + 1), True
    for i in range(len(words)):
        for conn in CONNECTORS:
            if tuple(words[i:i + len(conn)]) == conn:
                return (i, i + len(conn)), False
        # "prefer A to B" (not "prefer to do A")
        if words[i] == "to" and "prefer" in words[:i] and words.index("prefer") < i - 1:
            return (i, i + 1), False
    return None


def _about(words: list[str]) -> frozenset[str]:
    return frozenset(text.stems([w for w in words if w not in _CONTENT_STOP and w != "replace"], _CONTENT_STOP))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def run(lessons: list[Lesson], settings: dict, cache: CycleCache | None = None,
        settled: frozenset[str] = frozenset()) -> list[RemFinding]:
    """The findings, capped (`settled`: see `mgcp.operations.cap`)."""
    trigger_at = float(settings["trigger_threshold"])
    claim_at = float(settings["claim_threshold"])
    by_id = {lesson.id: lesson for lesson in sorted(lessons, key=lambda lesson: lesson.id)}
    found = contradicting_pairs(list(by_id.values()), trigger_at, claim_at, cache)
    findings = [_finding(by_id[a], by_id[b], overlap, trigger, ca, cb)
                for (a, b), (overlap, trigger, ca, cb) in found]
    return cap(findings, int(settings.get("max_findings", 50)), lambda f: f.data["group"], settled)


def contradicting_pairs(lessons: list[Lesson], trigger_at: float, claim_at: float,
                        cache: CycleCache | None = None):
    """[((id a, id b), (claim overlap, trigger similarity, claim of a, claim of b))], strongest first;
    `lessons` sorted by id (the order duplicate detection vectorises them in, so a cycle shares it)."""
    owners: list[str] = []
    all_claims: list[Claim] = []
    for lesson in lessons:
        said = dict.fromkeys(claims(lesson.action))
        words = len(frozenset().union(*(claim.about for claim in said)))
        for claim in said:
            if len(claim.about) >= MIN_SHARE * words:  # an aside of a longer rule is not what it says
                owners.append(lesson.id)
                all_claims.append(claim)
    df = Counter(w for claim in all_claims for w in claim.about)
    # Postings by polarity: a claim meets only claims of the other polarity.
    prefixed: tuple[dict, dict] = (defaultdict(list), defaultdict(list))
    holding: tuple[dict, dict] = (defaultdict(list), defaultdict(list))  # word -> every claim about it
    for i, claim in enumerate(all_claims):
        for w in claim.about:
            holding[claim.positive][w].append(i)
    candidates: set[tuple[int, int]] = set()
    for i, claim in enumerate(all_claims):
        ordered = sorted(claim.about, key=lambda w: (df[w], w))
        owner, other = owners[i], not claim.positive
        # Jaccard >= t needs at least ceil(t x |about|) shared words: one of the rarest
        # |about| - ceil(t x |about|) + 1 words is shared (both sides' prefixes meet).
        prefix = ordered[:len(ordered) - math.ceil(claim_at * len(ordered) - 1e-9) + 1]
        for w in prefix:
            candidates.update((j, i) for j in prefixed[other].get(w, ()) if owners[j] != owner)
            prefixed[claim.positive][w].append(i)
        if len(ordered) >= CONTAINED_MIN_WORDS:  # a claim held whole by a longer one: its rarest word
            longest = CONTAINED_MAX_GROWTH * len(ordered)
            candidates.update((i, j) for j in holding[other].get(ordered[0], ())
                              if owners[j] != owner and len(ordered) < len(all_claims[j].about) <= longest)
    vectors = LexicalBackend(cache).vectors({lesson.id: lesson.trigger or "" for lesson in lessons})
    best: dict[tuple[str, str], tuple] = {}
    for j, i in candidates:
        about_i, about_j = all_claims[i].about, all_claims[j].about
        overlap = jaccard(about_i, about_j)
        small, large = sorted((about_i, about_j), key=len)
        held = len(small) >= CONTAINED_MIN_WORDS and len(large) <= CONTAINED_MAX_GROWTH * len(small) and small <= large
        if overlap < claim_at - 1e-9 and not held:
            continue
        a, b = sorted((owners[i], owners[j]))
        trigger = dot(vectors[a], vectors[b])
        if trigger < trigger_at - 1e-9:
            continue
        ca, cb = (all_claims[i], all_claims[j]) if owners[i] == a else (all_claims[j], all_claims[i])
        entry = (round(overlap, 4), round(min(trigger, 1.0), 4), ca, cb)
        if (a, b) not in best or entry[:2] > best[(a, b)][:2]:
            best[(a, b)] = entry
    return sorted(best.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))


def _created(lesson: Lesson) -> float:
    when = parse_time(lesson.created_at)
    return when.timestamp() if when else 0.0


def _finding(a: Lesson, b: Lesson, overlap: float, trigger: float, ca: Claim, cb: Claim) -> RemFinding:
    older, newer = sorted((a, b), key=lambda lesson: (_created(lesson), lesson.id))
    claim_of = {a.id: ca, b.id: cb}
    subject = subject_of(older, newer)

    def said(claim: Claim) -> str:
        return ("says: " if claim.positive else "refuses: ") + text.shorten(claim.words, 100)

    lines = [
        f"Two lessons on the same situation (triggers {trigger:.2f} alike) say opposite things:", "",
        f'1. "{older.id}" (older, added {older.created_at[:10]}) - {text.shorten(older.trigger, 100)}',
        f"   Action: {text.shorten(older.action, 200)}",
        f"   ({said(claim_of[older.id])})",
        f'2. "{newer.id}" (newer, added {newer.created_at[:10]}) - {text.shorten(newer.trigger, 100)}',
        f"   Action: {text.shorten(newer.action, 200)}",
        f"   ({said(claim_of[newer.id])})",
        "", "Which one holds?",
    ]
    options = [
        FindingOption(label="Keep the newer one (archive the older)", action="archive_older",
                      description=f'Archive "{older.id}"; "{newer.id}" stays'),
        FindingOption(label="Keep the older one (archive the newer)", action="archive_newer",
                      description=f'Archive "{newer.id}"; "{older.id}" stays'),
        FindingOption(label="Refine one of them", action="refine_one",
                      description="Write a new action for one lesson (a new version)",
                      needs_input=f'The lesson to refine and its new action, as "{older.id}: new action" '
                                  f'(or "1: ..." for the older, "2: ..." for the newer)'),
        FindingOption(label="Keep both - they apply to different cases", action="keep_both",
                      description="Remember this answer; not raised again unless one of them changes"),
        FindingOption(label="Skip for now", action="skip", description="Leave this finding pending"),
    ]
    return RemFinding(
        operation=OPERATION, kind="contradiction",
        title=f'Contradicting lessons "{older.id}" and "{newer.id}": {text.shorten(older.action, 50)}',
        description="\n".join(lines), options=options, recommended=1,
        data={"older": older.id, "newer": newer.id, "claim_overlap": overlap, "trigger_similarity": trigger,
              "claims": {lesson_id: {"positive": c.positive, "about": sorted(c.about), "clause": c.words}
                         for lesson_id, c in claim_of.items()},
              "group": min(older.tags, default=""),
              "lessons": {lesson.id: {"trigger": lesson.trigger, "action": lesson.action,
                                      "created_at": lesson.created_at, "version": lesson.version}
                          for lesson in (older, newer)}},
        subject=subject, fingerprint=fingerprint(OPERATION, "contradiction", subject_identity(subject)))
