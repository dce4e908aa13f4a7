"""duplicate_detection: pairs of active lessons that say the same thing.

A reviewer decides that two lessons are one by what they tell the agent to do, and then checks that
they apply to the same kind of situation. So the score of a pair, from its action similarity a and
its trigger similarity t, is

    score = a + trigger_support x t x (1 - a) - trigger_weight x (1 - t) x a

an unlike trigger lowers it a little, the same trigger closes a little of the gap to 1.

- action similarity: the TF-IDF cosine of the two actions, over their terms as `mgcp.text` reads
  them (folded, identifiers split, synonyms and compounds met, stemmed); with the optional semantic
  backend, the higher of that and the two actions' embedding cosine. When the shorter action's
  terms all appear in the longer one, which adds only a little (a qualifier or an example: the
  shorter has at least CONTAINED_MIN_TERMS terms and the longer at most CONTAINED_MAX_GROWTH times
  as many), it is at least `containment_factor` x that containment.
- trigger similarity: the cosine of the two triggers. With trigger_weight 0.1, one action under
  two unrelated triggers scores 0.90; with trigger_support 0.05, two different actions under one
  trigger (a = 0.5) score 0.525: a shared situation never makes two rules one.
- tags never add to the score; among equal scores the pair sharing more tags comes first.
- actions equal once normalised (one rule copied into two places) score at least the merge
  threshold: a copy is a merge, whatever its trigger. A rule copied into many places is asked
  about once per copy: each copy is paired with the first of its group, and only that first one
  with other lessons (a rule in 30 files is 29 merges, not 435 pairs).

Pairs are found by prefix-filtered all-pairs search over the actions, from the lowest action
similarity the same trigger can lift to `review_threshold` (see
`mgcp.operations.similarity`: exact, sub-quadratic in practice, memory linear in the text), plus
the contained pairs, found through their rarest terms (`_containing`: their cosine may be lower;
searching all pairs that low cost four times the time at 100k lessons), then scored as above.
In a REM cycle (lexical backend) the all-pairs search is kept between cycles: a repeat compares
only the actions that changed (or whose words' weights moved too far) with all the others, and
scores the kept pairs again, with exactly the pairs and values of a full search; it keeps the
contained pairs too, and searches only those of the changed actions (and of an action whose rarest
term became rare enough to be looked up) again (both proved in `mgcp.operations.kept_search`).

Findings, strongest first, at most `max_findings` of each kind (spread over tags; the rest in one
summary, see `mgcp.operations.cap`):
- `duplicate_merge` (score >= merge_threshold): recommended "merge", unless their actions may say
  opposite things (`opposite`): words on opposite sides of the same order word (`text.swapped`: "A
  before B" / "B before A", "prefer A over B" / "prefer B over A" score alike in words), or a claim
  of one that the other denies, as the contradiction scan reads them ("Read its tests first" /
  "Never read its tests first"; read for the findings shown, not for those only counted in a
  summary), or one labelled as what not to do and the other not (`labelled_apart`: "GOOD:
  MyButton.jsx" / "BAD: mybutton.jsx", a rule file's two examples), or hold opposite function
  words (`words_apart`: "before" / "after", "with" / "without", which similarity leaves out as
  stop words; such a pair is no copy either), or whose actions give
  different numbers (similarity leaves numbers out: "Set max_connections to 20" / "to 200" score
  1.0); then "keep_both", and the title and description
  say why (`data["reordered"]`, `data["opposite"]`, `data["numbers"]`: each action's numbers).
- `duplicate_review` (review_threshold <= score < merge_threshold): recommended "keep_both".
Each carries data {"similarity", "action_similarity", "trigger_similarity", "copy", "canonical",
"other", "lessons": {id: {trigger, action, usage_count, version}}}; canonical is the one to keep:
more usage, then more versions, then older, then smaller id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mgcp.models import FindingOption, Lesson, RemFinding
from mgcp.operations import cap, copies, fingerprint, parse_time, subject_identity, subject_of
from mgcp.operations.contradiction_scan import opposed
from mgcp.operations.shared import CycleCache, stage
from mgcp.operations.similarity import DISTINCTIVE_DF, LexicalBackend, SimilarityBackend, dot
from mgcp.text import shorten, swapped, tokenize

if TYPE_CHECKING:
    from mgcp.operations.kept_search import KeptSearch

OPERATION = "duplicate_detection"
CONTAINED_MIN_TERMS = 3     # a shorter action of fewer terms is not judged by containment
CONTAINED_MAX_GROWTH = 2.0  # the longer action has at most this many times the shorter's terms
CONTAINMENT = (CONTAINED_MIN_TERMS, CONTAINED_MAX_GROWTH, DISTINCTIVE_DF)  # the rule as `sparse.contained` takes it
OPPOSED_AT = 0.6  # how alike two claims' words must be to oppose (the contradiction scan's default claim_threshold)


def opposite(action_a: str | None, action_b: str | None) -> bool:
    """Whether two actions alike in words may say opposite things: the same words ordered the
    other way round ("A before B" / "B before A"), labelled one to do and one not to ("GOOD: ..." /
    "BAD: ..."), opposite function words ("before you deploy" / "after you deploy"), or a claim
    of one that the other denies ("Read its tests first" / "Never read its tests first"), as the
    contradiction scan reads claims."""
    return (swapped(action_a, action_b) or labelled_apart(action_a, action_b) or words_apart(action_a, action_b)
            or opposed(action_a or "", action_b or "", OPPOSED_AT))


# A label opening an action that says whether it shows what to do or what not to ("BAD: ..."): rule
# files give an example of each, alike in words.
_LABEL = re.compile(r"\s*(good|bad|do|don'?t|correct|incorrect|right|wrong|avoid|prefer|yes|no)\s*:", re.IGNORECASE)
_NOT_TO_DO = {"bad", "dont", "don't", "incorrect", "wrong", "avoid", "no"}


def labelled_apart(action_a: str | None, action_b: str | None) -> bool:
    """Whether one action is labelled as what not to do and the other is not ("GOOD: MyButton.jsx"
    / "BAD: mybutton.jsx")."""
    def not_to_do(action: str | None) -> bool:
        label = _LABEL.match(action or "")
        return bool(label) and label.group(1).lower() in _NOT_TO_DO
    return not_to_do(action_a) != not_to_do(action_b)


@dataclass(frozen=True)
class Score:
    value: float
    action: float
    trigger: float
    copy: bool


def run(lessons: list[Lesson], settings: dict, backend: SimilarityBackend | None = None,
        cache: CycleCache | None = None, settled: frozenset[str] = frozenset(),
        search: "KeptSearch | None" = None) -> list[RemFinding]:
    """The findings, capped (`settled`: see `mgcp.operations.cap`). With `search` (the lexical
    backend only), the action pairs are found from what earlier cycles kept, and what to keep for
    the next is left in it (`mgcp.operations.kept_search`): the same findings, bit for bit."""
    cache = cache or CycleCache()  # the action vectors are read twice: scoring and the pair search
    backend = backend or LexicalBackend(cache)
    by_id = {lesson.id: lesson for lesson in sorted(lessons, key=lambda lesson: lesson.id)}
    merge_at = float(settings["merge_threshold"])
    review_at = float(settings["review_threshold"])
    scored = score_pairs(list(by_id.values()), settings, backend, cache, search)
    found = [(a, b, score) for (a, b), score in scored.items() if score.value >= review_at]
    found.sort(key=lambda p: (-round(p[2].value, 9), -_shared_tags(by_id[p[0]], by_id[p[1]]), p[0], p[1]))
    findings = [_finding(by_id[a], by_id[b], score, merge_at) for a, b, score in found]
    scores = {(a, b): score for a, b, score in found}
    shown = cap(findings, int(settings.get("max_findings", 50)),
                lambda f: _group(by_id[f.data["canonical"]]), settled)
    # Whether a pair may say opposite things is read from its actions' claims (a quarter of a
    # millisecond a pair): only for the findings shown, whose recommendation a person reads. Those
    # beyond the cap are only counted, and a summary's bulk merge takes copies alone.
    return [_finding(by_id[f.data["canonical"]], by_id[f.data["other"]], scores[_pair(f)], merge_at, True)
            if f.kind != "summary" else f for f in shown]


def pair_fingerprints(subject: dict[str, int]) -> set[str]:
    """The fingerprints this operation gives the pairs of these lessons (id -> version), of
    either kind: how an answer about a set of lessons ("keep them all") names its pairs."""
    ids = sorted(subject)
    return {fingerprint(OPERATION, kind, subject_identity({a: subject[a], b: subject[b]}))
            for i, a in enumerate(ids) for b in ids[i + 1:] for kind in ("duplicate_merge", "duplicate_review")}


def _pair(finding: RemFinding) -> tuple[str, str]:
    a, b = finding.data["canonical"], finding.data["other"]
    return (a, b) if a < b else (b, a)


def _group(lesson: Lesson) -> str:
    """What a capped selection spreads over: the lesson's first tag."""
    return min(lesson.tags, default="")


