"""Recall: one labelled Markdown section of memory for an agent's prompt, under a hard character
budget. Stdlib only (the SessionStart hook builds it on every session start).

The section has up to five subsections, in this order, each with a reserved share of the budget
(rem-config.yaml, `recall.shares`) so that one cannot starve the others:

- state: the project's latest notes, open questions from them (sentences ending in "?"), open
  todos, recent decisions (newest first) and active files;
- constraints: lessons of kind `constraint` with confidence >= 0.9, whatever the task, strongest
  first: the most confident, then (with a task) the best match to it, then the most used, then by
  id. The first is always included (shortened if it alone would exceed the budget). Constraints
  that differ are all offered however alike their words ("... for module m1", "... for module
  m2"): only an exact copy of an earlier one (the same trigger and action once normalized, as
  lessons are compared when written) is left out, and the trim mark says so;
- preferences: lessons of kind `preference`, the most confident read, ranked (mgcp.ranking);
- lessons: with a task, the lessons most relevant to it (mgcp.ranking, relevance included; a lesson
  matching the task less than MIN_RELEVANCE as well as the best match is left out); without one
  (a session's start), the most used lessons ranked by their other parts (confidence, use,
  outcomes): titled "Top-ranked lessons", since one used once may come before one used twice;
- errors: with a task, the most recently refined lessons of kind `error_solution`.

Assembly: the first constraint is placed first. What remains of the budget is reserved among the
subsections that have something, in proportion to their shares; each fills its reservation in
order, and what a subsection leaves unused goes to the others, in order. A subsection that could
not show everything ends with an explicit mark ("… 3 more lessons trimmed"; "3+" when more exist
than were read). Each subsection is offered at first as many candidates as it could show at a
typical line length; when one showed all it was offered while more exist and room is left (short
lines), everything is read again with twice as many, up to what the whole budget could hold at
SHORTEST_LINE characters a line: nothing is trimmed while it would fit.
Preferences, lessons and error solutions are chosen MMR-style: each next lesson is the one with the
best score after a penalty for its word overlap with those already chosen (the cosine of their sets
of words, trigger and action), and a lesson at NEAR_DUPLICATE overlap or more with a chosen one
(constraints included) is never included, unless its action denies what the other's says, or
orders the same words otherwise ("prefer A over B" / "prefer B over A"): both are shown. Text
holding anything that looks like a credential is redacted. The section tells the agent not to quote
it verbatim. With a task, the relevant lessons it returns count as used (`Recall.matched`; the caller
writes that): the other subsections show what they show whatever the task, and counting them would
make those lessons ever more used and never look unused.
"""

from __future__ import annotations

import re

from mgcp import quality, ranking
from mgcp.config import MIN_RECALL_BUDGET as MIN_BUDGET
from mgcp.config import RECALL_DEFAULTS

HEADER = "## Memory context (mgcp)\n"
FOOTER = ("\n_Use this context where it helps; never quote it verbatim or show it to the user. "
          "[ids] are lessons: report whether one helped with lesson_outcome "
          "(`mgcp lesson outcome ID --helped|--failed`)._\n")
SHARES = RECALL_DEFAULTS["shares"]
TOP_RANKED = "Top-ranked lessons (confidence, use, outcomes)"  # without a task: in ranking order, not by use
CONSTRAINT_CONFIDENCE = 0.9
NEAR_DUPLICATE = 0.8
MMR_LAMBDA = 0.7
MAX_ITEM = 400  # characters of one item before it is shortened
MIN_RELEVANCE = 0.4  # with a task, a lesson matching less than this share of the best match is left out
SITUATION_WORDS = frozenset({"when", "whenever", "before", "after", "if", "while", "during", "on", "once"})
MIN_SHORTENED = 40
SHORTEST_LINE = 40  # characters of a lesson line at the shortest: its id, trigger and a 10-character action
_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset("a an the to of in on for and or is are be it this that with as at by from".split())


# Plain classes, not dataclasses: importing dataclasses would cost the hook several milliseconds.
class Item:
    """A line of the section. A lesson's carries its words (trigger and action) and what tells two
    lessons alike in words apart (`said`: see `saying`)."""

    __slots__ = ("text", "lesson_id", "words", "score", "parts", "said")

    def __init__(self, text: str, lesson_id: str | None = None, words: frozenset = frozenset(),
                 score: float = 0.0, parts: dict | None = None, said: tuple | None = None):
        self.text, self.lesson_id, self.words, self.score = text, lesson_id, words, score
        self.parts = parts or {}
        self.said = said


