"""knowledge_extraction: what a project's context history knows that no lesson says yet.

Input: the project's context snapshots since this operation last ran (ordered by id) and the active
lessons. Three kinds of findings, at most `max_findings` (themes, then decisions, then todos):

- `theme`: a word or phrase (up to three topical words; stop words and generic words such as "work",
  "session", "fixed" out) in the notes of >= `theme_min_sessions` distinct session numbers, that no
  lesson covers (one lesson's trigger/action/tags holding all its stemmed words). A phrase hides its
  own sub-words and sub-phrases unless those occur in enough other sessions to be a theme alone.
  Actions: draft_lesson (recommended; data["draft"] is a draft written from the excerpts),
  project_specific, skip.
- `uncaptured_decision`: a decision (recent_decisions) whose keywords no single lesson mostly holds
  (containment below DECISION_CAPTURED). Actions: draft_lesson (recommended), project_specific, skip.
- `stale_todo`: a todo (by normalized content) pending in snapshots of >= `todo_min_sessions`
  distinct sessions and still pending in the latest snapshot. Actions: close_todo, drop_todo,
  keep (recommended: changes nothing), skip.

Fingerprints are sha256 of operation, kind and the normalized theme / decision / todo text (the
engine prefixes the project id). `subject` is empty: these findings are about history, not lessons.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from itertools import chain, islice
from pathlib import PurePosixPath

from mgcp import text
from mgcp.models import ContextSnapshot, FindingOption, HistoryRow, Lesson, RemFinding
from mgcp.collector import collector_paused
from mgcp.operations.shared import CycleCache, shared
from mgcp.operations import draft_options, fingerprint
from mgcp.operations.lesson_words import LessonWords

OPERATION = "knowledge_extraction"
DECISION_CAPTURED = 0.6  # share of a decision's keywords one lesson must hold to capture it
MAX_EXCERPTS = 3
CLOSED = {"completed", "done", "closed", "cancelled", "canceled"}


@collector_paused()
def run(history: list[ContextSnapshot | HistoryRow], lessons: list[Lesson], settings: dict,
        cache: CycleCache | None = None, words: LessonWords | None = None,
        project_path: str | None = None) -> list[RemFinding]:
    """`words`: the index of which of these lessons hold which word, when the cycle has it;
    `project_path`: the project's, whose own name is no theme of its notes."""
    history = sorted(history, key=lambda s: s.id)
    if not history:
        return []
    index = _LessonIndex(lessons, words)
    span = sorted({s.session_number for s in history})
    # Findings are made lazily, in order: once `max_findings` are made the rest is never computed.
    limit = max(0, int(settings.get("max_findings", 50)))
    named = set(text.content_tokens(PurePosixPath(project_path or "").name))
    findings = chain(_themes(history, index, span, int(settings["theme_min_sessions"]), limit, cache, named),
                     _decisions(history, index),
                     _lazy(lambda: _todos(history, int(settings["todo_min_sessions"]))))
    return list(islice(findings, limit))


def _lazy(make):
    yield from make()


class _LessonIndex:
    """Stemmed words -> the lessons holding them (trigger, action, tags), each word's lesson numbers
    a sorted numpy array (a slice of `LessonWords`: a cycle asks about a few hundred of the words of
    100k lessons, some held by tens of thousands). `words`: the index of these very lessons, when
    the cycle has it."""

    def __init__(self, lessons: list[Lesson], words: LessonWords | None = None):
        self.index = LessonWords.over(lessons, words)
        self.words = self.index.words

    def _of(self, word: str):
        """The numbers of the lessons holding `word`, ascending."""
        return self.index.of(word)

    @property
    def postings(self) -> dict[str, frozenset[int]]:
        """Every word's lessons."""
        return {word: frozenset(self._of(word).tolist()) for word in self.words if len(self._of(word))}

    def covers(self, words: tuple[str, ...]) -> bool:
        """Does one lesson hold all the words?"""
        if not words:
            return True
        sets = sorted((self._of(w) for w in set(words)), key=len)
        common = sets[0]
        for other in sets[1:]:
            if not len(common):
                break
            common = common[_held(common, other)]
        return bool(len(common))

    def best_containment(self, words: list[str]) -> float:
        """The largest share of `words` one lesson holds (exact).

        Rarest word first: after the postings of the i rarest words, a lesson in none of them holds
        at most m - i words, so the search stops as soon as the best count found reaches that. The
        lessons of word i are counted in the postings of the commoner words (a binary search of each
        in theirs, never a pass over a common word's lessons); a lesson also in a rarer word's
        postings is undercounted here, but it was counted in full there."""
        import numpy as np

        distinct = set(words)
        m = len(distinct)
        if not m:
            return 1.0
        sets = sorted((self._of(w) for w in distinct), key=len)
        best = 0
        for i, own in enumerate(sets):
            if best >= m - i:
                break
            if not len(own):
                continue
            hits = np.zeros(len(own), dtype=np.int64)
            for other in sets[i + 1:]:
                hits += _held(own, other)
            best = max(best, 1 + int(hits.max()))
        return best / m