def score_pairs(lessons: list[Lesson], settings: dict, backend: SimilarityBackend,
                cache: CycleCache | None = None, search: "KeptSearch | None" = None
                ) -> dict[tuple[str, str], Score]:
    """Every candidate pair (ids in order) with its score; see the module docstring. `search`:
    see `run`."""
    merge_at = float(settings["merge_threshold"])
    trigger_weight = float(settings.get("trigger_weight", 0.1))
    trigger_support = float(settings.get("trigger_support", 0.05))
    factor = float(settings.get("containment_factor", 0.9))
    # The lowest action similarity that the same trigger can still lift to the review threshold.
    review_at = float(settings["review_threshold"])
    floor = (review_at - trigger_support) / (1.0 - trigger_support) if trigger_support < 1 else 0.0
    actions = {lesson.id: lesson.action or "" for lesson in lessons}
    triggers = {lesson.id: lesson.trigger or "" for lesson in lessons}
    with stage(cache, 0.0, 0.45):  # reading the words is most of the work
        action_vecs = backend.vectors(actions)
    with stage(cache, 0.45, 0.8):
        trigger_vecs = backend.vectors(triggers)
    copy_of = copies(lessons, cache)
    first: dict[tuple[str, ...], str] = {}
    for lesson_id in sorted(copy_of):
        first.setdefault(copy_of[lesson_id], lesson_id)
    with stage(cache, 0.8, 1.0):
        if search is not None and type(backend) is LexicalBackend:
            found = search.pairs(actions, floor, backend, CONTAINMENT)
            contained = search.contained
        else:
            found = backend.pairs(actions, floor)
            contained = _containing(actions, action_vecs, backend)
    candidates = {(a, b) if a < b else (b, a): s for a, b, s in found if _asked(a, b, copy_of, first)}
    for a, b in contained:
        if _asked(a, b, copy_of, first):
            candidates.setdefault((a, b) if a < b else (b, a), dot(action_vecs[a], action_vecs[b]))
    for lesson_id, key in copy_of.items():  # each copy with its group's first
        if lesson_id != first[key]:
            pair = tuple(sorted((lesson_id, first[key])))
            candidates.setdefault(pair, 1.0)
    scores = {}
    for (a, b), cosine in candidates.items():
        is_copy = a in copy_of and copy_of[a] == copy_of.get(b)
        action = max(cosine, factor * _containment(action_vecs[a], action_vecs[b]))
        trigger = dot(trigger_vecs[a], trigger_vecs[b])
        value = action + trigger_support * trigger * (1.0 - action) - trigger_weight * (1.0 - trigger) * action
        if is_copy:
            value = max(value, merge_at)
        scores[(a, b)] = Score(min(value, 1.0), min(action, 1.0), min(trigger, 1.0), is_copy)
    return scores