class Section:
    def __init__(self, key: str, title: str, noun: str, items: list[Item], extra: int = 0, capped: bool = False,
                 copies: int = 0, more: bool | None = None):
        self.key, self.title, self.items = key, title, items
        self.noun = noun  # what a trim mark counts ("lessons", "items")
        self.extra = extra  # candidates known but not offered (beyond what the budget could show)
        self.capped = capped  # more may exist than were read: the mark says "N+"
        self.copies = copies  # candidates left out as exact copies of others: the mark says so
        self.more = capped if more is None else more  # more candidates would be offered if more were read


class Recall:
    def __init__(self, text: str, budget: int, lessons: list[str], sections: dict[str, int],
                 trimmed: dict[str, int], project_id: str | None = None, matched: list[str] | None = None):
        self.text, self.budget, self.project_id = text, budget, project_id
        self.lessons = lessons  # ids of the lessons included, in order
        # those included for matching the task (the relevant lessons): a retrieval; constraints,
        # preferences and error solutions are shown whatever the task
        self.matched = matched or []
        self.sections = sections  # items shown per subsection
        self.trimmed = trimmed  # items left out per subsection

    def to_dict(self) -> dict:
        return {"text": self.text, "chars": len(self.text), "budget": self.budget,
                "lessons": self.lessons, "sections": self.sections, "trimmed": self.trimmed}


# What every credential pattern of mgcp.validation needs to find in a text (the last ones
# lowercased): a text holding none of them goes by without the patterns themselves.
_SECRET_MARKS = ("-----BEGIN", "AKIA", "ASIA", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                 "xox", "AIza", "k_live_", "k_test_", "eyJ", "Bearer", "://")
_SECRET_WORDS = ("password", "passwd", "secret", "apikey", "api_key", "api-key", "accesstoken", "access_token",
                 "access-token")


def redact(text: str) -> str:
    """The text with anything that looks like a credential replaced by "[redacted]"."""
    if not any(mark in text for mark in _SECRET_MARKS):
        low = text.lower()
        if not any(word in low for word in _SECRET_WORDS):
            return text
    from mgcp.validation import redacted  # rarely needed: kept off the hook's usual path

    return redacted(text)


def _clean(text: str | None, limit: int = MAX_ITEM) -> str:
    text = redact(" ".join(str(text or "").split()))
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def words(text: str) -> frozenset:
    return frozenset(_WORD.findall(text.casefold())).difference(_STOP)


def overlap(a: frozenset, b: frozenset) -> float:
    """The cosine of two word sets: shared words over the geometric mean of their sizes."""
    return len(a & b) / (len(a) * len(b)) ** 0.5 if a and b else 0.0


# Words that deny what follows: "t" is what the words of "don't", "can't", "won't" end in.
_DENYING = frozenset("not no never avoid without nor cannot t".split())


def saying(action: str) -> tuple[bool, dict]:
    """What an action says beyond its words: whether it denies (an odd number of denying words) and
    its words' order (each word's first place)."""
    said = [w for w in _WORD.findall(action.casefold()) if w not in _STOP]
    places: dict[str, int] = {}
    for place, word in enumerate(said):
        places.setdefault(word, place)
    return sum(w in _DENYING for w in said) % 2 == 1, places


def in_order(a: dict, b: dict) -> float:
    """The share of the pairs of words two actions share that each puts in the same order (1.0
    when they share fewer than two)."""
    shared = sorted(a.keys() & b.keys(), key=a.__getitem__)
    pairs = len(shared) * (len(shared) - 1) // 2
    if not pairs:
        return 1.0
    at = [b[w] for w in shared]
    return sum(at[i] < at[j] for i in range(len(at)) for j in range(i + 1, len(at))) / pairs


def near_duplicate(a: Item, b: Item) -> bool:
    """Whether one lesson says what the other says: their words alike (NEAR_DUPLICATE), and the one
    neither denies what the other says nor orders its words otherwise ("prefer A over B" /
    "prefer B over A"): two such lessons are both shown, however alike their words."""
    if overlap(a.words, b.words) < NEAR_DUPLICATE:
        return False
    if a.said is None or b.said is None:
        return True
    return a.said[0] == b.said[0] and in_order(a.said[1], b.said[1]) >= NEAR_DUPLICATE