def _held(numbers, sorted_numbers):
    """Which of `numbers` are in `sorted_numbers` (ascending), as a boolean array."""
    import numpy as np

    if not len(sorted_numbers):
        return np.zeros(len(numbers), dtype=bool)
    place = np.searchsorted(sorted_numbers, numbers)
    return sorted_numbers[np.minimum(place, len(sorted_numbers) - 1)] == numbers


# -- themes --------------------------------------------------------------------------------------

def recurring_phrases(history: list[ContextSnapshot | HistoryRow], min_sessions: int,
                      cache: CycleCache | None = None) -> Iterator[dict]:
    """Phrases in the notes of >= min_sessions distinct sessions, sub-phrases folded into longer
    ones, each as {"key", "theme", "sessions"}; sorted by session count (desc), length (desc),
    phrase, and made as they are taken (a caller that needs the first few pays for those). Also used
    by context_summary. `excerpts` gives the excerpts of the ones shown.

    Linear in the notes: each distinct sentence is mined once (saves repeat their notes; a note's
    phrases are its sentences' phrases, as phrases never cross a sentence end), phrases are
    numbered so that a sentence keeps only a list of numbers, and a phrase finds the longer kept
    phrases holding it through an index of their sub-phrases (at most five per three-word phrase)
    instead of a scan of all of them."""
    # context_summary mines the same history in the same cycle
    number, keys, surface, sessions, in_sentence = _mined(history, cache)
    candidates = {keys[n]: v for n, v in enumerate(sessions) if len(v) >= min_sessions}
    # A longer phrase that is only an occasional extension of a recurring phrase (of two or more
    # words) gives way to it: "connection pooling" in 5 sessions beats "connection pooling config"
    # in 3. Single words never win this way; they are too vague.
    candidates = {k: v for k, v in candidates.items()
                  if not any(len(candidates.get(q, ())) > len(v) for q in _sub_phrases(k, 2))}
    kept = []
    holders: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)  # sub-phrase -> kept longer
    for key in sorted(candidates, key=lambda k: (-len(k), k)):
        own = candidates[key]
        longer = holders.get(key)
        if longer:
            covered = set().union(*(candidates[q] for q in longer))
            if len(own - covered) < min_sessions:
                continue
        kept.append(key)
        for sub in _sub_phrases(key, 1):
            holders[sub].append(key)
    del holders
    kept.sort(key=lambda k: (-len(candidates[k]), -len(k), k))
    for k in kept:
        yield {"key": k, "theme": surface[number[k]], "sessions": sorted(candidates[k])}


def excerpts(history: list[ContextSnapshot | HistoryRow], keys: list[tuple[str, ...]],
             cache: CycleCache | None = None) -> dict[tuple[str, ...], list[tuple[int, str]]]:
    """Up to 8 (session, sentence) excerpts of each phrase of `keys` (`recurring_phrases`' keys),
    one per session, in the order of the history; each phrase's are the same whatever the others."""
    number, _, _, _, in_sentence = _mined(history, cache)
    note_sentences = _read(cache)[0]
    found: dict[tuple[str, ...], list[tuple[int, str]]] = {k: [] for k in keys}
    if not keys:
        return found
    wanted = {number[k]: k for k in keys}
    excerpt_sessions: dict[tuple[str, ...], set[int]] = {k: set() for k in keys}
    plan: dict[str, list[tuple[str, list[tuple[str, ...]]]]] = {}  # note -> sentences with wanted phrases
    done: set[tuple[str, int]] = set()
    short = text.Memo(lambda sentence: text.shorten(sentence, 160))
    for snap in history:
        note = snap.notes or ""
        if (note, snap.session_number) in done:
            continue  # one excerpt per session: the same note again in a session adds none
        done.add((note, snap.session_number))
        items = plan.get(note)
        if items is None:
            items = plan[note] = []
            sentences = note_sentences.get(note)
            for sentence in text.sentences(note) if sentences is None else sentences:
                inside = [wanted[n] for n in in_sentence[sentence] if n in wanted]
                if inside:
                    items.append((sentence, inside))
        for sentence, inside in items:
            for key in inside:
                got = found[key]
                if len(got) < 8 and snap.session_number not in excerpt_sessions[key]:
                    got.append((snap.session_number, short[sentence]))
                    excerpt_sessions[key].add(snap.session_number)
    return found


