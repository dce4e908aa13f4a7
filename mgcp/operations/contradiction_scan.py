"""contradiction_scan: pairs of active lessons on the same situation whose actions say opposite things.

Each action is read as claims: (polarity, what it is about). The action is folded as similarity
reads it (`mgcp.text.terms`: "n't" and "never" as "not", "do not" as "not", "refrain from" and
"stay away from" as "avoid", "utilize" as "use", "favor" as "prefer"), with these readings first:

- a parenthesis or bracket is an aside (examples, lists, flags) and claims nothing, unless it is a
  single item opening with a negation: "use X (not Y)" reads as "use X, not Y";
- a code name is one word: dotted, snake_case, or with a capital inside ("setAll", "user.UserID",
  "chat_id", "NoSQL"), and a kebab-case name opening with "no"/"not" ("no-multi-assign"), so a
  "no" or a common word inside a name is not the sentence's;
- sentences end at ".", "!" or "?" (not after "e.g.", "i.e.", "etc.", "vs.") and at line breaks; a
  question, a lead-in ending with ":" whose list is not there, and a command's or flag's usage line
  ("/commit --no-verify - ...") claim nothing, and a label before a colon (its longer words
  capitalised) is dropped.

Sentences split into clauses at punctuation and at "but"; a clause ends where a subordinate part
starts ("if", "unless", "when", "where", "since", "because", "while", "until", "which", "who",
"what", "how", "why", "that" after a noun), so "use X when not Y" claims X; a clause opening with
one claims nothing and passes nothing on, and so does one whose force word comes after it ("names
that only generated code imports may contain X": the subordinate part sits inside the subject). A
purpose or a second rule joined on ("do A to avoid B", "favor A and avoid B") is a claim of its own.
In a clause:

- "A over B", "A instead of B", "A rather than B", "prefer A to B": A is claimed (+), B refused (-),
  each with the other as its alternative; a clause opening with "instead of" / "rather than" refuses
  what follows; "replace A with B" refuses A and claims B. Two sides about the same words ("Svelte 5
  instead of Svelte 4": numbers are not read) claim nothing.
- otherwise the clause is one claim, negative when it holds an odd number of negators ("not", "no",
  "avoid", "disable", "forbid", "prohibit", "disallow", "deprecated", "discouraged", "obsolete",
  "skip", "omit", "remove", "delete", "eliminate", "minimize", and "ignore", "forget", "neglect"
  before "to": "never disable X" and "don't forget to X" claim X, "don't ignore leaks" does not
  claim leaks), else positive. A clause of negators and force words alone ("Don't:") passes them on
  to the next clause.

A claim is read but not compared when it is a restriction or an exception ("only", "other",
"except", "besides", "solely", "without", "than": "use X only for Y", "never import anything other
than Z", "don't run X more than once" each agree with refusing X elsewhere), a description (a
statement with "is"/"are", or opening with a pronoun or a verb's third person: "This protects X",
"Runs checks", "Exposes keys"; with no force word or modal), a list's next item ("..., and
interfaces"), or a negation whose object is elsewhere ("never for internal navigation").

What a claim is about is its stemmed words, in order, without function words, generic coding verbs
("use", "make sure") and the polarity words themselves, so "always use X", "use X", "enable X" and
"X is required" are all about X.

Two lessons contradict when their triggers are alike (TF-IDF cosine >= `trigger_threshold`: the
same situation) and one claims what the other refuses: two compared claims of opposite polarity

- whose words overlap by Jaccard >= `claim_threshold`,
- about the same thing: the same words, or the one's words whole and in order inside the other's (a
  rule and its narrower exception: "use server-side cursors for large exports" / "don't ... for
  large exports behind PgBouncer"); "include the environment in resource names" / "never include the
  resource type in resource names" each name something the other does not, and are not opposed,
- not a judgement against one that does not insist: a claim about something judged ("unnecessary",
  "wrong", "excessive", "proper", ...) opposes only a claim for every case ("all", "every", "each",
  "always", "never"): "avoid unnecessary braces" / "use braces" agree, "use braces for all
  conditionals" does not,
- not a ranking: two preferences oppose only when their alternatives are alike ("prefer A to B" /
  "prefer C to A" rank three things), and a claim naming the other's alternative agrees with it
  ("use X instead of Y" / "use X for Y"),
- not an order said both ways round: "A before B" / "don't B before A" agree.

Only claims holding at least MIN_SHARE of their action's words are compared: a word in a list or
an aside ("..., static content, types") is not what a long rule says. Candidate claim pairs are
found by prefix filtering on the words, rarest first (exact for the Jaccard threshold), so the scan
is near-linear in the lessons. Agreeing paraphrases ("never X" / "don't X"; "prefer X over Y" / "use
X instead of Y") carry the same polarities and are not raised.

Findings `contradiction` (at most `max_findings`, strongest first: claim overlap, then trigger
similarity), subject the two lessons. Options: keep the newer (archive the older; recommended),
keep the older (archive the newer), refine one (input: which lesson and its new action), keep both
(remembered), skip. When agents reported how the two worked (`outcomes`), the description says so,
and the one that failed more often than it helped is the one to archive if the other did not:
experience outweighs age. `--auto` never applies them: which rule is right is a person's call.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from mgcp import text
from mgcp.models import FindingOption, Lesson, RemFinding
from mgcp.operations import cap, fingerprint, parse_time, subject_identity, subject_of
from mgcp.operations.shared import WORDS, CycleCache
from mgcp.operations.similarity import dot, matrix_of

OPERATION = "contradiction_scan"
NEGATORS = frozenset({"not", "no", "avoid", "disable", "forbid", "prohibit", "disallow", "deprecated",
                      "discouraged", "obsolete", "skip", "omit", "remove", "delete", "eliminate", "minimize",
                      "minimise"})
# Negators only before an action ("forget to X" refuses X); "don't ignore leaks" does not claim leaks.
INATTENTION = frozenset({"ignore", "forget", "neglect"})
# A clause opening with one of these states no rule; met later, the rest of the clause is a
# condition or a description of what came before ("use X when not Y", "names that are not Z").
SUBORDINATORS = frozenset({"if", "unless", "when", "whether", "where", "since", "because", "while", "until",
                           "although", "though", "whereas", "which", "who", "what", "how", "why"})
# A claim about something judged ("avoid unnecessary X", "don't use the wrong X", "use proper X")
# opposes only a claim that insists on every case ("use X for all Y").
JUDGED = frozenset("""
unnecessary unnecessarily unneeded needless excessive excessively redundant superfluous wrong bad
improper improperly incorrect incorrectly inappropriate ambiguous heavy overly too proper properly
appropriate appropriately
""".split())
INSISTING = re.compile(r"\b(?:all|every|each|always|never)\b", re.IGNORECASE)
# A positive clause with one of these is a restriction ("use X only for Y") and a negative one an
# exception ("never import anything other than Z", "don't X more than once"): each agrees with
# refusing X elsewhere, or with doing it within the limit.
RESTRICTING = frozenset({"only", "other", "except", "besides", "solely", "without", "than"})
MODALS = frozenset({"must", "need", "needs", "have", "has", "do"})
COPULAS = frozenset({"is", "are", "was", "were"})
CONNECTORS = (("instead", "of"), ("rather", "than"), ("over",))
# Words that carry a claim's force, not its subject.
FORCE_WORDS = frozenset("""
always ensure prefer preferred enable enabled allow allowed required require requires mandatory
should can will may recommended recommend okay ok fine acceptable necessary important
""".split()) | NEGATORS
_CONTENT_STOP = text.STOP_WORDS | text.CODING_STOP_WORDS | FORCE_WORDS
MIN_SHARE = 1 / 3  # a claim compared holds at least this share of its action's words
_WORDS = re.compile(r"[A-Za-z][\w'’-]*")
_SENTENCE = re.compile(r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)\s+|\n+")
_COMMAND = re.compile(r"[/-]{1,2}[A-Za-z]")  # a command's or a flag's usage line: "/commit --no-verify - ..."
_CLAUSE = re.compile(r"[.;:!?()\[\]{}\"\n\r\t,]+|\s[-–—]+\s|\bbut\b", re.IGNORECASE)
_CLAUSE_KEPT = re.compile(f"({_CLAUSE.pattern})", re.IGNORECASE)  # the same, the separators kept
# A code name: dotted, snake_case, or with a capital inside (camelCase, PascalCase, "NoSQL").
_NAME = re.compile(r"\w+(?:\.\w+)*")
_INNER_CAPITAL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_NEGATED_NAME = re.compile(r"\bno[nt]?-[\w-]+", re.IGNORECASE)  # "no-multi-assign": a lint rule's name
# What every name `_names` joins holds (a dot inside a word, "_", an inner capital, "no-"), and more.
_MAYBE_NAME = re.compile(r"\w\.\w|_|[a-z0-9][A-Z]|[A-Z]{2}[a-z]|\b[Nn][Oo][NnTt]?-")
_ASIDE = re.compile(r"\(([^()]*)\)|\[([^\[\]]*)\]")
_BARE = NEGATORS | frozenset({"do", "does", "you", "we", "must", "should", "always", "use"})
_REFERRING = frozenset({"this", "that", "these", "those", "it", "they"})  # "This protects X from Y"
_PROSE_S = ("ss", "us", "is")  # words ending so are not a verb's third person ("access", "focus")
_COMPLEMENT = FORCE_WORDS | frozenset({"check", "note", "remember", "assume", "sure", "say", "know", "confirm"})
_ORDER = ("before", "after")
# A negation followed at once by one of these has its object elsewhere ("<a> never for navigation").
_PREPOSITIONS = frozenset({"for", "in", "on", "with", "at", "by", "from", "as", "inside", "within", "into",
                           "during", "outside"})
_FORCE = (FORCE_WORDS | MODALS) - {"not", "no"}  # what makes a statement a rule ("is not X" is not one)


@dataclass(frozen=True)
class Claim:
    positive: bool
    about: frozenset[str]
    words: str  # the clause as read, for the finding
    phrase: tuple[str, ...] = ()  # what it is about, in the clause's order
    compared: bool = True  # False: read (its words count in the action's) but claims nothing to oppose
    judged: bool = False  # about something judged ("unnecessary X", "the wrong X", "proper X")
    versus: frozenset[str] = frozenset()  # the other side of a preference ("A over B": B for A, A for B)
    insists: bool = False  # on every case ("all", "every", "each", "always", "never")
    order: tuple[frozenset[str], frozenset[str]] | None = None  # "A before B" / "B after A": (A, B)


def claims(action: str | None) -> list[Claim]:
    """The claims of an action (see the module docstring)."""
    out: list[Claim] = []
    for sentence in _SENTENCE.split(_ASIDE.sub(_aside, action or "")):
        sentence = sentence.strip()
        if sentence.rstrip("\"'”’ ").endswith(("?", ":")) or _COMMAND.match(sentence):
            continue  # a question, a list's lead-in without its list, a command's usage line
        head, colon, rest = sentence.partition(":")
        if colon and rest.strip() and _is_label(head):
            sentence = rest  # "Table Creation in Loops: don't ..."
        carried = 0  # the negations of a clause with nothing else: "Don't: store tokens in localStorage"
        pieces = _CLAUSE_KEPT.split(_names(sentence))
        clauses, after_comma = pieces[::2], [False] + [sep.strip() == "," for sep in pieces[1::2]]
        read = [_parts(_main(text.terms(clause))) for clause in clauses]
        items = _list_items(read, after_comma)
        for k, (clause, parts) in enumerate(zip(clauses, read)):
            shown = " ".join(clause.split())
            for words in parts:
                carried = _read(words, shown, carried, out, item=k in items)
    return out


def _list_items(read: list[list[list[str]]], after_comma: list[bool]) -> set[int]:
    """The clauses of a sentence that are items of a list a negation covers: "never X in A, B, or C"
    reads B as C is read (a list's next item), not as a rule of its own that claims B. Those are the
    clauses after a comma, with no force word of their own, before the last clause that opens with
    "and" or "or" after a comma and has none either, when the clause the list hangs off holds a
    negation ("pin X, run Y, and review Z" is three rules, each compared)."""
    def plain(k: int) -> bool:
        return len(read[k]) == 1 and bool(read[k][0]) and not (_FORCE | NEGATORS) & set(read[k][0])

    last = next((k for k in range(len(read) - 1, 0, -1)
                 if after_comma[k] and plain(k) and read[k][0][0] in ("and", "or")), None)
    if last is None:
        return set()
    items = set()
    for k in range(last - 1, 0, -1):  # the items just before the closing one
        if not (after_comma[k] and plain(k)):
            break
        items.add(k)
    head = min(items, default=last) - 1
    return items if any(NEGATORS & set(words) for words in read[head]) else set()


def _read(words: list[str], shown: str, carried: int, out: list[Claim], item: bool = False) -> int:
    """Append the claims of one clause's words to `out`; the negations it passes on. `item`: the
    clause is an item of a list (`_list_items`): read, not compared."""
    split = _connector(words)
    if split is not None:
        (start, end), flip = split
        after = words[end:]
        # "A over B for new code": the scope after the alternative belongs to the whole preference
        scope = next((k for k, w in enumerate(after) if k and w in SCOPE_WORDS), len(after))
        sides = ((not flip, _phrase(words[:start])), (flip, _phrase(after[:scope])))
        if set(sides[0][1]) == set(sides[1][1]):
            return 0  # "Svelte 5 instead of Svelte 4": what tells them apart is not read
        for (positive, phrase), (_, other) in zip(sides, sides[::-1]):
            if phrase:
                out.append(Claim(positive, frozenset(phrase), shown, phrase, versus=frozenset(other)))
        return 0
    if not words:
        return 0  # a condition: "If no tests changed, ..." states no rule, and its negation is not the rule's
    words = ["avoid" if w in INATTENTION and words[i + 1:i + 2] == ["to"] else w for i, w in enumerate(words)]
    negations = carried + sum(1 for w in words if w in NEGATORS)
    phrase = _phrase(words)
    if not phrase:
        return negations if set(words) <= _BARE else 0  # "Don't:" passes its negation on; "avoid any," does not
    positive = negations % 2 == 0
    said = set(words)
    # a restriction, a description, a list's next item: read, not compared
    compared = not (item or RESTRICTING & said or _describes(words)
                    or (words[0] in ("and", "or") and not FORCE_WORDS & said) or _objectless(words))
    order = None
    for i, w in enumerate(words):
        if w in _ORDER:
            first, then = _about(words[:i]), _about(words[i + 1:])
            order = (first, then) if w == "before" else (then, first)
            break
    out.append(Claim(positive, frozenset(phrase), shown, phrase, compared, judged=bool(JUDGED & said),
                     insists=_insists(shown), order=order))
    return 0


def _insists(shown: str) -> bool:
    """Whether a clause insists on every case (`INSISTING`); the pattern is tried only on a clause
    holding one of its words' letters in a row (casefolded, as the pattern ignores case: "ſ" is "s")."""
    lower = shown.casefold()
    return any(word in lower for word in _INSISTING_WORDS) and INSISTING.search(shown) is not None


_INSISTING_WORDS = ("all", "every", "each", "always", "never")


def _objectless(words: list[str]) -> bool:
    """Whether the clause's negation has lost its object: "never for internal navigation"."""
    at = next((i for i, w in enumerate(words) if w in NEGATORS), None)
    return at is not None and words[at + 1:at + 2] != [] and words[at + 1] in _PREPOSITIONS


def _describes(words: list[str]) -> bool:
    """Whether a clause tells how things are rather than what to do: a statement ("X is Y", "is not
    Y") or a verb's third person opening it ("Runs checks", "Exposes keys"), with no force word."""
    if _FORCE & set(words):
        return False
    first = words[0]
    return (bool(COPULAS & set(words)) or first in _REFERRING
            or (first.endswith("s") and not first.endswith(_PROSE_S)))


def _names(sentence: str) -> str:
    """Code names written as one word ("setAll", "user.UserID", "chat_id", "NoSQL", "no-multi-assign"):
    a name is one thing, and a "no" or a common word inside it is not the sentence's."""
    if not _MAYBE_NAME.search(sentence):
        return sentence  # no word in it is a name of either kind

    def one(match: re.Match) -> str:
        name = match.group()
        if "." in name or "_" in name or _INNER_CAPITAL.search(name) or "-" in name:
            return re.sub(r"[^0-9a-z]", "", name.lower())
        return name
    return _NAME.sub(one, _NEGATED_NAME.sub(one, sentence))


def _aside(match: re.Match) -> str:
    """A parenthesis claims nothing (examples, lists, flags), unless it opens with a negation:
    "use X (not Y)" reads as "use X, not Y"."""
    inner = match.group(1) if match.group(1) is not None else match.group(2)
    return f", {inner}," if text.terms(inner)[:1] and text.terms(inner)[0] in NEGATORS and "," not in inner else " "


def _main(words: list[str]) -> list[str]:
    """The clause up to a subordinate part: "use X when not Y" claims X; a clause opening with a
    condition ("if", "when", ...) claims nothing, and so does one whose force comes after the
    subordinate part ("names that are imported by generated code may contain X")."""
    for i, w in enumerate(words):
        if w in SUBORDINATORS or (w == "that" and i and words[i - 1] not in _COMPLEMENT):
            return [] if _FORCE & set(words[i:]) else words[:i]
    return words


def _parts(words: list[str]) -> list[list[str]]:
    """A clause's claims: a purpose or a second rule joined on ("do A to avoid B", "favor A and avoid
    B", "use A and never B") is a claim of its own."""
    for i in range(1, len(words) - 1):
        if words[i] in ("to", "and", "or") and words[i + 1] in NEGATORS:
            return [words[:i], *_parts(words[i + 1:])]
    return [words]


def _is_label(head: str) -> bool:
    """A heading before a colon ("Table Creation in Loops", "JSON"): its longer words all capitalised,
    and about something (a bare "Don't:" is a negation, passed on)."""
    long = [w for w in _WORDS.findall(head) if len(w) > 3]
    return bool(long) and all(w[0].isupper() for w in long) and bool(_about(text.terms(head)))


SCOPE_WORDS = frozenset({"for", "in", "on", "when", "where", "if", "unless", "within", "across", "during",
                         "because", "since", "while"})


_CONNECTING = frozenset({conn[0] for conn in CONNECTORS} | {"to"})


def _connector(words: list[str]) -> tuple[tuple[int, int], bool] | None:
    """Where a preference splits the clause: ((start, end) of the connector, whether the part before
    it is the one refused), or None."""
    if words[:1] == ["replace"] and "with" in words:  # "replace A with B": A refused, B claimed
        at = words.index("with")
        return (at, at + 1), True
    if _CONNECTING.isdisjoint(words):
        return None  # most clauses: no word a connector opens with, nor "prefer ... to"
    for i in range(len(words)):
        for conn in CONNECTORS:
            if tuple(words[i:i + len(conn)]) == conn:
                return (i, i + len(conn)), False
        # "prefer A to B" (not "prefer to do A")
        if words[i] == "to" and "prefer" in words[:i] and words.index("prefer") < i - 1:
            return (i, i + 1), False
    return None


def _about(words: list[str]) -> frozenset[str]:
    return frozenset(_phrase(words))


def _phrase(words: list[str]) -> tuple[str, ...]:
    """What words are about: their stems without function, force and generic coding words, in order."""
    stems = text.stems([w for w in words if w not in _CONTENT_STOP and w != "replace"], _CONTENT_STOP)
    return tuple(dict.fromkeys(stems))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def run(lessons: list[Lesson], settings: dict, cache: CycleCache | None = None,
        settled: frozenset[str] = frozenset(), kept=None,
        outcomes: dict[str, tuple[int, int]] | None = None) -> list[RemFinding]:
    """The findings, capped (`settled`: see `mgcp.operations.cap`). With `kept`, the claim search
    starts from what it kept in an earlier cycle and leaves what to keep for the next one.
    `outcomes`: (helped, failed) reported of each lesson that has any."""
    trigger_at = float(settings["trigger_threshold"])
    claim_at = float(settings["claim_threshold"])
    by_id = {lesson.id: lesson for lesson in sorted(lessons, key=attrgetter("id"))}
    found = contradicting_pairs(list(by_id.values()), trigger_at, claim_at, cache, kept)
    findings = [_finding(by_id[a], by_id[b], overlap, trigger, ca, cb, outcomes or {})
                for (a, b), (overlap, trigger, ca, cb) in found]
    return cap(findings, int(settings.get("max_findings", 50)), lambda f: f.data["group"], settled)


def contradicting_pairs(lessons: list[Lesson], trigger_at: float, claim_at: float,
                        cache: CycleCache | None = None, kept=None):
    """[((id a, id b), (claim overlap, trigger similarity, claim of a, claim of b))], strongest first;
    `lessons` sorted by id, each id once (the order duplicate detection vectorises them in, so a
    cycle shares it).

    Claims are compared between the distinct actions (`claim_search.search`, or `kept.search` from what an
    earlier cycle kept: the same claim pairs); two lessons contradict when their actions hold a
    contradicting claim pair (a lesson's action against itself too, when two lessons share it) and
    their triggers are alike, scored on the trigger vectors of all the lessons. Of the claim pairs
    of one lesson pair, the strongest (claim overlap, rounded) wins, and of those equally strong
    the earliest claims in their actions."""
    import numpy as np

    from mgcp.operations.claim_search import search
    from mgcp.operations.sparse import starts

    texts = list(map(attrgetter("action"), lessons))
    if None in texts:
        texts = [action or "" for action in texts]
    ids = list(map(attrgetter("id"), lessons))
    actions = list(dict.fromkeys(texts))
    number = dict(zip(actions, range(len(actions))))
    # each action's lessons (their places in `lessons`, ascending), found for the few pairs only
    action_of = np.fromiter(map(number.__getitem__, texts), dtype=np.int64, count=len(texts))
    by_action = np.argsort(action_of, kind="stable")
    bounds = starts(np.bincount(action_of, minlength=len(actions)))
    scan = sys.modules[__name__]  # the search reads actions by this module's rules
    if kept is not None:
        # the actions' digests, from the corpus of every action when the cycle built one (duplicate
        # detection reads the same actions in the same order): the digest of each one's first lesson
        corpus = cache.reader.built_corpus(texts) if cache is not None and cache.reader is not None else None
        digests = None
        if corpus is not None:
            digests = np.frombuffer(corpus.joined, dtype="S16")[by_action[bounds[:-1]]].tobytes()
        claims_of, pairs = kept.search(actions, claim_at, scan, digests)
    else:
        claims_of, pairs = search(actions, claim_at, scan)
    strongest: dict[tuple[str, str], tuple] = {}
    place: dict[str, int] = {}  # the lessons of the pairs, by id
    for u, k, v, l, overlap in pairs:
        score = -round(overlap, 4)
        for p in by_action[bounds[u]:bounds[u + 1]].tolist():
            for q in by_action[bounds[v]:bounds[v + 1]].tolist():
                x, y = ids[p], ids[q]
                if x == y:
                    continue
                place[x], place[y] = p, q
                key, entry = ((x, y), (score, k, l, u, v)) if x < y else ((y, x), (score, l, k, v, u))
                if key not in strongest or entry < strongest[key]:
                    strongest[key] = entry
    if not strongest:
        return []
    # the trigger vectors of all the lessons (their IDF is all the triggers'), rows in `lessons`
    # order: the matrix `LexicalBackend.matrix` makes of them, without a dict of 100k ids for it
    triggers = list(map(attrgetter("trigger"), lessons))
    if None in triggers:
        triggers = [trigger or "" for trigger in triggers]
    vectors = matrix_of(cache, triggers)
    out = []
    for (a, b), (score, k, l, u, v) in strongest.items():
        trigger = dot(vectors.vector(place[a]), vectors.vector(place[b]))
        if trigger >= trigger_at - 1e-9:
            out.append(((a, b), (-score, round(min(trigger, 1.0), 4), claims_of(u)[k], claims_of(v)[l])))
    return sorted(out, key=lambda item: (-item[1][0], -item[1][1], item[0]))


# Words that can make a claim refused: a negator, or a preference's connector ("A over B", "A
# instead of B", "A rather than B", "prefer A to B", "replace A with B").
REFUSING = NEGATORS | INATTENTION | frozenset({"over", "instead", "rather", "prefer", "replace"})
_FOLDED = text.ANY_FOLDED_WORD  # the words of folded text, as `text.terms` splits them
_ASCII_WORD = re.compile(r"[a-z0-9]+")  # the same in lowercase ASCII, faster
_SYNONYMOUS = frozenset(text.SYNONYMS)
_PHRASE_FIRST = frozenset(key[0] for key in text.PHRASES)
# What `text.fold` or `_names` could change (with "cannot" and "no-", "non-", "not-" in lowercase):
# an inner capital, an apostrophe, a dotted or snake_case name.
_SPECIAL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]|['’_]|\w\.\w")


def _special(action: str) -> bool:
    """Whether `_SPECIAL` finds something in an ASCII action: without a capital after its first
    letter, only a dot inside a word can be one, and those are few (a regex over the whole text
    costs most of what screening it does)."""
    if "_" in action or "'" in action:
        return True
    tail = action[1:]
    if tail != tail.lower():
        return _SPECIAL.search(action) is not None
    at = action.find(".", 1)
    while 0 < at < len(action) - 1:
        before, after = action[at - 1], action[at + 1]
        if (before.isalnum() or before == "_") and (after.isalnum() or after == "_"):
            return True
        at = action.find(".", at + 1)
    return False


def _screen(action: str | None) -> set[str]:
    """Every word `claims` could read in the action, and more: its folded words, code names joined
    as `_names` joins them, and what the synonym and phrase tables make of them."""
    action = action or ""
    lower = action.lower()
    if action.isascii() and not (_special(action) or "cannot" in lower or "no-" in lower
                                 or "non-" in lower or "not-" in lower):
        words = set(_ASCII_WORD.findall(lower))  # what folding and joining names leave as it is
    else:
        words = set(_FOLDED.findall(text.fold(action)))
        words.update(_FOLDED.findall(text.fold(_names(action))))
    words.update([text.SYNONYMS[w] for w in words & _SYNONYMOUS])
    if not words.isdisjoint(_PHRASE_FIRST):
        words.update(value for key, value in text.PHRASES.items() if value and words.issuperset(key))
    return words


# The rules an action's claims are read by (this module's and the words' own, see
# `mgcp.operations.shared.WORDS`): what the claim search keeps is kept under them.
READING = hashlib.blake2b(Path(__file__).read_bytes() + WORDS, digest_size=16).digest()


def _compared(action: str | None) -> list[Claim]:
    """The claims of an action that are compared: not an aside of a longer rule (each holds at least
    MIN_SHARE of the action's words), each once."""
    said = dict.fromkeys(claims(action))
    words = len(frozenset().union(*(claim.about for claim in said)))
    return [claim for claim in said if claim.compared and len(claim.about) >= MIN_SHARE * words]


def opposed(action_a: str, action_b: str, claim_at: float) -> bool:
    """Whether two actions say opposite things, whatever their situations: a claim of each, of
    opposite polarity, about the same thing and opposing as the scan reads them ("Prefer httpx over
    requests" / "Prefer requests over httpx", which share every word). The claims compared are those
    the scan compares (`_compared`: not a list's item or an aside of a longer rule)."""
    return any(ca.positive != cb.positive and _contradiction(ca, cb, claim_at) is not None
               for ca in _compared(action_a) for cb in _compared(action_b))


def _contradiction(a: Claim, b: Claim, claim_at: float) -> float | None:
    """The overlap of two claims of opposite polarity that contradict each other (their words at
    least `claim_at` alike, about the same thing, opposing), or None."""
    overlap = jaccard(a.about, b.about)
    if overlap < claim_at - 1e-9 or not (_same_thing(a, b) and _opposes(a, b)):
        return None
    return overlap


def _same_thing(a: Claim, b: Claim) -> bool:
    """Whether two claims are about the same thing: the same words, or the one's phrase whole and in
    order inside the other's ("curly braces" / "unnecessary curly braces in conditionals"; not "table
    tests" / "table fields ... tests", where each names something the other does not)."""
    if a.about == b.about:
        return True
    short, long = sorted((a.phrase, b.phrase), key=len)
    return any(long[i:i + len(short)] == short for i in range(len(long) - len(short) + 1))


def _opposes(a: Claim, b: Claim) -> bool:
    """Whether claims of opposite polarity on the same words oppose (see the module docstring)."""
    if (a.judged and not b.insists) or (b.judged and not a.insists):
        return False  # "avoid unnecessary X" / "use X": both hold; "use X for all Y" does not
    if a.versus and b.versus and not _alike(a.versus, b.versus):
        return False  # "prefer A to B" / "prefer C to A": a ranking, not a reversal
    if _alike(a.versus - a.about, b.about) or _alike(b.versus - b.about, a.about):
        return False  # "X instead of Y" / "X for Y": the other names the alternative too
    if a.order and b.order:  # "A before B" / "not B before A" agree
        (a1, a2), (b1, b2) = a.order, b.order
        return jaccard(a1, b1) + jaccard(a2, b2) >= jaccard(a1, b2) + jaccard(a2, b1)
    return True


def _alike(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two sets of stems share a word (or one stem begins the other: "panic", "panick")."""
    return any(x == y or (min(len(x), len(y)) >= 4 and (x.startswith(y) or y.startswith(x))) for x in a for y in b)


def _created(lesson: Lesson) -> float:
    when = parse_time(lesson.created_at)
    return when.timestamp() if when else 0.0


def _failing(record: tuple[int, int]) -> bool:
    helped, failed = record
    return failed > helped


def _finding(a: Lesson, b: Lesson, overlap: float, trigger: float, ca: Claim, cb: Claim,
             outcomes: dict[str, tuple[int, int]]) -> RemFinding:
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
    records = {lesson.id: outcomes.get(lesson.id, (0, 0)) for lesson in (older, newer)}
    if any(map(any, records.values())):
        reported = "; ".join(f"{lesson_id} helped {h}, failed {f}" for lesson_id, (h, f) in records.items())
        lines[-1:-1] = [f"Agents reported: {reported}.", ""]
    keep_older = _failing(records[newer.id]) and not _failing(records[older.id])
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
        description="\n".join(lines), options=options, recommended=2 if keep_older else 1,
        data={"older": older.id, "newer": newer.id, "claim_overlap": overlap, "trigger_similarity": trigger,
              "claims": {lesson_id: {"positive": c.positive, "about": sorted(c.about), "clause": c.words}
                         for lesson_id, c in claim_of.items()},
              "group": min(older.tags, default=""),
              "lessons": {lesson.id: {"trigger": lesson.trigger, "action": lesson.action,
                                      "created_at": lesson.created_at, "version": lesson.version}
                          for lesson in (older, newer)}},
        subject=subject, fingerprint=fingerprint(OPERATION, "contradiction", subject_identity(subject)))