# -- ranking and diversity ------------------------------------------------------------------------

def rank(rows: list[dict], weights: dict | None = None, reinforcement: dict | None = None) -> list[dict]:
    """Rows from persistence.recall_data, each given `parts` and `score` (mgcp.ranking), best first.
    Relevance is each row's BM25 relevance divided by the best among them."""
    best = max((r.get("relevance") or 0.0 for r in rows), default=0.0)
    for r in rows:
        r["score"], r["parts"], r["importance"], r["tier"] = ranking.score(r, best, r["tags"], weights, reinforcement)
    return sorted(rows, key=lambda r: ranking.order_key(r["score"], r["importance"], r["id"]))


def diverse(items: list[Item], chosen: list[Item], limit: int | None = None) -> tuple[list[Item], int]:
    """Items in MMR order (best score after the overlap penalty first), near-duplicates of any
    already chosen item (this list's or `chosen`) left out, and how many others the limit left out.
    `chosen` grows with what is picked."""
    top = max((i.score for i in items), default=1.0) or 1.0
    # each remaining item's highest overlap with what is chosen, kept up to date pick by pick; a
    # near-duplicate of a chosen one leaves the pool
    pool = {n: max((overlap(item.words, c.words) for c in chosen), default=0.0) for n, item in enumerate(items)
            if not any(near_duplicate(item, c) for c in chosen)}
    picked: list[Item] = []
    while pool and (limit is None or len(picked) < limit):
        best = max(pool, key=lambda n: (MMR_LAMBDA * items[n].score / top - (1 - MMR_LAMBDA) * pool[n], -n))
        del pool[best]
        item = items[best]
        picked.append(item)
        chosen.append(item)
        pool = {n: max(o, overlap(items[n].words, item.words)) for n, o in pool.items()
                if not near_duplicate(items[n], item)}
    return picked, len(pool)


def lesson_item(row: dict, with_confidence: bool = False) -> Item:
    note = f" (confidence {row['confidence']:.2f})" if with_confidence else ""
    trigger = _clean(row["trigger"], 160)
    if trigger.split(" ", 1)[0].lower() in SITUATION_WORDS:  # "when deploying" reads as it is
        trigger = trigger[:1].upper() + trigger[1:]
    else:
        trigger = f"When {trigger}"
    text = f"[{row['id']}] {trigger}: {_clean(row['action'])}{note}"
    return Item(text=text, lesson_id=row["id"], words=words(f"{row['trigger']} {row['action']}"),
                score=row.get("score", row.get("confidence", 0.0)), parts=row.get("parts", {}),
                said=saying(row["action"]))


# -- assembly -------------------------------------------------------------------------------------

def _left(section: Section, shown: dict[int, Item]) -> int:
    return len(section.items) - len(shown) + section.extra + section.copies


def _render(section: Section, shown: dict[int, Item]) -> str:
    left = _left(section, shown)
    lines = [f"### {section.title}\n"] + [f"- {shown[i].text}\n" for i in sorted(shown)]
    if left:
        lines.append(_mark(section, left))
    return "".join(lines)


def _mark(section: Section, left: int) -> str:
    noun = section.noun[:-1] if left == 1 and not section.capped and section.noun.endswith("s") else section.noun
    copies = "" if not section.copies else (", including 1 exact copy of another" if section.copies == 1
                                            else f", including {section.copies} exact copies of others")
    return f"- … {left}{'+' if section.capped else ''} more {noun} trimmed{copies}\n"


def _length(section: Section, shown: dict[int, Item]) -> int:
    """len(_render(section, shown)), counted without building the text."""
    left = _left(section, shown)
    return (len(section.title) + 5 + sum(len(item.text) + 3 for item in shown.values())
            + (len(_mark(section, left)) if left else 0))


def _fit(section: Section, shown: dict[int, Item], index: int, room: int) -> Item | None:
    """Item `index`, shortened if need be so that the subsection renders within `room`; None when
    too little would be left of it."""
    item = section.items[index]
    over = _length(section, {**shown, index: item}) - room
    if over <= 0:
        return item
    keep = len(item.text) - over - 1
    if keep < MIN_SHORTENED:
        return None
    return Item(item.text[:keep].rstrip() + "…", item.lesson_id, item.words, item.score, item.parts, item.said)