def _asked(a: str, b: str, copy_of: dict, first: dict) -> bool:
    """A rule copied into several places is asked about once: each copy is paired with the first of
    its group (by id), and only that first copy is compared with the other lessons."""
    a_first = a not in copy_of or first[copy_of[a]] == a
    b_first = b not in copy_of or first[copy_of[b]] == b
    if a in copy_of and copy_of[a] == copy_of.get(b):
        return a_first or b_first
    return a_first and b_first


def _containing(actions: dict[str, str], vecs: dict[str, dict[str, float]],
                backend: SimilarityBackend) -> list[tuple[str, str]]:
    """Pairs whose longer action holds every term of the shorter and adds little (see
    `_containment`), whatever their cosine: each action of CONTAINED_MIN_TERMS or more terms is
    looked up through its rarest term, and only when that term is distinctive (in at most
    DISTINCTIVE_DF actions), so the search stays linear (`mgcp.operations.sparse.contained`)."""
    from mgcp.operations import sparse

    ids = list(actions)
    lexical = getattr(backend, "lexical", backend)  # the semantic backend keeps its words there
    if isinstance(lexical, LexicalBackend):
        matrix = lexical.matrix(actions)
    else:
        matrix = sparse.Matrix.of([vecs[i] for i in ids])
    small, large = sparse.contained(matrix, *CONTAINMENT)
    return [(ids[i], ids[j]) for i, j in zip(small.tolist(), large.tolist())]