def _mined(history: list[ContextSnapshot | HistoryRow], cache: CycleCache | None):
    # the two operations mine histories that mostly overlap (each from its own last run): a
    # sentence's phrases, read once, serve both
    read = _read(cache)
    return shared(cache, ("note phrases", tuple(snap.id for snap in history)), lambda: _mine(history, read))


def _read(cache: CycleCache | None) -> tuple[dict, dict]:
    """What the cycle read of its notes (see `_mine`)."""
    return shared(cache, "notes read", lambda: ({}, {}))


def _mine(history: list[ContextSnapshot | HistoryRow], read: tuple[dict, dict] | None = None):
    """Every phrase of the notes, numbered, with the sessions whose notes hold it, and each distinct
    sentence's phrase numbers. `read`: (note -> its sentences (`text.sentences`), sentence -> its
    phrases' (key, form) pairs (`text.phrases`)), what earlier calls read, filled with what this
    one reads."""
    note_sentences, sentence_phrases = ({}, {}) if read is None else read
    note_sessions: dict[str, set[int]] = {}  # distinct notes, in order of first appearance
    for snap in history:
        note_sessions.setdefault(snap.notes or "", set()).add(snap.session_number)
    number: dict[tuple[str, ...], int] = {}
    keys: list[tuple[str, ...]] = []
    surface: list[str] = []       # first seen form
    sessions: list[set[int]] = []
    in_sentence: dict[str, list[int]] = {}
    for note, note_sess in note_sessions.items():
        sentences = note_sentences.get(note)
        if sentences is None:
            sentences = note_sentences[note] = list(text.sentences(note))
        for sentence in sentences:
            found = in_sentence.get(sentence)
            if found is None:
                found = in_sentence[sentence] = []
                pairs = sentence_phrases.get(sentence)
                if pairs is None:
                    pairs = sentence_phrases[sentence] = list(text.phrases(sentence).items())
                for key, form in pairs:
                    n = number.get(key)
                    if n is None:
                        n = number[key] = len(keys)
                        keys.append(key)
                        surface.append(form)
                        sessions.append(set())
                    found.append(n)
            for n in found:
                sessions[n] |= note_sess
    return number, keys, surface, sessions, in_sentence


def _sub_phrases(key: tuple[str, ...], min_n: int) -> list[tuple[str, ...]]:
    return [key[i:i + n] for n in range(min_n, len(key)) for i in range(len(key) - n + 1)]