def assemble(sections: list[Section], budget: int, shares: dict | None = None,
             required: str | None = "constraints") -> tuple[str, dict[str, list[Item]]]:
    """The Markdown section within `budget` characters, and the items shown per subsection.
    The first item of the `required` subsection is always shown (shortened if need be)."""
    shares = shares or SHARES
    available = budget - len(HEADER) - len(FOOTER)
    present = [s for s in sections if s.items]
    shown: dict[str, dict[int, Item]] = {s.key: {} for s in present}

    def size(section: Section, trial: dict[int, Item] | None = None) -> int:
        return _length(section, shown[section.key] if trial is None else trial)

    def total() -> int:
        return sum(size(s) for s in present)

    first = next((s for s in present if s.key == required), None)
    if first is not None:
        item = _fit(first, {}, 0, available)
        if item is not None:
            shown[first.key][0] = item
    remaining = max(0, available - (size(first) if first is not None and shown[first.key] else 0))
    total_share = sum(shares.get(s.key, 0.0) for s in present) or 1.0
    for s in present:  # each subsection within its reservation
        room = (size(s) if shown[s.key] else 0) + int(remaining * shares.get(s.key, 0.0) / total_share)
        for index in range(len(s.items)):
            if index in shown[s.key]:
                continue
            item = _fit(s, shown[s.key], index, room) if not shown[s.key] else s.items[index]
            if item is not None and size(s, {**shown[s.key], index: item}) <= room:
                shown[s.key][index] = item
    used = total()
    for s in present:  # what the others left unused, in order
        for index in range(len(s.items)):
            if index in shown[s.key] or used + len(s.items[index].text) + 3 > available:
                continue  # (adding an item never lengthens its subsection by more than its line)
            trial = {**shown[s.key], index: s.items[index]}
            grown = size(s, trial) - size(s)
            if used + grown <= available:
                shown[s.key], used = trial, used + grown
    while total() > available:  # titles and marks of empty subsections that do not fit: drop them
        empty = [s for s in present if not shown[s.key]]
        if not empty:
            break
        present.remove(empty[-1])
    body = "".join(_render(s, shown[s.key]) for s in present)
    return HEADER + body + FOOTER, {k: [v[i] for i in sorted(v)] for k, v in shown.items() if v}


# -- building a recall ----------------------------------------------------------------------------

def state_items(project: dict | None) -> list[Item]:
    if not project:
        return []
    items = []
    notes = (project.get("notes") or "").strip()
    if notes:
        items.append(Item(f"Notes: {_clean(notes, 600)}"))
        for question in re.split(r"(?<=[.!?])\s+|\n+", notes):
            if question.strip().endswith("?"):
                items.append(Item(f"Open question: {_clean(question.strip(), 200)}"))
    for todo in project.get("todos") or []:
        content, status = _todo(todo)
        if content and status != "completed":
            items.append(Item(f"Todo{' (in progress)' if status == 'in_progress' else ''}: {_clean(content, 200)}"))
    for decision in reversed(project.get("decisions") or []):
        items.append(Item(f"Decision: {_clean(decision, 240)}"))
    files = [str(f) for f in project.get("files") or []]
    if files:
        items.append(Item("Active files: " + _clean(", ".join(files), 300)))
    return items


def _todo(todo) -> tuple[str, str]:
    if isinstance(todo, dict):
        return str(todo.get("content") or todo.get("text") or todo.get("title") or ""), str(todo.get("status") or "pending")
    return str(todo), "pending"


def distinct(rows: list[dict]) -> tuple[list[Item], int]:
    """Items of the rows (constraints, confidence shown) in their order, an exact copy of an earlier
    one (the same trigger and action once normalized) left out; and how many were left out."""
    items, seen = [], set()
    for row in rows:
        key = (quality.normalized(row["trigger"]), quality.normalized(row["action"]))
        if key not in seen:
            seen.add(key)
            items.append(lesson_item(row, True))
    return items, len(rows) - len(items)


