"""community_detection: Louvain communities over the lesson graph, compared with the previous run.

The graph (nodes: the active lessons; undirected, weights add up):
- explicit relationships between active lessons weigh 1.0 (a lesson's parent is one, as the store
  reads it; a relationship to a lesson not in the input counts for nothing);
- text similarity >= `similarity_edge_threshold` adds `similarity_edge_weight` between a lesson and
  its `NEIGHBOURS` nearest lessons (`SimilarityBackend.nearest`: a sparse nearest-neighbour graph,
  linear in the corpus; the lexical backend finds the neighbours through shared distinctive words);
- each shared tag carried by at most `max_tag_frequency` lessons adds `shared_tag_weight`.
The graph is held as numpy arrays over the lessons' places in id order (`_Graph`), never as a dict
per lesson: at 100k lessons it has about 700k edges. The lexical backend's TF-IDF matrix lives only
through the neighbour search, and of thousands of orphans only those shown are made into findings
(the rest are counted in the capped summary, from the same fields).

Louvain (python-louvain, `random_state=seed`, nodes and edges added in sorted order, so the same
graph always gives the same partition) runs on each connected part of the graph on its own, with the
rest of the graph standing by as one node that carries its weight: the modularity gain of every move
is then the gain it has in the whole graph (no community spans two parts anyway), but each part
stops when it has converged instead of waiting for the slowest one (benchmarks/README.md has the
figures).

Communities of two or more members are returned with an id (sha256 of the sorted member ids, 12
hex), a title (a phrase the members share, else their most distinctive words) and an extractive
summary (the most central members' triggers).
`graph_hash` covers the edges, the member versions, the settings that shape the partition and the
findings answered "don't ask again" (which change what the capped findings show).

Findings (clusters first, then orphans with suggestions, then without; at most `max_findings` of
each kind, spread over topics and tags, the rest in one summary: see `mgcp.operations.cap`):
- `unlinked_cluster`: a community of `min_cluster_size`..MAX_LINKABLE members where explicit links
  connect fewer than half of them. Actions: link_all (recommended), link_subset (multi_select =
  members), keep ("coincidentally similar", remembered), skip.
- `orphan`: an active lesson with no explicit relationship in either direction (a parent or a child
  is one; and not in an unlinked cluster reported in the same run), with up to 3 suggested targets:
  the lessons most alike in text among its own search's candidates, at least SUGGEST_AT alike (the
  strongest inferred edges when the backend keeps no candidates). Actions: link_suggested
  (recommended when there are suggestions), link_subset (multi_select = suggestions), keep
  (recommended when there are none), skip.
Merges, splits, new and dissolved clusters are reported in `changes`, not as findings.

Kept between runs (`Kept`, stored by the engine; a cache: without it a run is a full run). Per
lesson (`KeptLessons`, arrays over the lessons in id order, stored as one binary state): a digest of
what the graph reads of it (its text, tags and links), its text neighbour candidates with the score
of each candidate pair (`similarity.nearest_in`), its community label and a digest of its edges;
per community of the last run: its title, by a digest of the members (ids and contents) it was
drawn from. A run given the state of an earlier run with the same settings is *incremental*,
unless it is the `full_every`-th run since the last full one (a full run then resets the drift;
`full_every` 1 or less: every run is full):
- only the lessons added or changed, and those left with fewer than `NEIGHBOURS` candidates by
  candidates gone, search for candidates again (against all lessons); the others keep their
  candidates less those gone (a candidate changed stays one). A candidate pair with a lesson
  changed or searching again at either end is scored anew, and a pair of two lessons that kept
  their candidates keeps its kept score;
- the partition starts from the kept labels (a new lesson on its own) and Louvain's local moving
  phase runs from the lessons whose edges changed and their neighbours, then from the neighbours
  of each lesson that moves, until no move gains modularity; a community left in pieces is split
  into them; the rest of the partition stays as it was;
- a community whose title would be drawn from the very members, with the very texts, that a kept
  title was drawn from (its `TITLE_SAMPLE` most central members) keeps that title; the others are
  titled anew. Every summary is written anew (it needs no corpus statistics).
What titles are drawn from, as read from the lessons, is kept too (`Kept.readings`, each lesson
known by its content digest, whatever the settings): every lesson's keywords, which the idf counts
(`_idf`, `_Keywords`), and each title sample member's phrases (`_Phrases`); each is kept again only
once it is more than a share `shared.BEHIND` behind (the keywords: the lessons they lack and those
they hold no longer; the phrases: the sample members they lack). A run,
incremental or full, reads only the texts of lessons added or changed since they were kept; what it
takes from these is exactly what reading the texts gives (the same idf, the same phrases), so they
add no drift.
What may drift from a full run on the same data: an unchanged lesson does not see a better
candidate that arrived after its search (the newcomer's own search usually finds it), nor the
candidate a search now would propose in place of one gone or changed (its edges are still the
best `NEIGHBOURS` of the candidates it holds, each scored as it reads now where an end changed); a
kept candidate score was taken with the idf of the run that scored it (as a kept title was drawn with
the keywords' idf of its run: see below), so where two of a lesson's pairs scored within that
drift of each other, or a pair within it of `similarity_edge_threshold`, the edges chosen may
differ from a full run's; communities are not merged or rebuilt at the aggregated level until the
next full run; and a kept title was drawn with the keywords' idf of its run. The idf only breaks
ties between phrases used by as many members and orders the words of a title made of words; a
change of c lessons moves a keyword's idf = ln((1 + n) / (1 + df)) + 1 by at most about
c / (1 + df) + c / (1 + n), so a kept title differs from one drawn now only where two candidates
were within that of each other (it grows with the lessons changed since, until a full run draws
every title and scores every pair anew). A kept pair score moves with its words' idf in the same
way (each word's weight is its tf times its idf, normalised over the lesson's words). Apart from
the idf, a title differs from a full run's where the edges drifted: they choose a community's most
central members, the sample its title is drawn from.
`tests/test_community_incremental.py` bounds the drift (modularity, membership, and kept titles
against titles drawn anew); benchmarks/README.md gives the figures.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from functools import lru_cache, partial
from itertools import chain, islice, repeat
from operator import attrgetter
from pathlib import Path
from types import SimpleNamespace

from mgcp import text
from mgcp.models import FindingOption, Lesson, RemFinding
from mgcp.operations import cap, copies, fingerprint, framed, lesson_text, subject_identity, subject_of
from mgcp.collector import collector_paused, collector_running
from mgcp.operations.shared import BEHIND, WORDS, CycleCache, joined_terms, stage, tf_idf, ticker
from mgcp.operations.similarity import Candidates, LexicalBackend, SimilarityBackend

OPERATION = "community_detection"
EXPLICIT_WEIGHT = 1.0
MAX_LINKABLE = 12       # larger communities are themes, not a set of lessons to link pairwise
MAX_SUGGESTIONS = 3
# The least text similarity of a lesson an orphan is offered a link to (its own search's candidates,
# whole texts compared: trigger, action and tags); a shared tag alone suggests nothing.
SUGGEST_AT = 0.1
NEIGHBOURS = 5          # inferred text edges per lesson
TITLE_SAMPLE = 40       # members a community's title is drawn from
KEPT_RULES = 6          # how the kept state is made (`_content`, `_Graph.digests`, `_sample_key`): others are not used
_OWN = Path(__file__).read_bytes()
# how each lesson's keywords are read for the idf (`_idf`, `_Keywords`: this module, and the words' rules)
KEYWORD_RULES = hashlib.blake2b(b"community keywords\0" + _OWN + WORDS, digest_size=16).digest()
# how a title sample member's phrases are read and kept (`_member_phrases`, `_Phrases`, and the words' rules)
PHRASE_RULES = hashlib.blake2b(b"community phrases\0" + _OWN + WORDS, digest_size=16).digest()
# how the kept candidates' pair scores are made: the words' rules and the code that weighs and scores
# the texts (this module, `shared`, `similarity`, `sparse`); kept under other rules, a state is not used
SCORE_RULES = hashlib.blake2b(
    b"community scores\0" + WORDS + _OWN
    + b"".join(Path(__file__).with_name(f"{name}.py").read_bytes() for name in ("shared", "similarity", "sparse")),
    digest_size=16).hexdigest()


@dataclass
class CommunityResult:
    findings: list[RemFinding]
    communities: list[dict]
    graph_hash: str
    modularity: float
    changes: dict = field(default_factory=lambda: {"new": [], "merged": [], "split": [], "dissolved": []})
    unchanged: bool = False
    kept: "Kept | None" = None   # what the next run starts from (None: nothing new to keep)
    incremental: bool = False
    described: int = 0           # communities described anew (the others kept their description)


@dataclass
class Kept:
    """What a run keeps for the next (see the module docstring)."""
    settings: str                # digest of what shapes the graph and the partition
    runs_since_full: int         # incremental runs since the last full one
    lessons: "KeptLessons | None"  # None: none usable (a run is then a full run)
    titles: dict[str, str] = field(default_factory=dict)  # `_sample_key` -> the title drawn from it
    # what the titles are drawn from, read from the lessons: "keywords" (`_Keywords.state`) and
    # "phrases" (`_Phrases.state`); what a run returns holds only those it keeps again (see the
    # module docstring: the others stay as they were kept)
    readings: dict[str, bytes] = field(default_factory=dict)


def community_id(member_ids: list[str]) -> str:
    return hashlib.sha256(",".join(sorted(member_ids)).encode()).hexdigest()[:12]


@collector_paused()
def run(lessons: list[Lesson], previous: list[dict] | None, settings: dict,
        previous_hash: str | None = None, previous_modularity: float = 0.0,
        cache: CycleCache | None = None, backend: SimilarityBackend | None = None,
        settled: frozenset[str] = frozenset(), kept: Kept | None = None) -> CommunityResult:
    """`previous`, `previous_hash`, `previous_modularity`: the last stored run, if any. When the
    graph hashes the same, Louvain is not run again and the result says `unchanged`. `settled`:
    findings answered "don't ask again" (see `mgcp.operations.cap`); they are part of the hash, so
    that such answers make room for the next findings. `kept`: what an earlier run kept (see the
    module docstring); the result's `kept` is what this one keeps. `backend`: None for the
    lexical backend (made for this run, and let go with its matrix once the neighbours are found)."""
    import numpy as np

    ordered = sorted(lessons, key=lambda lesson: lesson.id)
    ids = [lesson.id for lesson in ordered]
    by_id = {lesson.id: lesson for lesson in ordered}
    lexical = backend is None or isinstance(backend, LexicalBackend)
    key = _settings_key(settings, type(backend).__name__ if backend is not None else LexicalBackend.__name__)
    content = _contents(ordered)
    joined = _joined(content, ids)
    incremental = (kept is not None and kept.lessons is not None and kept.settings == key and lexical
                   and kept.runs_since_full + 1 < int(settings.get("full_every", 10)))
    if incremental:
        place, candidates, stale = kept.lessons.renumbered(ids, joined)
        graph = _edges(ordered, settings, backend, cache, candidates, stale)
    else:
        graph = _edges(ordered, settings, backend, cache)

    graph_hash = _graph_hash(graph, ordered, settings, settled)
    if graph_hash == previous_hash:
        return CommunityResult(findings=[], communities=previous or [], graph_hash=graph_hash,
                               modularity=previous_modularity, unchanged=True)
    edge_digests = graph.digests(ids)

    resolution = float(settings.get("resolution", 1.0))
    if incremental:
        known = place >= 0
        labels = np.full(len(ids), -1, dtype=np.int64)
        labels[known] = kept.lessons.label[place[known]]
        same = np.zeros(len(ids), dtype=bool)
        same[known] = kept.lessons.edges[place[known]] == edge_digests[known]
        moved = np.flatnonzero(~same)
        labels = _move_locally(graph, labels, moved.tolist(), resolution)
    else:
        labels = partition_with(louvain(settings))(graph, ids, resolution, int(settings.get("seed", 42)))
    by_label = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.r_[True, labels[by_label][1:] != labels[by_label][:-1], True]) if len(ids) else []
    groups = [by_label[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:]) if hi - lo >= 2]
    groups.sort(key=lambda members: (-len(members), int(members[0])))  # members ascending: ids sorted
    kept_titles = kept.titles if incremental else {}
    idf: dict[str, float] | None = None
    keywords = None  # each lesson's keywords the idf was counted from, when it was
    readings = kept.readings if kept is not None else {}
    phrases = _Phrases(readings.get("phrases"), content)
    sampled: list[str] = []  # the members of every title sample
    communities, titles, described = [], {}, 0
    centrality = graph.centrality(labels) if groups else None
    for group in groups:
        members = list(map(ids.__getitem__, group.tolist()))
        central = list(map(ids.__getitem__, graph.central(group, centrality)))
        sample = sorted(central[:TITLE_SAMPLE])
        drawn_from = _sample_key(sample, content)
        title = kept_titles.get(drawn_from)
        if title is None:
            if idf is None:
                idf, keywords = _idf(ordered, content, readings.get("keywords"), joined)
            title = _title(sample, by_id, idf, phrases)
            described += 1
        titles[drawn_from] = title
        sampled += sample
        communities.append(_describe(members, central, by_id, title))
    changes = compare(previous, communities)
    new_ids = set(changes["new"])

    # the explicit links of the lessons in communities small enough to be asked about
    small = np.zeros(len(ids), dtype=bool)
    for group in groups:
        if len(group) <= MAX_LINKABLE:
            small[group] = True
    explicit_adj: dict[str, set[str]] = defaultdict(set)
    ea, eb = graph.explicit_pairs()
    near = small[ea] | small[eb]
    for a, b in zip(ea[near].tolist(), eb[near].tolist()):
        explicit_adj[ids[a]].add(ids[b])
        explicit_adj[ids[b]].add(ids[a])
    linked_at_all = np.zeros(len(ids), dtype=bool)
    linked_at_all[ea] = linked_at_all[eb] = True

    # Copies of one rule are merges (duplicate detection raises them), not lessons to link: a
    # cluster counts its distinct actions, and a copy is not raised as an orphan.
    copy_of = copies(ordered, cache)
    cluster_findings = []
    for c in communities:
        size = len(c["member_ids"])
        distinct = len({copy_of.get(m, m) for m in c["member_ids"]})
        if not settings.get("min_cluster_size", 3) <= distinct <= MAX_LINKABLE or size > MAX_LINKABLE:
            continue
        linked = _largest_component(c["member_ids"], explicit_adj)
        if len(linked) * 2 >= size:
            continue
        cluster_findings.append(_cluster_finding(c, by_id, linked, explicit_adj, c["community_id"] in new_ids))

    in_clusters = {m for f in cluster_findings for m in f.data["members"]}
    unlinked = np.flatnonzero(~linked_at_all)
    suggestions = (graph.strongest(MAX_SUGGESTIONS, unlinked) if graph.proposed is None
                   else graph.closest(MAX_SUGGESTIONS, unlinked, SUGGEST_AT))
    orphans = []
    for i in unlinked.tolist():
        lesson = ordered[i]
        if lesson.id in in_clusters or lesson.id in copy_of:
            continue  # members of an unlinked cluster are asked about once, as the cluster
        suggested, strength = suggestions(i)
        orphans.append((not suggested, -strength, lesson.id,
                        _Orphan(lesson, [by_id[ids[s]] for s in suggested])))
    orphans.sort(key=lambda x: x[:3])

    def group_of(finding) -> str:  # what a capped selection spreads over
        if finding.kind == "orphan":
            return min(finding.lesson.tags if isinstance(finding, _Orphan) else by_id[finding.data["lesson"]].tags,
                       default="")
        return finding.data["topic"]

    limit = int(settings.get("max_findings", 50))
    # `cap` takes each kind on its own: the orphans are capped as stand-ins, and only those shown are
    # made into findings (the rest are counted in the summary)
    findings = (cap(cluster_findings, limit, group_of, settled)
                + [f.finding() if isinstance(f, _Orphan) else f
                   for f in cap([o for *_, o in orphans], limit, group_of, settled)])
    new_kept = None
    if graph.proposed is not None:
        new_kept = Kept(key, kept.runs_since_full + 1 if incremental else 0,
                        KeptLessons(ids, joined, labels, edge_digests, graph.proposed), titles)
        # a reading is kept again only once what is kept lacks more than a few of what it would
        # hold (`shared.BEHIND`): the next run reads those few again, as this one did
        if keywords is not None and keywords.behind > BEHIND * len(ids):
            new_kept.readings["keywords"] = keywords.state()
        if phrases.fresh and phrases.fresh > BEHIND * len(set(sampled)):
            new_kept.readings["phrases"] = phrases.state(sampled)
    return CommunityResult(findings=findings, communities=communities, graph_hash=graph_hash,
                           modularity=graph.modularity(labels), changes=changes,
                           kept=new_kept, incremental=incremental, described=described)


# -- kept between runs ---------------------------------------------------------------------------

class KeptLessons:
    """Each lesson's kept row (see the module docstring), as arrays over `ids` (sorted): its content
    digest (`_content`; `content` holds a row of words per lesson, as `_joined` makes them), its
    community `label`, the digest of its `edges` (`_Graph.digests`) and
    its text neighbour candidates with the scores of their pairs (`similarity.Candidates`, over
    places in `ids`). `state` is what is stored; `read` gives it back, or None when it is not
    usable (cut short, damaged, or made by other rules)."""

    __slots__ = ("ids", "content", "label", "edges", "candidates")

    def __init__(self, ids: list[str], content, label, edges, candidates: Candidates):
        self.ids, self.content, self.label, self.edges, self.candidates = ids, content, label, edges, candidates

    def state(self) -> bytes:
        import numpy as np

        found = self.candidates
        return framed.frame({"rules": KEPT_RULES}, [
            json.dumps(self.ids).encode(), self.content.tobytes(), self.label.astype("<i8").tobytes(),
            self.edges.astype("<u8").tobytes(), np.diff(found.start).astype("<i4").tobytes(),
            found.other.astype("<i4").tobytes(), found.score.astype("<f8").tobytes()])

    @classmethod
    def read(cls, state: bytes | None) -> "KeptLessons | None":
        import numpy as np

        from mgcp.operations.sparse import starts

        read = framed.unframe(state, 7)
        if read is None or read[0].get("rules") != KEPT_RULES:
            return None
        head, content, label, edges, lengths, other, score = read[1]
        try:
            ids = json.loads(head)
        except ValueError:
            return None
        n = len(ids) if isinstance(ids, list) else -1
        if (not _strings(ids) or len(content) != DIGEST * n or len(label) != 8 * n
                or len(edges) != 8 * n or len(lengths) != 4 * n or len(other) % 4 or len(score) != 2 * len(other)
                or not all(map(str.__lt__, ids, islice(ids, 1, None)))):
            return None
        lengths = np.frombuffer(lengths, dtype="<i4").astype(np.int64)
        other = np.frombuffer(other, dtype="<i4").astype(np.int64)
        score = np.frombuffer(score, dtype="<f8").astype(np.float64)
        start = starts(lengths)
        owner = np.repeat(np.arange(n, dtype=np.int64), np.maximum(lengths, 0))
        if (lengths.min(initial=0) < 0 or start[-1] != len(other) or other.min(initial=0) < 0
                or other.max(initial=-1) >= n or (owner == other).any() or not np.isfinite(score).all()):
            return None
        label = np.frombuffer(label, dtype="<i8").astype(np.int64)
        if label.min(initial=0) < 0:
            return None
        return cls(ids, np.frombuffer(content, dtype=np.uint64).reshape(-1, DIGEST // 8), label,
                   np.frombuffer(edges, dtype="<u8").astype(np.uint64), Candidates(start, other, score))

    def renumbered(self, ids: list[str], content):
        """For the lessons `ids` (sorted) with their `content` digests now (`_joined`): each one's
        place in the kept rows (-1: none), the kept candidates renumbered to places in `ids` (-1: a
        lesson gone), and whether each is stale (new, or changed since)."""
        import numpy as np

        from mgcp.operations.sparse import starts

        index = dict(zip(ids, range(len(ids))))
        now = np.fromiter(map(index.get, self.ids, repeat(-1)), dtype=np.int64, count=len(self.ids))
        remain = np.flatnonzero(now >= 0)
        place = np.full(len(ids), -1, dtype=np.int64)
        place[now[remain]] = remain
        stale = np.ones(len(ids), dtype=bool)
        stale[now[remain[(self.content[remain] == content[now[remain]]).all(axis=1)]]] = False
        found = self.candidates
        owner = np.repeat(now, np.diff(found.start))
        held = owner >= 0  # both lists are sorted by id, so the rows still there stay in order
        candidates = Candidates(starts(np.bincount(owner[held], minlength=len(ids))), now[found.other[held]],
                                found.score[held])
        return place, candidates, stale


def _settings_key(settings: dict, backend: str) -> str:
    """What kept state is only valid under: the settings that shape the graph and the partition,
    the backend (its class name), the Louvain implementation and the rules the kept pair scores
    were made by (the engine adds the mgcp version)."""
    shaping = {k: settings.get(k) for k in ("seed", "resolution", "similarity_edge_threshold",
                                            "similarity_edge_weight", "shared_tag_weight", "max_tag_frequency")}
    described = json.dumps([shaping, backend, louvain(settings), NEIGHBOURS, KEPT_RULES, SCORE_RULES], sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()[:16]


DIGEST = 16  # bytes of a lesson's content digest (`_content`)


def _content(lesson: Lesson) -> bytes:
    """A digest of what the graph and the descriptions read of a lesson: text, tags and links
    (`DIGEST` bytes)."""
    return _contents([lesson])[lesson.id]


def _contents(lessons: list[Lesson]) -> dict[str, bytes]:
    """`_content` of each lesson, by id, in one loop (100k lessons). What is digested is the length
    of the trigger, the tags and the link targets (sorted) as Python writes lists of strings
    (`repr`: quoted and escaped, so each list ends where its closing bracket is), the trigger and
    then the action: it reads back as one split into fields only, so no two contents digest alike."""
    blake2b, target, fields = hashlib.blake2b, attrgetter("target"), attrgetter("id", "trigger", "action", "tags",
                                                                                 "relationships")
    out = {}
    for lid, trigger, action, tags, links in map(fields, lessons):
        trigger = trigger or ""
        read = f"{len(trigger)}:{tags!r}{sorted(map(target, links))!r}{trigger}{action or ''}"
        out[lid] = blake2b(read.encode("utf-8", "surrogatepass"), digest_size=DIGEST).digest()
    return out


def _joined(content: dict[str, bytes], ids: list[str]):
    """The content digests of `ids`, one row of `DIGEST` bytes each (a numpy array of 8-byte words)."""
    import numpy as np

    return np.frombuffer(b"".join(map(content.__getitem__, ids)), dtype=np.uint64).reshape(-1, DIGEST // 8)


def _move_locally(graph: "_Graph", kept_labels, start: list[int], resolution: float):
    """Louvain's local moving phase from `kept_labels` (a numpy array: a node's label, or -1: it
    starts on its own): the nodes of `start` and their neighbours are visited first (in that order,
    then in node order), then the neighbours of every node that moves, until no move gains
    modularity. A node moves to the neighbouring community with the highest gain (ties to the lower
    label) when that beats staying. Communities a visited node belonged to are then split into their
    connected pieces. Returns the labels as a numpy array."""
    import numpy as np

    fresh = int(kept_labels.max(initial=-1)) + 1
    alone = np.flatnonzero(kept_labels < 0)
    labels = kept_labels.copy()
    labels[alone] = fresh + np.arange(len(alone))
    fresh += len(alone)
    degree = graph.degree.tolist()
    two_m = sum(degree)
    if not two_m:
        return labels
    # each community's degree, summed in node order (as bincount adds its weights)
    total = np.bincount(labels, weights=graph.degree, minlength=fresh).tolist()
    labels = labels.tolist()
    first = list(dict.fromkeys(start))
    seen = set(first)
    first += sorted({n for node in first for n in graph.neighbours(node)[0]} - seen)
    queue, queued = deque(first), set(first)
    touched: set[int] = set()
    steps = 0
    while queue and steps < 50 * len(labels):  # each move gains modularity; the cap is a guard
        steps += 1
        node = queue.popleft()
        queued.discard(node)
        current = labels[node]
        touched.add(current)
        links: dict[int, float] = defaultdict(float)
        neighbours, weights = graph.neighbours(node)
        for n, w in zip(neighbours, weights):
            links[labels[n]] += w
        total[current] -= degree[node]
        scale = resolution * degree[node] / two_m
        best, best_gain = current, links.get(current, 0.0) - total[current] * scale
        for label in sorted(links):
            gain = links[label] - total[label] * scale
            if gain > best_gain + 1e-12:
                best, best_gain = label, gain
        total[best] += degree[node]
        if best != current:
            labels[node] = best
            touched.add(best)
            for n in neighbours:
                if n not in queued:
                    queued.add(n)
                    queue.append(n)
    return _split(graph, np.array(labels, dtype=np.int64), sorted(touched), fresh)


def _split(graph: "_Graph", labels, split: list[int], fresh: int):
    """`labels` with each community of `split` left in pieces split into them: the piece with its
    lowest node keeps the label, the others take labels from `fresh` on (community after community
    in label order, pieces in the order of their lowest nodes)."""
    import numpy as np

    from mgcp.operations.sparse import distinct

    held = np.isin(labels, np.array(split, dtype=np.int64))
    inside = held[graph.a] & (labels[graph.a] == labels[graph.b])
    piece = _components(graph.n, graph.a[inside], graph.b[inside])
    nodes = np.flatnonzero(held)
    n = max(graph.n, 1)
    pairs = distinct(labels[nodes] * n + piece[nodes])  # each community's pieces, by their lowest node
    label, lowest = pairs // n, pairs % n
    extra = lowest[np.r_[False, label[1:] == label[:-1]]] if len(pairs) else lowest
    new = np.full(graph.n, -1, dtype=np.int64)
    new[extra] = fresh + np.arange(len(extra))
    moved = new[piece[nodes]]
    labels[nodes[moved >= 0]] = moved[moved >= 0]
    return labels


# -- graph ---------------------------------------------------------------------------------------

_REST = ""  # the rest of the graph in a part's Louvain run; never a lesson id


class _Graph:
    """The lesson graph as numpy arrays over the lessons' places in id order (nodes 0..n-1): each
    edge once, a < b, sorted by (a, b) (so by the lessons' ids), with its weight; each node's
    neighbours ascending (`start`, `neighbour`, `weight_at`, like a CSR matrix). `explicit`: the
    codes (a * n + b) of the explicit pairs; `proposed`: each lesson's text candidates and the
    scores of their pairs (`similarity.Candidates`), or None when the backend does not keep them."""

    def __init__(self, n: int, a, b, w, explicit, proposed: Candidates | None):
        import numpy as np

        self.n, self.a, self.b, self.w, self.explicit, self.proposed = n, a, b, w, explicit, proposed
        from mgcp.operations.sparse import stable_order

        # both ends of edge e at places 2e and 2e + 1: a stable sort by node keeps each node's edges
        # in edge order, which is its neighbours ascending (those below it come first)
        node = np.column_stack([a, b]).reshape(-1)
        order = stable_order(node)
        self.edge_at = order // 2
        self.neighbour = np.column_stack([b, a]).reshape(-1)[order]
        self.weight_at = w[self.edge_at]
        node = node[order]
        self.start = np.searchsorted(node, np.arange(n + 1))
        # each node's weight, summed in neighbour order as `sum` over its neighbours would
        self.degree = np.bincount(node, weights=self.weight_at, minlength=n)

    def neighbours(self, node: int) -> tuple[list[int], list[float]]:
        lo, hi = self.start[node], self.start[node + 1]
        return self.neighbour[lo:hi].tolist(), self.weight_at[lo:hi].tolist()

    def explicit_pairs(self):
        return self.explicit // max(self.n, 1), self.explicit % max(self.n, 1)

    def digests(self, ids: list[str]):
        """Each node's digest of its edges (a numpy uint64 array): a 64-bit sum over its edges of a mix of the
        neighbour's id (its own 64-bit digest) and the edge's weight (its bits), mixed once more
        with the number of edges. Two different sets of edges digest alike with a chance of about
        2^-64, so a node whose digest is kept unchanged has its edges unchanged."""
        import numpy as np

        digest = partial(hashlib.blake2b, digest_size=8)
        of_id = np.frombuffer(b"".join(map(hashlib.blake2b.digest, map(digest, map(str.encode, ids)))), dtype="<u8")
        of_id = of_id.astype(np.uint64)
        entry = _mix(of_id[self.neighbour] ^ _mix(self.weight_at.view(np.uint64)))
        summed = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(entry, dtype=np.uint64)])
        node = _mix((summed[self.start[1:]] - summed[self.start[:-1]]) ^ np.diff(self.start).astype(np.uint64))
        return node

    def centrality(self, labels):
        """Each node's weight of its edges inside its community (a label per node), summed exactly
        (`math.fsum`), as a numpy array."""
        import numpy as np

        owner = np.repeat(np.arange(self.n), np.diff(self.start))
        inside = labels[self.neighbour] == labels[owner]
        weights = self.weight_at[inside].tolist()
        cut = np.searchsorted(owner[inside], np.arange(self.n + 1)).tolist()
        return np.fromiter(map(math.fsum, map(weights.__getitem__, map(slice, cut[:-1], cut[1:]))),
                           dtype=np.float64, count=self.n)

    @staticmethod
    def central(members, centrality) -> list[int]:
        """The `members` of a community (node numbers, ascending), most central first (`centrality`),
        then by id: they ascend as their ids do, and a stable sort keeps those as central in that order."""
        import numpy as np

        return members[np.argsort(-centrality[members], kind="stable")].tolist()

    def strongest(self, k: int, nodes):
        """A function of each of `nodes` (ascending): (its k strongest neighbours, strongest first,
        ties to the lower; the strongest weight, 0.0 without any)."""
        import numpy as np

        from mgcp.operations.sparse import expand

        entries = expand(self.start, nodes)
        place = np.repeat(np.arange(len(nodes)), self.start[nodes + 1] - self.start[nodes])
        return _best_of_each(nodes, place, self.neighbour[entries], self.weight_at[entries], k)

    def closest(self, k: int, nodes, at_least: float):
        """As `strongest`, from each node's text candidates (`proposed`) instead of its edges: its k
        candidates most alike in text, with a score of at least `at_least`, best first, ties to the
        lower; the best score, 0.0 without any."""
        import numpy as np

        from mgcp.operations.sparse import expand

        proposed = self.proposed
        entries = expand(proposed.start, nodes)
        place = np.repeat(np.arange(len(nodes)), proposed.start[nodes + 1] - proposed.start[nodes])
        other, score = proposed.other[entries], proposed.score[entries]
        keep = (other >= 0) & (score >= at_least - 1e-9) & (other != np.asarray(nodes)[place])
        return _best_of_each(nodes, place[keep], other[keep], score[keep], k)

    def modularity(self, labels) -> float:
        """Newman's modularity of the partition (a label per node): sum over communities of (inner
        weight / m) minus (total degree / 2m) squared; every sum taken in edge or node order."""
        import numpy as np

        m = sum(self.w.tolist())
        if not m:
            return 0.0
        size = int(labels.max(initial=-1)) + 1
        same = labels[self.a] == labels[self.b]
        inner = np.bincount(labels[self.a][same], weights=self.w[same], minlength=size).tolist()
        degree = np.bincount(labels, weights=self.degree, minlength=size).tolist()
        present = np.flatnonzero(np.bincount(labels, minlength=size)).tolist()
        return math.fsum(inner[c] / m - (degree[c] / (2 * m)) ** 2 for c in present)


def _best_of_each(nodes, place, other, weight, k: int):
    """A function of each of `nodes`: (the `other` ends of its k entries of highest `weight`, best
    first, ties to the lower; the best weight, 0.0 without any). `place`: each entry's node, as its
    place in `nodes`."""
    import numpy as np

    order = np.lexsort((other, -weight, place))
    place, other, weight = place[order], other[order], weight[order]
    rank = np.arange(len(place)) - np.searchsorted(place, place)  # each entry's rank within its node's
    top = rank < k
    cut = np.searchsorted(place[top], np.arange(len(nodes) + 1)).tolist()
    other, weight = other[top].tolist(), weight[top].tolist()
    at = dict(zip(nodes.tolist(), range(len(nodes))))

    def of(i: int) -> tuple[list[int], float]:
        lo, hi = cut[at[i]], cut[at[i] + 1]
        return other[lo:hi], (weight[lo] if hi > lo else 0.0)

    return of


def _mix(x):
    """A 64-bit mix of each value (SplitMix64's finaliser), on a numpy uint64 array."""
    import numpy as np

    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def louvain(settings: dict) -> str:
    """The Louvain implementation the `louvain` setting names: "auto" is igraph's compiled one when
    the optional extra is installed (`pip install 'mgcp[fast]'`), else python-louvain. Each gives
    the same partition for the same graph and seed every time; the two may differ from each other."""
    choice = settings.get("louvain", "auto")
    if choice != "auto":
        return choice
    from importlib.util import find_spec

    return "igraph" if find_spec("igraph") else "python-louvain"


def partition_with(name: str):
    if name == "igraph":
        try:
            import igraph  # noqa: F401
        except ImportError:
            raise RuntimeError("community_detection.louvain is 'igraph' but igraph is not installed "
                               "(pip install 'mgcp[fast]')") from None
        return _partition_igraph
    return _partition


def _partition_igraph(graph: _Graph, ids: list[str], resolution: float, seed: int):
    """igraph's multilevel (Louvain) on the whole graph at once, vertices in id order and the
    random choices drawn from a generator seeded with `seed`. A label per node (numpy)."""
    import random

    import igraph
    import numpy as np

    g = igraph.Graph(n=graph.n, edges=np.column_stack([graph.a, graph.b]))
    igraph.set_random_number_generator(random.Random(seed))
    try:
        clustering = g.community_multilevel(weights=graph.w.tolist() or None, resolution=resolution)
    finally:
        igraph.set_random_number_generator(random)
    return np.array(clustering.membership, dtype=np.int64)


def _partition(graph: _Graph, ids: list[str], resolution: float, seed: int):
    """Louvain on each connected part of the graph on its own (see the module docstring). Each part
    is built from sorted nodes and sorted edges, so that no set order (which varies with the hash
    seed from one process to the next) can reach Louvain. A label per node (numpy)."""
    import community as community_louvain
    import networkx as nx
    import numpy as np

    labels = np.zeros(graph.n, dtype=np.int64)
    with collector_running():  # networkx graphs hold reference cycles: freed as the parts go by
        part_of = _parts(graph)
        by_part = np.argsort(part_of, kind="stable")
        cut = np.flatnonzero(np.r_[True, part_of[by_part][1:] != part_of[by_part][:-1], True]) if graph.n else []
        edge_order = np.argsort(part_of[graph.a], kind="stable")  # each part's edges in edge order
        edge_cut = np.searchsorted(part_of[graph.a][edge_order], part_of[by_part][cut[:-1]])
        edge_cut = np.r_[edge_cut, len(edge_order)]
        weights, a, b = graph.w.tolist(), graph.a.tolist(), graph.b.tolist()
        total = sum(weights)
        offset = 0
        for k, (lo, hi) in enumerate(zip(cut[:-1], cut[1:])):
            part = by_part[lo:hi]
            if len(part) <= 2:
                labels[part] = offset  # a lone lesson, or a linked pair
                offset += 1
                continue
            inside = edge_order[edge_cut[k]:edge_cut[k + 1]].tolist()
            sub = nx.Graph()
            sub.add_nodes_from(ids[i] for i in part.tolist())
            sub.add_weighted_edges_from((ids[a[e]], ids[b[e]], weights[e]) for e in inside)
            # The rest of the graph, as one node with a self-loop of its weight: the null model
            # then sees the whole graph's weight, so every move gains what it would in the whole.
            sub.add_edge(_REST, _REST, weight=total - sum(weights[e] for e in inside))
            found = community_louvain.best_partition(sub, weight="weight", resolution=resolution,
                                                     random_state=seed)
            del found[_REST]
            labels[part] = [offset + found[ids[i]] for i in part.tolist()]
            offset += max(found.values()) + 1
    return labels


def _parts(graph: _Graph):
    """Each node's connected part, numbered by the part's lowest node (a numpy array)."""
    return _components(graph.n, graph.a, graph.b)


def _components(n: int, a, b):
    """Each of `n` nodes' connected component under the edges (a, b), numbered by its lowest node."""
    import numpy as np

    label = np.arange(n, dtype=np.int64)
    while True:
        low = np.minimum(label[a], label[b])
        lower = label.copy()
        np.minimum.at(lower, a, low)
        np.minimum.at(lower, b, low)
        lower = lower[lower]  # a label is a node of the part; follow it to its own label
        if np.array_equal(lower, label):
            return label
        label = lower


def _edges(ordered: list[Lesson], settings: dict, backend: SimilarityBackend | None,
           cache: CycleCache | None = None, candidates: Candidates | None = None, stale=None) -> _Graph:
    """The graph of the module docstring over `ordered` (sorted by id). `candidates`, `stale`: see
    `mgcp.operations.similarity.nearest_in`. The weight of an edge is summed as it always was: the
    explicit link first, then the text edge, then each shared tag."""
    import numpy as np

    from mgcp.operations import sparse
    from mgcp.operations.similarity import nearest_in

    n = len(ordered)
    index = dict(zip(map(attrgetter("id"), ordered), range(n)))
    # each link as (its lesson, its target's place, -1 for a lesson not in the input)
    links = list(map(attrgetter("relationships"), ordered))
    source = np.repeat(np.arange(n, dtype=np.int64), np.fromiter(map(len, links), dtype=np.int64, count=n))
    target = np.fromiter(map(index.get, map(attrgetter("target"), chain.from_iterable(links)), repeat(-1)),
                         dtype=np.int64, count=len(source))
    held = (target >= 0) & (target != source)
    low, high = np.minimum(source, target)[held], np.maximum(source, target)[held]
    explicit = sparse.distinct(low * n + high)
    del links, source, target, low, high

    edge_weight = float(settings["similarity_edge_weight"])
    threshold = float(settings["similarity_edge_threshold"])
    proposed = None
    if backend is None or isinstance(backend, LexicalBackend):
        with stage(cache, 0.0, 0.6):  # each text's words, from its trigger's, action's and tags' read once
            tick = ticker(cache)
            triggers = [x or "" for x in map(attrgetter("trigger"), ordered)]
            actions = [x or "" for x in map(attrgetter("action"), ordered)]
            tags = list(map(" ".join, map(attrgetter("tags"), ordered)))

            def read(i: int) -> tuple[str, ...]:
                tick(i, n)
                return joined_terms(cache, [triggers[i], actions[i], tags[i]])

            m = tf_idf(cache, list(map(" ".join, zip(triggers, actions, tags))), read)
            del triggers, actions, tags
        with stage(cache, 0.6, 1.0):
            a, b, _, proposed = nearest_in(m, [lesson.id for lesson in ordered], threshold, NEIGHBOURS,
                                           candidates, stale, ticker(cache))
        del m
    else:
        nearest = backend.nearest({lesson.id: lesson_text(lesson) for lesson in ordered}, threshold, NEIGHBOURS)
        a = np.array([index[x] for x, _, _ in nearest], dtype=np.int64)
        b = np.array([index[y] for _, y, _ in nearest], dtype=np.int64)
    codes = [np.minimum(a, b) * n + np.maximum(a, b)]
    text_edges = len(codes[0])

    by_tag: dict[str, list[int]] = defaultdict(list)
    for i, tags in enumerate(map(attrgetter("tags"), ordered)):
        if tags:
            for tag in sorted({t.lower() for t in tags}):
                by_tag[tag].append(i)
    for tag, members in sorted(by_tag.items()):
        if 2 <= len(members) <= settings["max_tag_frequency"]:
            held = np.array(members, dtype=np.int64)
            x, y = np.triu_indices(len(held), 1)
            codes.append(held[x] * n + held[y])
    codes = np.concatenate(codes)
    values = np.full(len(codes), float(settings["shared_tag_weight"]))
    values[:text_edges] = edge_weight
    # each pair's text and tag weights, summed in that order
    inferred, at = np.unique(codes, return_inverse=True)
    summed = np.bincount(at.reshape(-1), weights=values, minlength=len(inferred))
    del codes, values, at
    pairs = sparse.distinct(np.concatenate([explicit, inferred]))
    w = np.zeros(len(pairs))
    w[np.searchsorted(pairs, explicit)] += EXPLICIT_WEIGHT
    w[np.searchsorted(pairs, inferred)] += summed
    return _Graph(n, pairs // max(n, 1), pairs % max(n, 1), w, explicit, proposed)


def _graph_hash(graph: _Graph, ordered: list[Lesson], settings: dict,
                settled: frozenset[str] = frozenset()) -> str:
    """A sha256 of what the partition and the findings shown are made from: the findings answered
    "don't ask again", the seed, resolution and Louvain implementation, each lesson's id and
    version (in id order, `ordered`), and each edge: its ends (places in that order) and its weight
    written with 6 decimals. Each part is hashed after its size, so no two different inputs read
    alike. The edges are hashed as arrays of numbers (mgcp once hashed them written out as text: the
    first run after that upgrade hashes differently, and is not `unchanged`)."""
    import numpy as np

    from mgcp.operations.sparse import distinct

    h = hashlib.sha256()

    def part(data: bytes) -> None:
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)

    part(json.dumps(sorted(settled)).encode())
    part(f"seed={settings.get('seed')};resolution={settings.get('resolution')};louvain={louvain(settings)}".encode())
    ids = list(map(attrgetter("id"), ordered))
    part(np.fromiter(map(len, ids), dtype="<i8", count=len(ids)).tobytes())
    part("".join(ids).encode("utf-8", "surrogatepass"))
    part(np.fromiter(map(attrgetter("version"), ordered), dtype="<i8", count=len(ids)).tobytes())
    part(graph.a.astype("<i8").tobytes())
    part(graph.b.astype("<i8").tobytes())
    # each edge's weight as written with 6 decimals: the distinct forms (ascending with the
    # weights), and each edge's form among them
    values = distinct(graph.w)
    forms = [f"{v:.6f}" for v in values.tolist()]
    number = {form: i for i, form in enumerate(dict.fromkeys(forms))}
    form_of = np.array([number[form] for form in forms], dtype="<i8")
    part(json.dumps(list(number)).encode())
    part(form_of[np.searchsorted(values, graph.w)].tobytes())
    return h.hexdigest()


def _largest_component(members: list[str], adj: dict[str, set[str]]) -> set[str]:
    inside, best, seen = set(members), set(), set()
    for start in members:
        if start in seen:
            continue
        component, stack = {start}, [start]
        while stack:
            for n in adj.get(stack.pop(), ()):
                if n in inside and n not in component:
                    component.add(n)
                    stack.append(n)
        seen |= component
        if len(component) > len(best):
            best = component
    return best


# -- titles and summaries ------------------------------------------------------------------------

def _idf(ordered: list[Lesson], content: dict[str, bytes] | None = None,
         kept: bytes | None = None, joined=None) -> tuple[dict[str, float], "_Keywords"]:
    """Each keyword's inverse document frequency over the triggers and tags, ln((1 + n) / (1 + df))
    + 1, and each lesson's keywords it was counted from (`_Keywords`, kept for the next run). A
    text's keywords are its tokens' own keywords (`text.keywords` maps token by token), so each
    distinct token is read once; a lesson whose content digest (`_content`) is as `kept` holds it
    (an earlier run's `_Keywords.state`) is not read at all. The counts are the same either way.
    `joined`: the content digests in the order of `ordered` (`_joined`), when the caller has them."""
    import numpy as np

    from mgcp.operations.sparse import expand, starts

    if content is None:
        content = _contents(ordered)
    words = _Keywords.read(kept)
    vocabulary = words.vocabulary if words is not None else []
    number = {word: i for i, word in enumerate(vocabulary)}
    row_of = dict(zip(words.ids, range(len(words.ids)))) if words is not None else {}

    def numbered(token: str) -> tuple[int, ...]:
        out = []
        for word in text.keywords(token):
            if word not in number:
                number[word] = len(vocabulary)
                vocabulary.append(word)
            out.append(number[word])
        return tuple(out)

    of_token = text.Memo(numbered)
    tokenize, chained = text.tokenize, chain.from_iterable
    ids = [lesson.id for lesson in ordered]
    digests = _joined(content, ids) if joined is None else joined
    source = np.full(len(ordered), -1, dtype=np.int64)  # each lesson's kept row, or -1: read now
    if words is not None:
        rows = np.fromiter(map(row_of.get, ids, repeat(-1)), dtype=np.int64, count=len(ids))
        known = np.flatnonzero(rows >= 0)
        same = (words.digests[rows[known]] == digests[known]).all(axis=1)
        source[known[same]] = rows[known[same]]
    fresh, taken = np.flatnonzero(source < 0), np.flatnonzero(source >= 0)
    flat: list[int] = []  # the keywords of those read now, one lesson after the other
    counts: list[int] = []
    for i in fresh.tolist():
        lesson = ordered[i]
        held = dict.fromkeys(chained(map(of_token.__getitem__, tokenize(lesson.trigger + " " + " ".join(lesson.tags)))))
        flat += held
        counts.append(len(held))
    lengths = np.zeros(len(ordered), dtype=np.int64)
    lengths[fresh] = counts
    if len(taken):
        lengths[taken] = np.diff(words.start)[source[taken]]
    start = starts(lengths)
    held = np.zeros(int(start[-1]), dtype=np.int64)
    if len(taken):
        held[expand(start, taken)] = words.held[expand(words.start, source[taken])]
    held[expand(start, fresh)] = flat
    df = np.bincount(held, minlength=len(vocabulary))
    n = len(ordered) or 1
    idf = {vocabulary[w]: math.log((1 + n) / (1 + d)) + 1.0 for w, d in enumerate(df.tolist()) if d}
    # words no lesson holds any more are left out of what is kept
    present = df > 0
    renumber = np.cumsum(present) - 1
    kept_words = _Keywords(ids, digests, [w for w, p in zip(vocabulary, present.tolist()) if p], start, renumber[held])
    # what the kept state lacks (the lessons read now) and holds no longer (its rows not taken)
    kept_words.behind = len(fresh) + (len(words.ids) - len(taken) if words is not None else 0)
    return idf, kept_words


class _Keywords:
    """Each lesson's keywords as `_idf` counts them: `ids` and their content `digests` (`_content`,
    a row of words per lesson: `_joined`),
    the `vocabulary`, and each lesson's keyword numbers at held[start[i]:start[i + 1]].
    `state` is what is kept (with `KEYWORD_RULES`, so that other rules find nothing in it)."""

    __slots__ = ("ids", "digests", "vocabulary", "start", "held", "behind")

    def __init__(self, ids: list[str], digests, vocabulary: list[str], start, held):
        self.ids, self.digests, self.vocabulary, self.start, self.held = ids, digests, vocabulary, start, held
        self.behind = len(ids)  # lessons the state `_idf` read had to read anew, or held no longer

    def state(self) -> bytes:
        import numpy as np

        return framed.frame({"rules": KEYWORD_RULES.hex()},
                            [json.dumps([self.ids, self.vocabulary]).encode(), self.digests.tobytes(),
                             np.diff(self.start).astype("<i4").tobytes(), self.held.astype("<i4").tobytes()])

    @classmethod
    def read(cls, state: bytes | None) -> "_Keywords | None":
        """The kept keywords, or None when nothing usable is kept (none, other rules, unreadable or
        damaged: `framed.unframe`)."""
        import numpy as np

        from mgcp.operations.sparse import starts

        read = framed.unframe(state, 4)
        if read is None or read[0].get("rules") != KEYWORD_RULES.hex():
            return None
        head, digests, lengths, held = read[1]
        try:
            ids, vocabulary = json.loads(head)
        except (ValueError, TypeError):
            return None
        if not _strings(ids) or not _strings(vocabulary) or len(digests) != DIGEST * len(ids) \
                or len(lengths) != 4 * len(ids) or len(held) % 4:
            return None
        digests = np.frombuffer(digests, dtype=np.uint64).reshape(-1, DIGEST // 8)
        start = starts(np.frombuffer(lengths, dtype="<i4").astype(np.int64))
        held = np.frombuffer(held, dtype="<i4").astype(np.int64)
        if start[-1] != len(held) or (len(held) and (held.min() < 0 or held.max() >= len(vocabulary))):
            return None
        return cls(ids, digests, vocabulary, start, held)


def _sample_key(sample: list[str], content: dict[str, bytes]) -> str:
    """What a community's title is drawn from (`sample`: its TITLE_SAMPLE most central members,
    sorted), as a digest of their ids (as JSON) and contents (`_content`, `DIGEST` bytes each)."""
    h = hashlib.blake2b(json.dumps(sample).encode(), digest_size=12)
    h.update(b"".join(map(content.__getitem__, sample)))
    return h.hexdigest()


def _describe(members: list[str], central: list[str], by_id: dict[str, Lesson], title: str) -> dict:
    """`central`: the members, most central first (`_Graph.central`); `title`: what `_title` gives
    for the TITLE_SAMPLE most central (a large community is titled by those)."""
    summary = (f"{len(members)} lessons. Central: "
               + "; ".join(f"{lid} - {text.shorten(by_id[lid].trigger, 90)}" for lid in central[:3]))
    return {"community_id": community_id(members), "member_ids": members,
            "title": title or members[0], "summary": summary}


# Words that say how a rule is to be followed, not what it is about: no title is made of them
# ("never, security, owasp").
_NOT_TOPICS = text.GENERIC_WORDS | frozenset(
    "never not don dont doesn didn isn aren won shouldn avoid ensure prefer preferred require required".split())


@lru_cache(maxsize=4096)  # tags repeat across a community's members; read-only results
def _phrases(source: str) -> dict[tuple[str, ...], str]:
    return text.phrases(source, extra_stop=_NOT_TOPICS)


def _member_phrases(lesson: Lesson) -> dict[tuple[str, ...], str]:
    """A member's phrases (`text.phrases`) from its trigger, action and tags: stemmed key -> its
    first written form, the earlier source's form winning."""
    found: dict[tuple[str, ...], str] = {}
    for source in reversed([lesson.trigger, lesson.action, *lesson.tags]):
        found.update(_phrases(source))
    return found


def _strings(value) -> bool:
    """Whether a kept value read back is a list of strings (anything else: a damaged state)."""
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


_FORMS = "\x1f"  # between a member's kept phrase forms: a phrase's words hold letters, digits and "_"


class _Phrases:
    """Title sample members' phrases (`_member_phrases`), each read once per run, and taken from
    what an earlier run kept (`state`) for a member whose content digest (`_content`) is the kept
    one. A phrase is kept as its written form only: its key is the stems of the form's words (as
    `text.phrases` makes it), so what is taken is what a reading gives, entry for entry."""

    def __init__(self, state: bytes | None, content: dict[str, bytes]):
        self.content = content
        self.kept: dict[str, tuple[bytes, str]] = {}  # lesson id -> (content digest, forms joined)
        self.read: dict[str, str] = {}  # the forms (joined) of the members taken or read in this run
        self.fresh = 0  # members read in this run (what was kept lacked them)
        self.key_of: dict[str, tuple[str, ...]] = {}  # each form's key, made once per run (forms repeat)
        read = framed.unframe(state, 3)
        if read is None or read[0].get("rules") != PHRASE_RULES.hex():
            return
        head, forms, digests = read[1]
        try:
            ids = json.loads(head)
            forms = forms.decode("utf-8", "surrogatepass").split("\n") if ids else []
        except (ValueError, TypeError):
            return
        if _strings(ids) and len(ids) == len(forms) and len(digests) == DIGEST * len(ids):
            self.kept = dict(zip(ids, zip(map(digests.__getitem__, map(slice, range(0, len(digests), DIGEST),
                                                                      range(DIGEST, len(digests) + 1, DIGEST))),
                                          forms)))

    def __call__(self, lesson: Lesson) -> dict[tuple[str, ...], str]:
        forms = self.read.get(lesson.id)
        if forms is None:
            row = self.kept.get(lesson.id)
            if row is None or row[0] != self.content[lesson.id]:
                found = _member_phrases(lesson)
                self.read[lesson.id] = _FORMS.join(found.values())
                self.fresh += 1
                return found
            forms = self.read[lesson.id] = row[1]
        if not forms:
            return {}
        forms, key_of = forms.split(_FORMS), self.key_of
        new = [form for form in forms if form not in key_of]
        if new:  # a key is the stems of the form's words, as `text.phrases` makes it
            key_of.update(zip(new, map(tuple, map(map, repeat(text.stem), map(str.split, new, repeat(" "))))))
        return dict(zip(map(key_of.__getitem__, forms), forms))

    def state(self, members: list[str]) -> bytes:
        """What to keep: the phrases of `members` (the lessons of this run's title samples) that
        were read in this run or are kept for their content as it is now."""
        ids, digests, forms = [], [], []
        for lid in sorted(set(members)):
            if lid in self.read:
                joined = self.read[lid]
            elif lid in self.kept and self.kept[lid][0] == self.content[lid]:
                joined = self.kept[lid][1]
            else:
                continue
            ids.append(lid)
            digests.append(self.content[lid])
            forms.append(joined)
        # a line per member (its forms hold no line break: the words hold letters, digits and "_")
        return framed.frame({"rules": PHRASE_RULES.hex()}, [json.dumps(ids).encode(),
                                                            "\n".join(forms).encode("utf-8", "surrogatepass"),
                                                            b"".join(digests)])


def _title(members: list[str], by_id: dict[str, Lesson], idf: dict[str, float], read=None) -> str:
    """The members' common topic, as a phrase when they share one ("webhook error handling"), else
    their three most distinctive words ("payments, stripe, booking").

    Phrases (one to three topical words in a row) come from each member's trigger, action and tags. A phrase
    qualifies when at least half the members (two or more) use it, and three quarters as many as
    use the most common word (a phrase narrower than the cluster is no title for it); the best is
    the one most members use, then the most distinctive (sum of its words' idf, so longer phrases
    win ties). `read`: a member's phrases (`_member_phrases`, the default, or `_Phrases`)."""
    read = read or _member_phrases
    used: Counter = Counter()
    founds: list[dict[tuple[str, ...], str]] = []  # per member: phrase -> its first written form
    for lid in members:
        found = read(by_id[lid])
        used.update(found.keys())
        founds.append(found)
    quorum = max(2, (len(members) + 1) // 2)

    def form(key):  # the form most members write, then the first in alphabetical order
        written = Counter(found[key] for found in founds if key in found)
        return min(written.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def weight(key):
        return sum(idf.get(w, 1.0) for w in key)

    def best(keys):
        return min(keys, key=lambda k: (-used[k], -weight(k), k))

    words = [k for k in used if len(k) == 1]
    widest = max((used[k] for k in words), default=0)
    enough = max(quorum, math.ceil(0.75 * widest))
    phrases = [k for k, n in used.items() if n >= enough and len(k) > 1]
    if phrases:
        phrase = best(phrases)
        # led by a word at least as widely used, often from another field ("webhooks" tag +
        # "error handling" tag -> "webhook error handling")
        lead = [k for k in words if used[k] >= used[phrase] and k[0] not in phrase]
        return " ".join(([form(best(lead))] if lead else []) + [form(phrase)])
    of = idf.get  # a word's weight is its idf alone (`weight` of one word: 0 + its idf)
    words.sort(key=lambda k: (-used[k] * of(k[0], 1.0), k))
    return ", ".join(form(k) for k in words[:3])


# -- comparison with the previous run ------------------------------------------------------------

def compare(previous: list[dict] | None, current: list[dict]) -> dict:
    """new / merged / split / dissolved, by member overlap (a share of half or more counts)."""
    changes: dict[str, list] = {"new": [], "merged": [], "split": [], "dissolved": []}
    if previous is None:
        changes["new"] = [c["community_id"] for c in current]
        return changes
    prev = [(p["community_id"], len(set(p["member_ids"]))) for p in previous if len(p.get("member_ids", [])) >= 2]
    cur = [(c["community_id"], len(set(c["member_ids"]))) for c in current]
    # the members each current community shares with each previous one, counted through the
    # previous community of each member (a lesson is in at most one community of a run)
    before: dict[str, int] = {}
    for i, p in enumerate(p for p in previous if len(p.get("member_ids", [])) >= 2):
        before.update(dict.fromkeys(p["member_ids"], i))
    shared: list[Counter] = [Counter(map(before.get, set(c["member_ids"]))) for c in current]
    for counts in shared:
        counts.pop(None, None)  # members in no previous community
    into: list[dict[int, int]] = [{} for _ in prev]
    for j, counts in enumerate(shared):
        for i, n in counts.items():
            into[i][j] = n

    def major(part: int, whole: int) -> bool:
        return part >= 2 and part * 2 >= whole

    for j, (cid, size) in enumerate(cur):
        sources = [prev[i][0] for i in sorted(shared[j]) if major(shared[j][i], prev[i][1])]
        if len(sources) >= 2:
            changes["merged"].append({"into": cid, "from": sorted(sources)})
        elif not any(major(n, size) or major(n, prev[i][1]) for i, n in shared[j].items()):
            changes["new"].append(cid)
    for i, (pid, size) in enumerate(prev):
        pieces = [cur[j][0] for j in sorted(into[i]) if into[i][j] >= 2 and into[i][j] * 4 >= size]
        if len(pieces) >= 2:
            changes["split"].append({"from": pid, "into": sorted(pieces)})
        elif not any(major(n, size) or major(n, cur[j][1]) for j, n in into[i].items()):
            changes["dissolved"].append(pid)
    return changes


# -- findings ------------------------------------------------------------------------------------

def _cluster_finding(c: dict, by_id: dict[str, Lesson], linked: set[str],
                     explicit_adj: dict[str, set[str]], is_new: bool) -> RemFinding:
    members = c["member_ids"]
    lessons = [by_id[m] for m in members]
    subject = subject_of(*lessons)
    internal = sum(1 for m in members for n in explicit_adj.get(m, ()) if n in set(members)) // 2
    about = f'{len(members)} lessons about "{c["title"]}"'
    title = ("New cluster of " if is_new else "Cluster of ") + about
    state = ("These aren't linked to each other yet." if internal == 0 else
             f"Only {internal} explicit link(s) connect them; {len(members) - len(linked)} of "
             f"{len(members)} are not reachable through links.")
    description = "\n".join(
        [f"Community detection found {'a new' if is_new else 'a'} cluster of {about}:", ""]
        + [f"- {m.id}: {_said(m)}" for m in lessons]
        + ["", state])
    pairs = len(members) * (len(members) - 1) // 2 - internal
    options = [
        FindingOption(label="Link them all", action="link_all",
                      description=f'Create "related" relationships between every pair not yet linked '
                                  f"({pairs} pair{'' if pairs == 1 else 's'})"),
        FindingOption(label="Let me pick which ones to link", action="link_subset",
                      description="Choose the lessons to link to each other", multi_select=list(members)),
        FindingOption(label="Skip - they're coincidentally similar", action="keep",
                      description="Remember this answer; not raised again unless one of them changes"),
        FindingOption(label="Skip for now", action="skip", description="Leave this finding pending"),
    ]
    return RemFinding(
        operation=OPERATION, kind="unlinked_cluster", title=title, description=description,
        options=options, recommended=1,
        data={"community_id": c["community_id"], "members": list(members), "topic": c["title"],
              "linked": sorted(linked), "explicit_links": internal, "new": is_new},
        subject=subject,
        fingerprint=fingerprint(OPERATION, "unlinked_cluster", subject_identity(subject)),
    )


def _said(lesson: Lesson) -> str:
    """A lesson in a line of a list: its trigger and its action, shortened (lessons written from one
    source often share a trigger, and differ in their action)."""
    return f"{text.shorten(lesson.trigger, 60)} -> {text.shorten(lesson.action, 90)}"


class _Orphan:
    """An orphan finding before it is made: what `cap` and its summary read of it (kind,
    fingerprint, title, data, subject and the recommended action), so that of thousands of orphans
    only the few shown are made into findings (`finding`)."""

    __slots__ = ("lesson", "suggested", "subject", "fingerprint")
    operation, kind = OPERATION, "orphan"

    def __init__(self, lesson: Lesson, suggested: list[Lesson]):
        self.lesson, self.suggested = lesson, suggested
        self.subject = subject_of(lesson, *suggested)
        self.fingerprint = fingerprint(OPERATION, "orphan", subject_identity(self.subject))

    @property
    def title(self) -> str:
        ids = self.suggested
        return f'Unlinked lesson: "{text.shorten(self.lesson.trigger, 70)}"' + (
            f" ({len(ids)} suggested links)" if ids else "")

    @property
    def data(self) -> dict:
        return {"lesson": self.lesson.id, "suggested": [s.id for s in self.suggested]}

    # the recommended option, as `mgcp.operations.summary` reads it
    recommended = 1

    _LINK, _KEEP = [SimpleNamespace(action="link_suggested")], [SimpleNamespace(action="keep")]

    @property
    def options(self) -> list:
        return self._LINK if self.suggested else self._KEEP

    def finding(self) -> RemFinding:
        lesson, suggested = self.lesson, self.suggested
        ids = [s.id for s in suggested]
        lines = [f'Lesson "{lesson.id}" has no relationships to other lessons.',
                 f"Trigger: {text.shorten(lesson.trigger, 120)}", f"Action: {text.shorten(lesson.action, 160)}", ""]
        if suggested:
            lines += ["Similar lessons it could link to:"]
            lines += [f"- {s.id}: {_said(s)}" for s in suggested]
        else:
            lines += ["No similar lesson was found to suggest."]
        options = []
        if suggested:
            options += [
                FindingOption(label="Link to the suggested lessons", action="link_suggested",
                              description=f'Create "related" relationships to {", ".join(ids)}'),
                FindingOption(label="Let me pick which to link", action="link_subset",
                              description="Choose among the suggestions", multi_select=ids),
            ]
        options += [
            FindingOption(label="Keep it standalone", action="keep",
                          description="Remember this answer; not raised again unless it changes"),
            FindingOption(label="Skip for now", action="skip", description="Leave this finding pending"),
        ]
        return RemFinding(
            operation=OPERATION, kind="orphan", title=self.title, description="\n".join(lines), options=options,
            recommended=self.recommended,  # link them; with nothing to link to, keep it standalone
            data=self.data, subject=self.subject, fingerprint=self.fingerprint,
        )