def _contains(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    n = len(shorter)
    return n < len(longer) and any(longer[i:i + n] == shorter for i in range(len(longer) - n + 1))


def _themes(history, index: _LessonIndex, span: list[int], min_sessions: int, limit: int,
            cache: CycleCache | None, named: set[str] = frozenset()):
    """The first `limit` themes no lesson covers (no more can be shown), with their excerpts.
    `named`: the words of the project's name; a theme of them alone is the project, not a topic."""
    shown = list(islice((t for t in recurring_phrases(history, min_sessions, cache)
                         if not set(t["key"]) <= named and not index.covers(t["key"])), limit))
    found = excerpts(history, [t["key"] for t in shown], cache)
    for theme in shown:
        yield _theme_finding({**theme, "excerpts": found[theme["key"]]}, span)


def _distinct(texts) -> list[str]:
    """The texts in order, each once (texts equal up to case, spacing and punctuation are one)."""
    first: dict[str, str] = {}
    for said in texts:
        first.setdefault(text.normalize(said), said)
    return list(first.values())


def _theme_finding(theme: dict, span: list[int]) -> RemFinding:
    name, sessions = theme["theme"], theme["sessions"]
    excerpts = [{"session": s, "text": t} for s, t in theme["excerpts"][:MAX_EXCERPTS]]
    draft = {
        "id": text.slug(name),
        "trigger": f"When working on {name}",
        "action": " ".join(_distinct(e["text"] for e in excerpts)),  # a note saved again says nothing new
        "rationale": f'Came up in the notes of {len(sessions)} sessions ({_sessions(sessions)}) '
                     f"and no lesson covered it.",
        "tags": sorted(set(text.tokenize(name))),
    }
    description = "\n".join(
        [f"Across the last {len(span)} sessions ({span[0]}-{span[-1]}), your notes mention "
         f'"{name}" in {len(sessions)} of them (sessions {_sessions(sessions)}). '
         "There's no lesson covering this topic.", ""]
        + [f'- session {e["session"]}: "{e["text"]}"' for e in excerpts]
        + ["", "Should we create a lesson from these patterns?"])
    return RemFinding(
        operation=OPERATION, kind="theme",
        title=f'Recurring theme "{name}" in {len(sessions)} sessions, no lesson covers it',
        description=description, options=draft_options(draft["id"]), recommended=1,
        data={"theme": name, "sessions": sessions, "excerpts": excerpts, "draft": draft},
        fingerprint=fingerprint(OPERATION, "theme", " ".join(theme["key"])),
    )


def _sessions(sessions: list[int]) -> str:
    return ", ".join(str(s) for s in sessions)


# -- decisions -----------------------------------------------------------------------------------

def _decisions(history, index: _LessonIndex):
    seen: dict[str, dict] = {}
    norm = text.Memo(text.normalize)  # decisions are carried from snapshot to snapshot
    for snap in history:
        for decision in snap.recent_decisions:
            key = norm[decision]
            if not key:
                continue
            entry = seen.setdefault(key, {"text": decision.strip(), "sessions": set()})
            entry["sessions"].add(snap.session_number)
    for key, entry in seen.items():
        words = text.keywords(entry["text"])
        if not words:
            continue
        containment = index.best_containment(words)
        if containment >= DECISION_CAPTURED:
            continue
        yield _decision_finding(key, entry["text"], sorted(entry["sessions"]), containment)


def _decision_finding(key: str, decision: str, sessions: list[int], containment: float) -> RemFinding:
    draft = {
        "id": text.slug(decision),
        "trigger": "When deciding about " + " ".join(
            [w for w in text.tokenize(decision) if w not in text.STOP_WORDS | text.CODING_STOP_WORDS][:6]),
        "action": decision,
        "rationale": f"Decided in session {sessions[0]}" + (
            f" (recorded in sessions {_sessions(sessions)})" if len(sessions) > 1 else "") + ".",
        "tags": text.keyword_words(decision)[:4],
    }
    description = "\n".join([
        f'In session {sessions[0]} you decided: "{text.shorten(decision, 200)}"',
        f"No lesson captures it (the closest lesson holds {containment:.0%} of its keywords).",
        "", "Should we turn it into a lesson?",
    ])
    return RemFinding(
        operation=OPERATION, kind="uncaptured_decision",
        title=f'Decision not captured by any lesson: "{text.shorten(decision, 70)}"',
        description=description, options=draft_options(draft["id"]), recommended=1,
        data={"decision": decision, "sessions": sessions, "containment": round(containment, 2),
              "draft": draft},
        fingerprint=fingerprint(OPERATION, "uncaptured_decision", key),
    )


# -- todos ---------------------------------------------------------------------------------------

def _todos(history, min_sessions: int) -> list[RemFinding]:
    pending_in: dict[str, set[int]] = defaultdict(set)
    norm = text.Memo(text.normalize)  # todos are carried from snapshot to snapshot
    for snap in history:
        for todo in snap.todos:
            if todo.status not in CLOSED:
                key = norm[todo.content]
                if key:
                    pending_in[key].add(snap.session_number)
    latest = {norm[t.content]: t for t in history[-1].todos if t.status not in CLOSED}
    stale = [(key, sorted(sessions)) for key, sessions in pending_in.items()
             if key in latest and len(sessions) >= min_sessions]
    stale.sort(key=lambda x: (-len(x[1]), x[0]))
    return [_todo_finding(key, latest[key], sessions, history[-1].session_number)
            for key, sessions in stale]


def _todo_finding(key: str, todo, sessions: list[int], latest_session: int) -> RemFinding:
    description = "\n".join([
        f'The todo "{todo.content}" (priority {todo.priority}) has been pending across '
        f"{len(sessions)} sessions ({_sessions(sessions)}) and is still pending in session {latest_session}.",
        "", "Is it done, no longer needed, or still wanted?",
    ])
    options = [
        FindingOption(label="Close it as done", action="close_todo",
                      description="Mark the todo completed in the project context"),
        FindingOption(label="Drop it", action="drop_todo",
                      description="Remove the todo from the project context"),
        FindingOption(label="Keep it", action="keep",
                      description="Still wanted; remember this answer"),
        FindingOption(label="Skip for now", action="skip", description="Leave this finding pending"),
    ]
    return RemFinding(
        operation=OPERATION, kind="stale_todo",
        title=f'Todo pending for {len(sessions)} sessions: "{text.shorten(todo.content, 70)}"',
        description=description, options=options, recommended=3,
        data={"todo": todo.content, "normalized": key, "sessions": sessions,
              "priority": todo.priority, "latest_session": latest_session},
        fingerprint=fingerprint(OPERATION, "stale_todo", key),
    )