def build(reader, project_path: str | None, budget: int, *, match: str | None = None,
          weights: dict | None = None, shares: dict | None = None, errors: bool = True,
          reinforcement: dict | None = None) -> Recall:
    """Read what recall needs through `reader` (persistence.recall_data.Reader) and assemble it.
    `match`: the task as an FTS5 query (None: no task, the session-start recall)."""
    if budget < MIN_BUDGET:
        raise ValueError(f"the recall budget must be at least {MIN_BUDGET} characters; got {budget}")
    project = reader.project(project_path) if project_path else None
    # No more candidates than a subsection could show: a lesson line is rarely under 250 characters
    # (what one subsection leaves unused goes to the others, so each may show more than its share).
    # Shorter lines can leave room: then twice as many (module docstring).
    most, most_ever = max(3, min(30, budget // 250)), max(3, budget // SHORTEST_LINE)
    while True:
        sections = _sections(reader, project, match, most, weights, reinforcement, errors)
        text, shown = assemble(sections, budget, shares)
        if most >= most_ever or len(text) + SHORTEST_LINE > budget or not any(
                s.items and s.more and len(shown.get(s.key, ())) == len(s.items) for s in sections):
            break
        most = min(2 * most, most_ever)
    counts = {s.key: len(s.items) + s.extra + s.copies for s in sections if s.items or s.copies}
    return Recall(
        text=text, budget=budget,
        lessons=[i.lesson_id for s in sections for i in shown.get(s.key, []) if i.lesson_id],
        sections={k: len(v) for k, v in shown.items()},
        trimmed={k: n - len(shown.get(k, [])) for k, n in counts.items() if n > len(shown.get(k, []))},
        project_id=(project or {}).get("project_id"),
        matched=[i.lesson_id for i in shown.get("lessons", []) if i.lesson_id] if match else [])


def _sections(reader, project: dict | None, match: str | None, most: int, weights: dict | None,
              reinforcement: dict | None, errors: bool) -> list[Section]:
    """The subsections, each offered at most `most` candidates (one more is read to know whether
    more exist)."""
    chosen: list[Item] = []  # what later subsections must not repeat
    rows = reader.of_kind("constraint", CONSTRAINT_CONFIDENCE, limit=most + 1, match=match)
    constraints, copies = distinct(rows[:most])  # always apply: never left out for being alike
    chosen.extend(constraints)
    capped = {"constraints": len(rows) > most}
    seen = {i.lesson_id for i in constraints}
    rows = reader.of_kind("preference", limit=most + 1)
    capped["preferences"] = len(rows) > most
    preferences, _ = diverse([lesson_item(r) for r in rank(rows[:most], weights, reinforcement) if r["id"] not in seen], chosen)
    seen |= {i.lesson_id for i in preferences}
    limit = max(60, 2 * most) if match else most + 10
    candidates = reader.search(match, limit) if match else reader.most_used(limit)
    capped["lessons"] = len(candidates) >= limit
    least = MIN_RELEVANCE * (weights or ranking.WEIGHTS)["relevance"] if match else 0.0
    ranked = [r for r in rank(candidates, weights, reinforcement) if r["id"] not in seen
              and r["parts"].get("relevance", 0.0) >= least]
    lessons, extra = diverse([lesson_item(r) for r in ranked], chosen, limit=most)
    # More would be offered: those the limit left out, or candidates not read (with a task, only
    # while the last read still matches well enough: those not read match less).
    more = bool(extra) or (capped["lessons"] and candidates[-1]["parts"].get("relevance", 0.0) >= least)
    seen |= {i.lesson_id for i in lessons}
    fixes = []
    if errors and match:
        rows = reader.of_kind("error_solution", recent=True, limit=most + 1)
        capped["errors"] = len(rows) > most
        fixes, _ = diverse([lesson_item(r) for r in rows[:most] if r["id"] not in seen], chosen)
    name = (project or {}).get("name")
    return [
        Section("state", f"Project state{f' ({_clean(name, 80)})' if name else ''}", "items", state_items(project)),
        Section("constraints", "Constraints (always apply)", "constraints", constraints,
                int(capped["constraints"]), capped["constraints"], copies),
        Section("preferences", "Preferences", "preferences", preferences, int(capped["preferences"]),
                capped["preferences"]),
        Section("lessons", "Lessons relevant to the task" if match else TOP_RANKED, "lessons", lessons, extra,
                capped["lessons"], more=more),
        Section("errors", "Recent error solutions", "error solutions", fixes, int(capped.get("errors", False)),
                capped.get("errors", False)),
    ]
