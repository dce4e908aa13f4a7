"""pattern_reinforcement: what keeps coming back across sessions becomes one reinforced pattern.

Observations, clustered by `category::normalized text` (mgcp.reinforcement.cluster_key), for the
configured `categories`:

- `lesson`: each active or superseded lesson, by its action (a lesson added again is a second
  member). Archived and deleted lessons are left out.
- `decision`: each (project, session) that stated the decision: recorded as saved
  (`decision_observations`), or, for history saved before that was recorded, the session whose
  snapshot first holds it (a decision carried over from save to save is observed once).
- `note`: each (project, session) whose notes were written anew (they differ from the project's
  previous snapshot) and hold the sentence; sentences of fewer than NOTE_MIN_WORDS topical words
  are too slight to be a pattern.

The history is gathered page by page (`Observations`): the sessions of each decision and sentence
are kept, never the snapshots. A cycle keeps what it observed (`Seen` per key, see
mgcp.persistence.pattern_observations) and reads only the history added since. A cluster of at
least `min_count` members (clamped to 2..1000) is a pattern. Its canonical is the most recent
active lesson (lessons), or the most recent source (decisions, notes); it is stamped with
`reinforcement_count` (the cluster's size), `last_reinforced_at`, `derived_from` (every member's
source, oldest first) and `derived_via = "pattern-reinforcement"`. A decision's or note's sources
are ordered by when each session first stated the key, then by source; its wording is the latest
(at the same moment, the greatest text): so the same history read at once or in parts gives the
same pattern. The pattern reinforces a lesson: the canonical lesson, or for a decision or note the
lesson holding it (its normalized action equal, else at least HELD of its keywords in the lesson's
trigger, action and tags: how knowledge extraction judges a decision captured).

Idempotent: the count changes only when the cluster grew (a re-run over the same sources writes
nothing, and a cluster that shrank keeps its count); the provenance (sources, canonical, text,
lesson) is rewritten when the membership changed, at the same count. Those refresh writes are the
expected cost of accurate provenance, not drift.

Findings (at most `max_findings` of each kind, see `mgcp.operations.cap`):
- `reinforced_duplicates`: a lesson pattern with more than one active member. One member is kept:
  the most used, then the most refined (most versions), then the most recent; the finding says
  which and why. The members are true copies when every one's whole trigger and whole action equal
  the kept one's under `mgcp.reinforcement.identity` (the write-time dedup rule: case, spacing and
  punctuation aside). Then "supersede_duplicates" is recommended (each other copy merged into the
  kept one by the undoable merge path) and `data["normalized_equal"]` is true, so `--auto` may
  apply it. Members that share only the cluster key (another trigger, or an action that goes on
  differently after the first 200 characters) are not copies: the finding names each difference,
  recommends keeping them all and is left to a person. Options: supersede_duplicates, keep, skip.
- `reinforced_draft`: a decision or note pattern that no lesson holds, naming its count and
  sessions. Recommended "draft_lesson"; also project_specific, skip.

Patterns are the knowledge base's: one counts every project's sessions, so a lesson holding what
several projects decided is reinforced by all of them. A draft is a context finding of the project
whose run it is, made of that project's sessions alone: their count (at least `min_count`), their
numbers and the project's own latest wording, never another project's; its fingerprint names the
project, so each project answers its own.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from array import array
from dataclasses import dataclass, field
from itertools import chain

from mgcp import text
from mgcp.models import FindingOption, Lesson, LessonStatus, ReinforcedPattern, RemFinding
from mgcp.operations import cap, draft_options, fingerprint, subject_identity, subject_of
from mgcp.operations import pattern_kept
from mgcp.operations.lesson_words import LessonWords, lesson_digests, source
from mgcp.operations.pattern_kept import ACTIVE, EMPTY, SUPERSEDED, Kept, text_digest
from mgcp.reinforcement import (DERIVED_VIA, KEY_LENGTH, cluster_key, differences, key_of, min_count, normalize,
                                normalize_whole, pattern_id, whole_key)

OPERATION = "pattern_reinforcement"
NOTE_MIN_WORDS = 3
HELD = 0.6  # share of a decision's or note's keywords one lesson must hold to hold it
MAX_SESSIONS_SHOWN = 12
# What observations kept between cycles are made by (with the mgcp version): kept ones made otherwise
# are made again.
OBSERVATION_RULES = f"note sentences of {NOTE_MIN_WORDS}+ words, keys of {KEY_LENGTH} characters"


@dataclass
class _Member:
    ref: str      # "lesson:<id>" or "session:<project id>:<session number>"
    at: str       # when it was observed (ISO)
    text: str     # the surface text
    lesson: Lesson | None = None
    project_id: str | None = None
    session: int | None = None


@dataclass
class Result:
    patterns: list[ReinforcedPattern] = field(default_factory=list)  # new or changed: to write
    findings: list[RemFinding] = field(default_factory=list)
    clusters: int = 0      # clusters at or above min_count
    unchanged: int = 0     # patterns found exactly as stored
    kept: Kept | None = None  # what the next run starts from (its `mark` set once the patterns are written)
    kept_changed: bool = True  # whether `kept` differs from the state the run started from


def run(lessons: list[Lesson], observed: "Observations", existing: dict, settings: dict,
        now: str, project_paths: dict[str, str] | None = None, words: LessonWords | None = None,
        kept: bytes | None = None, mark: str | None = None, project_id: str | None = None,
        wordings: dict[str, str] | None = None, settled: frozenset[str] = frozenset()) -> Result:
    """`observed`: the decisions and notes of the context history (see `Observations` and
    `Observed`); `existing`: the stored patterns by cluster key (`ReinforcedPattern`s, or rows with
    the same fields and `derived_from` as stored); `words`: the index of which active lessons hold
    which word, when the cycle has it (over the active lessons in `lessons`' order); `kept`: the
    state an earlier run kept (see `mgcp.operations.pattern_kept`), `mark` the patterns table's
    change mark now; `project_id`: the project whose run it is, whose drafts it makes (None: no
    drafts); `wordings`: that project's own wording of the keys other projects stated too (see
    `Observed.shared` and `own_wordings`); `settled`: fingerprints answered "don't ask again",
    where a draft rejected before drafts were a project's (its fingerprint without the project)
    keeps it from being asked again."""
    categories = set(settings.get("categories", ["lesson", "decision", "note"]))
    needed = min_count(settings.get("min_count", 3))
    rules_ = pattern_kept.rules(needed, categories)
    before = Kept.of(kept, rules_)
    active = [lesson for lesson in lessons if lesson.status == LessonStatus.active]
    index = LessonWords.over(active, words)
    counted = active + [lesson for lesson in lessons if lesson.status == LessonStatus.superseded]
    after, entered = _read_lessons(counted, index.digests, before, rules_)
    clusters: dict[str, list[Lesson]] = {}  # a lesson cluster's lessons; None: see `observed`
    if "lesson" in categories:
        clusters.update(_lesson_members(counted, after, needed))
    clusters.update(dict.fromkeys(observed.keys(needed, categories)))  # their members made one at a time
    present = set(index.digests)
    may_hold = _Entered([active[number] for number in entered]).may_hold if before is not None else None
    holders = _Holders(active, index, wholes=after.whole[:len(active)])
    fresh = observed.fresh
    settled_as_stored = before is not None and mark is not None and before.mark == mark and fresh is not None
    result = Result()
    paths = project_paths or {}
    drafts: list = []
    for key in sorted(clusters):
        category = key.split("::", 1)[0]
        if category == "lesson":
            members = [_Member(f"lesson:{lesson.id}", lesson.created_at, lesson.action, lesson=lesson)
                       for lesson in clusters[key]]
            members.sort(key=lambda m: (m.at, m.ref))
            live = [m for m in members if m.lesson.status == LessonStatus.active]
            if not live:
                continue  # every copy superseded: the lesson they were merged into carries it
            canonical = max(live, key=lambda m: (m.lesson.created_at, m.lesson.id))
            surface, sources = canonical.text, [m.ref for m in members]
            lesson_id, canonical_ref = canonical.lesson.id, canonical.lesson.id
        else:
            surface = observed.surface(key)  # the latest wording of the cluster
            if before is not None and not before.unsettled(key, surface, present, may_hold):
                after.keys[key] = before.keys[key]
                lesson_id = before.keys[key][1]
                if settled_as_stored and key not in fresh and key in existing:
                    # observations and holder as the kept run found them: stored then, unchanged since
                    result.clusters += 1
                    result.unchanged += 1
                    if lesson_id is None:
                        drafts.append(existing[key])
                    continue
            else:
                number = holders.holding_number(surface)
                lesson_id = None if number is None else active[number].id
                after.keys[key] = (surface, lesson_id, None if number is None else index.digests[number].hex(),
                                   normalize_whole(surface), text.keywords(surface))
            sources = observed.sources(key)  # oldest first: the last one is the canonical
            canonical_ref = sources[-1]
        result.clusters += 1
        pattern = _stamp(existing.get(key), key, category, surface, lesson_id, canonical_ref, sources, now)
        if pattern is None:
            result.unchanged += 1
            pattern = existing[key]
        else:
            result.patterns.append(pattern)
        if category == "lesson":
            if len(live) > 1:
                result.findings.append(_duplicates_finding(pattern, canonical.lesson, [m.lesson for m in live]))
        elif lesson_id is None:
            drafts.append(pattern)  # its members are made again only if the review shows it
    limit = int(settings.get("max_findings", 50))
    shown: dict[str, int] = defaultdict(int)
    # a draft is the project's: of its own sessions, when they alone are enough
    own = {p.cluster_key: observed.own(p.cluster_key, project_id) for p in drafts} if project_id else {}
    wordings = wordings or {}
    asked = [p for p in drafts if len(own.get(p.cluster_key, ())) >= needed
             and fingerprint(OPERATION, "reinforced_draft", p.cluster_key) not in settled]
    for pattern in sorted(asked, key=lambda p: (-len(own[p.cluster_key]), p.cluster_key)):
        # Beyond what the review shows of a category, a finding only feeds the summary: no draft.
        key = pattern.cluster_key
        shown[pattern.category] += 1
        full = shown[pattern.category] <= limit
        members = [m for m in observed.members(key) if m.project_id == project_id] if full else []
        result.findings.append(_draft_finding(pattern, project_id, len(own[key]), wordings.get(key, pattern.text),
                                              members, paths, full=full))
    result.findings.sort(key=lambda f: -f.data["count"])  # stable: the strongest first
    result.findings = cap(result.findings, limit, lambda f: f.data.get("category", ""))
    result.kept = after
    result.kept_changed = before is None or before.mark != mark or not before.same(after)
    return result


def _read_lessons(counted: list[Lesson], digests: list[bytes], before: Kept | None, rules_: str):
    """What this run keeps of the counted lessons (the active ones first, whose digests are
    `digests`, then the superseded): each one's cluster key's and normalized action's digests, as
    kept where it was (a lesson unchanged since), else read; and the numbers of the active ones that
    were not active when `before` was kept."""
    import numpy as np

    n, active = len(counted), len(digests)
    digests = digests + lesson_digests(counted[active:])
    now = np.frombuffer(b"".join(digests), dtype="S16") if digests else np.zeros(0, dtype="S16")
    status = np.full(n, SUPERSEDED, dtype=np.uint8)
    status[:active] = ACTIVE
    keyed, whole = np.zeros(n, dtype="S16"), np.zeros(n, dtype="S16")
    found, was_active = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if before is not None:
        found, place = before.find(now)
        place = place[found]
        keyed[found], whole[found] = before.keyed[place], before.whole[place]
        was_active[found] = before.status[place] == ACTIVE
    for number in np.flatnonzero(~found).tolist():
        said = normalize_whole(counted[number].action)
        keyed[number], whole[number] = text_digest(said[:KEY_LENGTH]), text_digest(said)
    return Kept(rules_, "", now, keyed, whole, status), np.flatnonzero(~was_active[:active]).tolist()


def _stamp(previous, key: str, category: str, surface: str,
           lesson_id: str | None, canonical: str, sources: list[str], now: str) -> ReinforcedPattern | None:
    """The pattern to write for this cluster, or None when the stored one is already exact."""
    if previous is None:
        return ReinforcedPattern(
            id=pattern_id(key), cluster_key=key, category=category, text=surface, lesson_id=lesson_id,
            canonical=canonical, reinforcement_count=len(sources), last_reinforced_at=now,
            derived_from=sources, derived_via=DERIVED_VIA, created_at=now, updated_at=now)
    grew = len(sources) > previous.reinforcement_count
    fields = {"text": surface, "lesson_id": lesson_id, "canonical": canonical, "derived_via": DERIVED_VIA}
    if (not grew and all(getattr(previous, k) == v for k, v in fields.items())
            and _same_sources(previous.derived_from, sources)):
        return None
    update = {**fields, "derived_from": sources, "updated_at": now}
    if grew:
        update.update(reinforcement_count=len(sources), last_reinforced_at=now)
    if not isinstance(previous, ReinforcedPattern):  # a stored row: its sources as stored
        previous = ReinforcedPattern(**{**previous._asdict(), "derived_from": json.loads(previous.derived_from or "[]")})
    return previous.model_copy(update=update)


def _same_sources(stored, sources: list[str]) -> bool:
    """Whether the stored sources (a list, or the JSON text of one) are `sources`."""
    if isinstance(stored, list):
        return stored == sources
    return stored == json.dumps(sources, ensure_ascii=False) or json.loads(stored or "[]") == sources


# -- observations --------------------------------------------------------------------------------

def _lesson_members(counted: list[Lesson], kept: Kept, needed: int) -> dict[str, list[Lesson]]:
    """The lesson clusters of at least `needed` members: the counted lessons grouped by their
    action normalized (its first KEY_LENGTH characters are the cluster key's text), as digested in
    `kept`."""
    import numpy as np

    numbers = np.flatnonzero(kept.keyed != np.frombuffer(EMPTY, dtype="S16")[0])
    keyed = kept.keyed[numbers]
    order = np.argsort(keyed, kind="stable")
    keyed, numbers = keyed[order], numbers[order]
    starts = np.flatnonzero(np.r_[True, keyed[1:] != keyed[:-1]]) if len(keyed) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(keyed)]
    out = {}
    for start, end in zip(starts.tolist(), ends.tolist()):
        if end - start >= needed:
            group = [counted[number] for number in sorted(numbers[start:end].tolist())]
            out[whole_key("lesson", normalize_whole(group[0].action))] = group
    return out


class Observations:
    """What the context history says, gathered page by page so that no history is held whole: for
    each cluster key, the (project, session) pairs that stated the decision or wrote the sentence,
    each with when it first did (its earliest observation of that key), and the latest wording of
    the key (the greatest (observed at, sentence): the same moment's wordings are ordered by text).
    Pairs are numbered and each key keeps an array of numbers: millions of observations stay compact.

    Every rule is a union, a minimum or a maximum over single observations, so the same rows give
    the same result in any grouping: a history read in parts (`resume`, `seen`, `merge`) gives
    exactly what it gives read at once.

    `add_decisions` takes decision observations as saved; `add_history` takes snapshots as
    (project id, session number, timestamp, notes, recent decisions) tuples, ordered by project
    then id, each page continuing the last."""

    def __init__(self, categories=("decision", "note")):
        self.decisions, self.notes = "decision" in categories, "note" in categories
        # key -> (number of a (project, session) pair, number of the moment it was observed), flat
        self.sessions: dict[str, array] = {}
        self._times: list[str] = []  # each observing row's moment, by number
        self.wording: dict[str, tuple[str, str]] = {}  # key -> (observed at, surface), the latest
        self.snapshots = 0
        self._number: dict[tuple[str, int], int] = {}  # (project, session) -> its number
        self._labels: list[str] = []
        self._previous: tuple[str | None, str | None, frozenset[str]] = (None, None, frozenset())
        self._decision_key = text.Memo(lambda d: key_of("decision", d))
        # Histories repeat their sentences: each distinct one is weighed and keyed once.
        self._note_key = text.Memo(lambda sentence: cluster_key("note", sentence)
                                   if len(text.content_tokens(sentence)) >= NOTE_MIN_WORDS else None)
        # Sessions write the same notes again: each recent distinct note's (key, sentence) pairs, kept
        # for up to 10,000 notes at a time.
        self._note_keys: dict[str, list[tuple[str, str]]] = {}

    @classmethod
    def of(cls, history: list[tuple], decisions: list[dict], categories=("decision", "note")) -> "Observations":
        observed = cls(categories)
        observed.add_decisions(decisions)
        observed.add_history(history)
        return observed

    def resume(self, project_id: str, notes: str, decisions: list[str]) -> None:
        """Continue the project's history after a snapshot read earlier, whose notes and recent
        decisions these were: the next rows are compared with it as with the one before them."""
        self._previous = (project_id, notes, frozenset(decisions))

    def _pair(self, project_id: str, session: int) -> int:
        number = self._number.get((project_id, session))
        if number is None:
            number = self._number[(project_id, session)] = len(self._labels)
            self._labels.append(_source(project_id, session))
        return number

    def _add(self, key: str, number: int, at: str, surface: str) -> None:
        found, times = self.sessions.get(key), self._times
        if found is None:
            self.sessions[key] = array("l", (number, len(times)))
            times.append(at)
        elif found[-2] != number:
            found.extend((number, len(times)))
            times.append(at)
        elif at < times[found[-1]]:  # the same session again (its next save): only the earlier time counts
            found[-1] = len(times)
            times.append(at)
        said = self.wording.get(key)
        if said is None or (at, surface) > said:
            self.wording[key] = (at, surface)

    def add_decisions(self, rows: list[dict]) -> None:
        """Decisions as saved: ({project_id, session_number, decision, observed_at})."""
        if not self.decisions:
            return
        for row in rows:
            key = self._decision_key[row["decision"]]
            if key:
                self._add(key, self._pair(row["project_id"], row["session_number"]), row["observed_at"],
                          row["decision"])

    def add_history(self, rows: list[tuple]) -> None:
        """Snapshots: a decision counts where it enters the recent decisions (one carried from save
        to save is observed once); a note's sentences count where the notes were written anew.
        Recent decisions of None: the same as the project's previous snapshot's."""
        project, notes_before, held_before = self._previous
        decisions_on, notes_on = self.decisions, self.notes
        sessions, times, wording = self.sessions, self._times, self.wording
        note_keys, numbered = self._note_keys, self._number
        for project_id, session, at, notes, decisions in rows:
            same_project = project_id == project
            number = None
            if decisions is not None or not same_project:
                held = frozenset(decisions or ())
                if decisions_on and (held != held_before or not same_project):
                    for decision in decisions or ():
                        key = self._decision_key[decision]
                        if key and not (same_project and decision in held_before):
                            number = self._pair(project_id, session) if number is None else number
                            self._add(key, number, at, decision)
                held_before = held
            if notes_on and notes and not (same_project and notes == notes_before):
                keyed = note_keys.get(notes)
                if keyed is None:
                    if len(note_keys) > 10_000:
                        note_keys.clear()
                    keyed = note_keys[notes] = [(key, sentence) for sentence in text.sentences(notes)
                                                if (key := self._note_key[sentence]) is not None]
                if keyed:
                    if number is None:
                        number = numbered.get((project_id, session))
                        if number is None:
                            number = self._pair(project_id, session)
                    moment = len(times)
                    times.append(at)
                    for key, sentence in keyed:  # `_add`, inline: millions of observations
                        found = sessions.get(key)
                        if found is None:
                            sessions[key] = array("l", (number, moment))
                        elif found[-2] != number:
                            found.extend((number, moment))
                        elif at < times[found[-1]]:
                            found[-1] = moment
                        said = wording.get(key)
                        if said is None or (at, sentence) > said:
                            wording[key] = (at, sentence)
            project, notes_before = project_id, notes
        self.snapshots += len(rows)
        self._previous = (project, notes_before, held_before)

    def seen(self) -> dict[str, tuple]:
        """Every key observed: key -> (said_at, said, sources, firsts), the fields of `Seen`."""
        return {key: self._seen(key) for key in self.sessions}

    def _seen(self, key: str) -> tuple:
        found, labels = self.sessions[key], self._labels
        said_at, said = self.wording[key]
        if len(found) == 2:
            return said_at, said, [labels[found[0]]], [self._times[found[1]]]
        numbers, stamps = found[0::2], list(map(self._times.__getitem__, found[1::2]))
        if len(set(numbers)) == len(numbers):  # no session twice: ordered as plain tuples
            ordered = sorted(zip(stamps, map(labels.__getitem__, numbers)))
        else:
            first: dict[int, str] = {}
            for number, at in zip(numbers, stamps):
                if number not in first or at < first[number]:
                    first[number] = at
            ordered = sorted((at, labels[number]) for number, at in first.items())
        return said_at, said, [source for _, source in ordered], [at for at, _ in ordered]

    def observed(self) -> "Observed":
        """What a run reads of these observations (every key)."""
        return Observed({key: Seen(*fields) for key, fields in self.seen().items()})


@dataclass
class Seen:
    """One cluster key's observations: its latest wording (`said`, observed at `said_at`) and its
    sources, each with when it first observed the key (`firsts`), in that order, then by source."""

    said_at: str
    said: str
    sources: list[str]
    firsts: list[str] | None  # None: not read (members are then dated "")

    def fields(self) -> tuple:
        return self.said_at, self.said, self.sources, self.firsts

    def merge(self, other: "Seen") -> "Seen":
        """The observations of both: the union of the sources, each at its earlier time, and the
        later wording."""
        first = dict(zip(self.sources, self.firsts))
        for source, at in zip(other.sources, other.firsts):
            if source not in first or at < first[source]:
                first[source] = at
        ordered = sorted(first, key=lambda s: (first[s], s))
        said_at, said = max((self.said_at, self.said), (other.said_at, other.said))
        return Seen(said_at, said, ordered, [first[s] for s in ordered])

    def members(self) -> list["_Member"]:
        out = []
        for source, at in zip(self.sources, self.firsts if self.firsts is not None else [""] * len(self.sources)):
            project_id, session = source[len("session:"):].rsplit(":", 1)
            out.append(_Member(source, at, self.said.strip(), project_id=project_id, session=int(session)))
        return out


class Observed:
    """The observations a run reads, one `Seen` per key: the same answers as `Observations`.
    `later`: more keys' observations as kept, (said_at, said, number of sources, the sources one
    per line), split only when a run asks for them; `fresh`: the keys observed anew since those
    were kept (None: every key)."""

    def __init__(self, seen: dict[str, Seen], later: dict[str, tuple] | None = None, fresh: set[str] | None = None):
        self.seen = seen
        self.later = later or {}
        self.fresh = fresh

    def keys(self, needed: int, categories) -> list[str]:
        return ([key for key, seen in self.seen.items()
                 if len(seen.sources) >= needed and key.split("::", 1)[0] in categories]
                + [key for key, (_, _, size, _) in self.later.items()
                   if size >= needed and key not in self.seen and key.split("::", 1)[0] in categories])

    def _seen(self, key: str) -> Seen:
        found = self.seen.get(key)
        if found is None:
            said_at, said, _, sources = self.later[key]
            found = self.seen[key] = Seen(said_at, said, sources.split("\n"), None)
        return found

    def surface(self, key: str) -> str:
        found = self.seen.get(key)
        return (found.said if found is not None else self.later[key][1]).strip()

    def sources(self, key: str) -> list[str]:
        return self._seen(key).sources

    def members(self, key: str) -> list["_Member"]:
        return self._seen(key).members()

    def own(self, key: str, project_id: str) -> list[str]:
        """The key's sources in this project, in order (a kept key's sources are split only when
        the project is among them)."""
        prefix = _source(project_id, "")
        found = self.seen.get(key)
        if found is not None:
            sources = found.sources
        else:
            sources = self.later[key][3]
            if prefix not in sources:
                return []
            sources = sources.split("\n")
        return [s for s in sources if s.startswith(prefix) and ":" not in s[len(prefix):]]

    def shared(self, project_id: str, needed: int) -> dict[str, int]:
        """The keys this project stated in at least `needed` sessions that other projects stated
        too (their latest wording may be another project's), each with the project's latest
        session stating it."""
        out = {}
        for key in self.keys(needed, ("decision", "note")):
            own = self.own(key, project_id)
            size = len(self.seen[key].sources) if key in self.seen else self.later[key][2]
            if needed <= len(own) < size:
                out[key] = max(int(source.rsplit(":", 1)[1]) for source in own)
        return out


def own_wordings(keys, snapshots: list[tuple], decisions: list[dict]) -> dict[str, str]:
    """The latest wording of each of `keys` in one project's saves: `snapshots` (as
    `Observations.add_history` takes them, every row's decisions read) and `decisions` as saved
    (as `add_decisions` takes them). Every text a row holds counts: each is the project's own."""
    wanted, latest = set(keys), {}

    def said(key: str | None, at: str, surface: str) -> None:
        if key in wanted and (key not in latest or (at, surface) > latest[key]):
            latest[key] = (at, surface)

    for row in decisions:
        said(key_of("decision", row["decision"]), row["observed_at"], row["decision"])
    for _, _, at, notes, decided in snapshots:
        for decision in decided or ():
            said(key_of("decision", decision), at, decision)
        for sentence in text.sentences(notes):
            said(cluster_key("note", sentence), at, sentence)
    return {key: surface.strip() for key, (_, surface) in latest.items()}


def _source(project_id: str, session: int | str) -> str:
    return f"session:{project_id}:{session}"


class _Entered:
    """The active lessons that entered since a kept run (added, changed or made active): could one
    of them hold a text (see `_Holders`)?"""

    def __init__(self, lessons: list[Lesson]):
        self.words = [set(text.content_tokens(source(lesson))) for lesson in lessons]
        self.postings: dict[str, list[int]] = defaultdict(list)
        for number, words in enumerate(self.words):
            for word in words:
                self.postings[word].append(number)
        self.actions = {normalize_whole(lesson.action) for lesson in lessons}

    def may_hold(self, normalized: str, keywords: list[str]) -> bool:
        """`normalized`: the text `normalize_whole`d; `keywords`: its distinct keywords."""
        if normalized in self.actions:
            return True
        if not keywords:
            return False
        need = math.ceil(HELD * len(keywords) - 1e-9)
        # a lesson holding `need` of the words holds one of the len - need + 1 rarest among them (the
        # words no such lesson holds the rarest of all)
        found = [self.postings[word] for word in keywords if word in self.postings]
        room = len(found) - need + 1
        if room <= 0:
            return False
        rarest = sorted(found, key=len)[:room] if room < len(found) else found
        wanted = set(keywords)
        return any(len(wanted & self.words[number]) >= need for number in set().union(*rarest))


class _Holders:
    """Which active lesson holds a text: the most recent whose normalized action equals it, else the
    one holding the largest share (at least HELD) of its keywords in its trigger, action and tags,
    the most recent among equals (how knowledge extraction judges a decision captured)."""

    def __init__(self, active: list[Lesson], words: LessonWords | None = None, full: text.Memo | None = None,
                 wholes=None):
        """`words`: the index of these very lessons, when the cycle has it; `wholes`: the digests of
        their normalized actions (`pattern_kept.text_digest`, a numpy array of 16-byte strings),
        when known."""
        self.index = LessonWords.over(active, words) if words is not None else None
        self.lessons = active
        self._full = full
        self._wholes = wholes
        self._equal: dict[bytes, int] | None = None  # made on first use
        self._rank = None  # each lesson's place by recency, made when first needed

    def _recency(self, number: int) -> tuple[str, str]:
        lesson = self.lessons[number]
        return lesson.created_at, lesson.id

    def holding(self, surface: str) -> Lesson | None:
        number = self.holding_number(surface)
        return None if number is None else self.lessons[number]

    def holding_number(self, surface: str) -> int | None:
        """The number of the lesson holding `surface`, or None."""
        import numpy as np

        if self._equal is None:  # the lessons' normalized actions' digests, sorted, and their numbers
            wholes = self._wholes
            if wholes is None:
                full = self._full if self._full is not None else text.Memo(normalize_whole)
                wholes = np.array([text_digest(full[lesson.action]) for lesson in self.lessons], dtype="S16")
            order = np.argsort(wholes, kind="stable")
            self._equal = (wholes[order], order)
        ordered, numbers = self._equal
        said = np.array([text_digest(normalize_whole(surface))], dtype="S16")
        low, high = np.searchsorted(ordered, said, "left")[0], np.searchsorted(ordered, said, "right")[0]
        if high > low:
            return max(numbers[low:high].tolist(), key=self._recency)
        words = list(dict.fromkeys(text.keywords(surface)))
        if not words:
            return None
        need = math.ceil(HELD * len(words) - 1e-9)
        # How many of the words each lesson holds, counted in one array; among the highest counts,
        # the most recent lesson.
        if self.index is None:
            self.index = LessonWords(self.lessons)
        found = [numbers for numbers in map(self.index.of, words) if len(numbers)]
        if len(found) < need:
            return None
        counts = np.zeros(len(self.lessons), dtype=np.int16)
        for numbers in found:
            counts[numbers] += 1
        best = int(counts.max())
        if best < need:
            return None
        tied = np.flatnonzero(counts == best)
        if len(tied) <= 64:
            return max(tied.tolist(), key=self._recency)
        if self._rank is None:  # each lesson's place, the most recent first
            by_recency = sorted(range(len(self.lessons)), key=self._recency, reverse=True)
            self._rank = np.empty(len(self.lessons), dtype=np.int64)
            self._rank[by_recency] = np.arange(len(self.lessons))
        return int(tied[np.argmin(self._rank[tied])])


_NONE: frozenset = frozenset()


# -- findings ------------------------------------------------------------------------------------

def _kept(newest: Lesson, live: list[Lesson]) -> tuple[Lesson, str]:
    """The member superseding keeps (the most used, then the most refined, then the most recent)
    and why it is that one."""
    kept = max(live, key=lambda lesson: (lesson.usage_count, lesson.version, lesson.created_at, lesson.id))
    if kept is newest:
        return kept, "the most recent, and no other member was used more"
    if kept.usage_count > newest.usage_count:
        return kept, (f"used {kept.usage_count} times, more than the most recent member "
                      f'"{newest.id}" ({newest.usage_count})')
    return kept, (f"{kept.version} versions, more than the most recent member "
                  f'"{newest.id}" ({newest.version}), at equal use')


def _duplicates_finding(pattern: ReinforcedPattern, newest: Lesson, live: list[Lesson]) -> RemFinding:
    """`newest`: the pattern's canonical; `live`: every active member, oldest first."""
    kept, why = _kept(newest, live)
    others = [lesson for lesson in live if lesson is not kept]
    differ = {lesson.id: differences(kept.trigger, kept.action, lesson.trigger, lesson.action) for lesson in others}
    copies = not any(differ.values())

    endings = any(found.startswith("action") for found in chain.from_iterable(differ.values()))

    def line(lesson: Lesson) -> str:
        said = (f'"{lesson.id}" - {text.shorten(lesson.trigger, 100)} (added {lesson.created_at[:10]}, '
                f"used {lesson.usage_count} times, version {lesson.version})")
        if endings:
            said += f'\n  its action ends "…{_ending(lesson.action)}"'
        if differ.get(lesson.id):
            said += "\n  not a copy, it differs in: " + "; ".join(differ[lesson.id])
        if lesson.version > kept.version:
            said += f"\n  refined more than the kept one (its {lesson.version} versions stay in its history)"
        return said

    n = len(others)
    if copies:
        title = f'Lesson added {pattern.reinforcement_count} times: "{text.shorten(kept.action, 70)}"'
        head = [f'The same lesson was added {pattern.reinforcement_count} times (pattern {pattern.id}); '
                f"{n + 1} copies are active, equal in trigger and action up to case, spacing and punctuation:"]
        tail = f'Superseding them keeps "{kept.id}" (tags, examples and links merged in).'
    else:
        title = (f"{n + 1} lessons begin their action alike but are not copies: " if endings else
                 f"{n + 1} lessons give one action under different triggers: ") + f'"{text.shorten(kept.action, 60)}"'
        shared = (f"the first {KEY_LENGTH} characters of their action" if len(normalize(kept.action)) == KEY_LENGTH
                  else "their action up to case and spacing")
        head = [f"{n + 1} active lessons share {shared} (pattern {pattern.id}), but not all are copies:"]
        tail = ("Superseding them would drop the situations and wording that differ from retrieval "
                "(one undo takes it back); keeping them all is recommended.")
    lines = [*head, f'"{text.shorten(kept.action, 200)}"', "",
             f"Kept if superseded ({why}):", "- " + line(kept),
             "The others:", *("- " + line(lesson) for lesson in others), "", tail]
    options = [
        FindingOption(label=f"Supersede the {n} other cop{'y' if n == 1 else 'ies'}" if copies else
                      f"Supersede the {n} other lesson{'' if n == 1 else 's'} (not copies)",
                      action="supersede_duplicates",
                      description=f'Mark each of them superseded by "{kept.id}"; one undo takes it back'),
        FindingOption(label="Keep them all", action="keep",
                      description="Remember this answer; not raised again unless one of them changes"),
        FindingOption(label="Skip for now", action="skip", description="Leave this finding pending"),
    ]
    subject = subject_of(kept, *others)
    return RemFinding(
        operation=OPERATION, kind="reinforced_duplicates", title=title,
        description="\n".join(lines), options=options, recommended=1 if copies else 2,
        data={"pattern": pattern.id, "category": "lesson", "count": pattern.reinforcement_count,
              "canonical": kept.id, "others": [lesson.id for lesson in others], "kept_because": why,
              "normalized_equal": copies, "differences": {k: v for k, v in differ.items() if v},
              "lessons": {lesson.id: {"trigger": lesson.trigger, "action": lesson.action,
                                      "created_at": lesson.created_at, "version": lesson.version,
                                      "usage_count": lesson.usage_count}
                          for lesson in (kept, *others)}},
        subject=subject, fingerprint=fingerprint(OPERATION, "reinforced_duplicates", subject_identity(subject)))


def _ending(action: str, width: int = 80) -> str:
    """The last `width` characters of an action, spacing collapsed."""
    said = " ".join(action.split())
    return said[-width:].lstrip()


def _draft_finding(pattern: ReinforcedPattern, project_id: str, count: int, said: str, members: list[_Member],
                   paths: dict[str, str], full: bool = True) -> RemFinding:
    """The project's draft of a pattern: `count` its sessions, `said` its wording, `members` its
    own. `full` False: only what a summary of the findings beyond the cap reads (kind, title, count)."""
    category = pattern.category
    noun = "decision" if category == "decision" else "note"
    title = f'{noun.capitalize()} recurring in {count} sessions, no lesson holds it: "{text.shorten(said, 60)}"'
    fingerprint_ = fingerprint(OPERATION, "reinforced_draft", f"{project_id}|{pattern.cluster_key}")
    if not full:
        return RemFinding(operation=OPERATION, kind="reinforced_draft", title=title, description="", options=[],
                          data={"pattern": pattern.id, "category": category, "count": count},
                          fingerprint=fingerprint_)
    by_project: dict[str, list[int]] = defaultdict(list)
    for member in members:
        by_project[member.project_id].append(member.session)
    where = "; ".join(f"{paths.get(pid, pid)}: sessions {_numbers(sorted(set(s)))}" for pid, s in by_project.items())
    words = [w for w in text.tokenize(said) if w not in text.STOP_WORDS | text.CODING_STOP_WORDS][:6]
    draft = {
        "id": text.slug(said),
        "trigger": ("When deciding about " if category == "decision" else "When working on ") + " ".join(words),
        "action": said,
        "rationale": f"Reinforced: this {noun} recurred in {count} sessions ({where}).",
        "tags": text.keyword_words(said)[:4],
    }
    description = "\n".join([
        f'This {noun} recurred in {count} sessions and no lesson holds it (pattern {pattern.id}):',
        f'"{text.shorten(said, 200)}"', "", f"Sessions: {where}", "",
        "Should it become a lesson?"])
    return RemFinding(
        operation=OPERATION, kind="reinforced_draft",
        title=title, description=description, options=draft_options(draft["id"]), recommended=1,
        data={"pattern": pattern.id, "category": category, "text": said, "count": count,
              "sessions": [{"project_id": pid, "project": paths.get(pid, pid), "sessions": sorted(set(s))}
                           for pid, s in by_project.items()],
              "draft": draft},
        fingerprint=fingerprint_)


def _numbers(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:MAX_SESSIONS_SHOWN])
    return shown + (f" and {len(numbers) - MAX_SESSIONS_SHOWN} more" if len(numbers) > MAX_SESSIONS_SHOWN else "")