def _containment(a: dict[str, float], b: dict[str, float]) -> float:
    """The share of the shorter action's weight that the longer holds, when the longer adds little."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < CONTAINED_MIN_TERMS or len(large) > CONTAINED_MAX_GROWTH * len(small):
        return 0.0
    total = sum(small.values())
    return sum(w for f, w in small.items() if f in large) / total if total else 0.0


def _shared_tags(a: Lesson, b: Lesson) -> float:
    tags_a, tags_b = set(a.tags), set(b.tags)
    return len(tags_a & tags_b) / len(tags_a | tags_b) if tags_a | tags_b else 0.0


def canonical_order(a: Lesson, b: Lesson) -> tuple[Lesson, Lesson]:
    """(keep, other): more usage, then more versions, then older, then the smaller id."""
    def key(lesson: Lesson):
        created = parse_time(lesson.created_at)
        return (-lesson.usage_count, -lesson.version, created.timestamp() if created else float("inf"),
                lesson.id)
    first, second = sorted([a, b], key=key)
    return first, second


def _reason(keep: Lesson, other: Lesson) -> str:
    if keep.usage_count != other.usage_count:
        return f"retrieved {keep.usage_count} times vs {other.usage_count}"
    if keep.version != other.version:
        return f"v{keep.version} vs v{other.version}"
    if keep.created_at != other.created_at:
        return "older"
    return "first by id"


# A number, unless it is inside a word with letters on both sides ("Argon2id", "k8s": a name the
# words compare).
_NUMBER = re.compile(r"(?<![A-Za-z\d])\d+(?:[.,]\d+)*|(?<![\d.,])\d+(?:[.,]\d+)*(?![A-Za-z\d])")
# What may mark a list's item: "(1)" or "2)" after a space, "3." or "3)" opening a line.
_MARKER = re.compile(r"(?m)^\s*(\d{1,2})[.)](?=\s)|(?:(?<=\s)|^)\(?(\d{1,2})\)(?=\s|$)")


def numbers(action: str | None) -> list[str]:
    """The values an action gives, in order ("20", "3.11"): similarity reads words and leaves them
    out, so two actions may be alike in every word and differ in a value. (A trigger's numbers, a
    file or a ticket, say where a rule was written, not what it says.) The markers of a numbered
    list ("(1) ... (2) ...": every marker, counting from 1) number its items rather than say a
    value, and are left out; a lone "(30)" is a value."""
    action = action or ""
    markers = list(_MARKER.finditer(action))
    if len(markers) >= 2 and [int(m.group(1) or m.group(2)) for m in markers] == list(range(1, len(markers) + 1)):
        action = _MARKER.sub(" ", action)
    return _NUMBER.findall(action)


def numbers_apart(action: str | None, other: str | None) -> bool:
    """Whether two actions give different numbers (the same ones in any order are not apart)."""
    return sorted(numbers(action)) != sorted(numbers(other))


# Function words that similarity leaves out as it does every stop word, but whose opposite turns a
# rule around: "Run the migrations before you deploy" / "after you deploy" score 1.0 alike.
OPPOSITE_WORDS = {"before": "after", "with": "without", "above": "below", "over": "under", "on": "off",
                  "up": "down", "more": "less", "into": "out"}
_OPPOSITE = {**OPPOSITE_WORDS, **{b: a for a, b in OPPOSITE_WORDS.items()}}


def words_apart(action: str | None, other: str | None) -> bool:
    """Whether one action holds a word of OPPOSITE_WORDS that the other does not, and the other its
    opposite that the first does not ("before" / "after")."""
    a, b = set(tokenize(action)) & _OPPOSITE.keys(), set(tokenize(other)) & _OPPOSITE.keys()
    return any(_OPPOSITE[word] in b - a for word in a - b)


def _finding(a: Lesson, b: Lesson, score: Score, merge_at: float, claims: bool = False) -> RemFinding:
    """The finding of a pair; `claims`: whether its actions' claims are read to tell whether one
    denies the other (`opposite`), else only their word order is. A pair whose numbers differ
    ("max_connections 20" / "200") is not a copy and is not recommended for a merge: a merge would
    keep one value and hide the other."""
    keep, other = canonical_order(a, b)
    similarity = score.value
    kind = "duplicate_merge" if similarity >= merge_at else "duplicate_review"
    values = (numbers(keep.action), numbers(other.action))
    apart = numbers_apart(keep.action, other.action)
    copy = score.copy and not apart and not words_apart(keep.action, other.action)
    reordered = not copy and swapped(keep.action, other.action)
    opposite = not copy and (reordered or words_apart(keep.action, other.action)
                             or labelled_apart(keep.action, other.action)
                             or (claims and opposed(keep.action or "", other.action or "", OPPOSED_AT)))
    subject = subject_of(keep, other)
    why = (f"alike in every word, not in their numbers ({', '.join(values[0]) or 'none'} / "
           f"{', '.join(values[1]) or 'none'})" if apart else
           "the same action, word for word once normalised" if copy else
           f"actions {score.action:.2f} alike, triggers {score.trigger:.2f} alike")
    lines = [
        f"Found potential duplicate lessons (similarity: {similarity:.2f}: {why}):",
        "",
        f'1. "{keep.id}" - {shorten(keep.trigger, 100)}',
        f"   Action: {shorten(keep.action, 160)}",
        f"   (retrieved {keep.usage_count} times, v{keep.version})",
        f'2. "{other.id}" - {shorten(other.trigger, 100)}',
        f"   Action: {shorten(other.action, 160)}",
        f"   (retrieved {other.usage_count} times, v{other.version})",
        "",
        f'A merge keeps "{keep.id}" ({_reason(keep, other)}) and supersedes "{other.id}".',
    ]
    if reordered:
        lines += ["", "Their actions put words on opposite sides of the same order word, and may say opposite "
                      'things ("A before B" / "B before A"): read both before merging.']
    elif opposite:
        lines += ["", "One action says to do what the other says not to (\"Do X\" / \"Never do X\"): they may "
                      "say opposite things, which a merge would hide. Read both before merging."]
    if apart:
        lines += ["", "They give different numbers: a merge would keep one value and hide the other. Read both "
                      "before merging."]
    options = [
        FindingOption(label="Merge into one lesson",
                      description=f'Keep "{keep.id}" and mark "{other.id}" superseded by it',
                      action="merge"),
        FindingOption(label="Keep both - they're different enough",
                      description="Remember this answer; not raised again unless one of them changes",
                      action="keep_both"),
        FindingOption(label="Delete one (specify which)",
                      description="Soft-delete one of the two; history is kept",
                      action="delete_one",
                      needs_input=f'Which lesson should be deleted: "{keep.id}" or "{other.id}"?'),
        FindingOption(label="Skip for now", description="Leave this finding pending", action="skip"),
    ]
    said = shorten(keep.action, 70)
    title = (f'Two lessons alike in words may say opposite things ({similarity:.2f}): "{said}"' if opposite else
             f'Two lessons alike in words give different numbers ({similarity:.2f}): "{said}"' if apart else
             f'Two lessons say the same ({similarity:.2f}): "{said}"' if kind == "duplicate_merge" else
             f'Two lessons say nearly the same ({similarity:.2f}): "{said}"')
    return RemFinding(
        operation=OPERATION, kind=kind, title=title, description="\n".join(lines), options=options,
        recommended=1 if kind == "duplicate_merge" and not opposite and not apart else 2,
        data={
            "similarity": round(similarity, 4), "action_similarity": round(score.action, 4),
            "trigger_similarity": round(score.trigger, 4), "copy": copy, "reordered": reordered,
            "opposite": opposite, **({"numbers": [values[0], values[1]]} if apart else {}),
            "canonical": keep.id, "other": other.id,
            "lessons": {lesson.id: {"trigger": lesson.trigger, "action": lesson.action,
                                    "usage_count": lesson.usage_count, "version": lesson.version}
                        for lesson in (keep, other)},
        },
        subject=subject,
        fingerprint=fingerprint(OPERATION, kind, subject_identity(subject)),
    )
