"""Community detection's digests: the graph hash covers exactly what its docstring says, a lesson's
content digest tells two contents apart exactly when what the graph reads of them differs, and the
kept lessons' digests find the stale lessons as comparing the contents would."""

import random

import numpy as np
import pytest

from mgcp.config import DEFAULTS
from mgcp.models import Lesson, Relationship
from mgcp.operations import community_detection
from mgcp.operations.community_detection import KeptLessons, _contents, _Graph, _graph_hash, _joined
from mgcp.operations.similarity import Candidates

TS = "2026-01-01T00:00:00+00:00"
SETTINGS = {"seed": 42, "resolution": 1.0, "louvain": "python-louvain"}


def lesson(id, trigger="t", action="a", tags=(), links=(), version=1):
    return Lesson(id=id, trigger=trigger, action=action, tags=list(tags), version=version,
                  relationships=[Relationship(target=t) for t in links], created_at=TS, last_refined=TS)


def graph(a, b, w, n=4):
    a, b = np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)
    return _Graph(n, a, b, np.array(w, dtype=np.float64), np.zeros(0, dtype=np.int64), None)


LESSONS = [lesson("l0"), lesson("l1"), lesson("l2"), lesson("l3")]
BASE = graph([0, 0, 1], [1, 2, 3], [1.0, 0.5, 1.3])


def test_the_graph_hash_changes_with_each_input_it_covers():
    base = _graph_hash(BASE, LESSONS, SETTINGS)
    changed = [
        _graph_hash(BASE, LESSONS, SETTINGS, frozenset({"fp"})),
        _graph_hash(BASE, LESSONS, {**SETTINGS, "seed": 7}),
        _graph_hash(BASE, LESSONS, {**SETTINGS, "resolution": 1.5}),
        _graph_hash(BASE, LESSONS, {**SETTINGS, "louvain": "igraph"}),
        _graph_hash(BASE, [*LESSONS[:3], lesson("l3", version=2)], SETTINGS),
        _graph_hash(BASE, [*LESSONS[:3], lesson("l4")], SETTINGS),  # another lesson at the same place
        _graph_hash(BASE, [lesson("l"), lesson("0l1"), *LESSONS[2:]], SETTINGS),  # the same letters split otherwise
        _graph_hash(graph([0, 0, 1], [1, 3, 3], [1.0, 0.5, 1.3]), LESSONS, SETTINGS),  # an end
        _graph_hash(graph([0, 0, 2], [1, 2, 3], [1.0, 0.5, 1.3]), LESSONS, SETTINGS),
        _graph_hash(graph([0, 0], [1, 2], [1.0, 0.5]), LESSONS, SETTINGS),  # an edge gone
        _graph_hash(graph([0, 0, 1], [1, 2, 3], [1.0, 0.5, 1.300001]), LESSONS, SETTINGS),  # a weight
        _graph_hash(graph([0, 0, 1], [1, 2, 3], [0.5, 1.0, 1.3]), LESSONS, SETTINGS),  # weights swapped
    ]
    assert len({base, *changed}) == len(changed) + 1


def test_the_graph_hash_changes_with_nothing_else():
    base = _graph_hash(BASE, LESSONS, SETTINGS)
    # a weight that writes alike with 6 decimals, the texts (their edges are what counts), the
    # settings that shape only the edges, the order the answers come in
    assert _graph_hash(graph([0, 0, 1], [1, 2, 3], [1.0, 0.5, 1.3 + 1e-9]), LESSONS, SETTINGS) == base
    assert _graph_hash(BASE, [lesson(x.id, trigger="other", tags=["x"]) for x in LESSONS], SETTINGS) == base
    assert _graph_hash(BASE, LESSONS, {**SETTINGS, "similarity_edge_threshold": 0.9}) == base
    settled = _graph_hash(BASE, LESSONS, SETTINGS, frozenset({"a", "b"}))
    assert _graph_hash(BASE, LESSONS, SETTINGS, frozenset(["b", "a"])) == settled
    assert _graph_hash(graph([], [], [], 0), [], SETTINGS) == _graph_hash(graph([], [], [], 0), [], SETTINGS)


def test_a_run_on_the_same_graph_is_unchanged_and_one_on_another_is_not():
    lessons = [lesson(f"l{i}", f"When the webhook retry fails {i % 3}", "Retry the webhook later.",
                      tags=["webhooks"] if i % 2 else []) for i in range(12)]
    settings = {**DEFAULTS["community_detection"], **SETTINGS}
    first = community_detection.run(lessons, None, settings)
    again = community_detection.run(lessons, first.communities, settings, first.graph_hash, first.modularity)
    assert again.unchanged
    moved = [*lessons[:-1], lesson("l11", "When the docker image is too large", "Use a slim base image.")]
    assert not community_detection.run(moved, first.communities, settings, first.graph_hash).unchanged


PIECES = ["", "a", "ab", "'", '"', "[", "]", "', '", "1:", "\\", "\0", "\ud800", "é", "x y", "['a']", "2"]


def random_lesson(rng: random.Random, lid: str) -> Lesson:
    def text():
        return "".join(rng.choice(PIECES) for _ in range(rng.randrange(3)))

    return lesson(lid, text(), text(), [text() for _ in range(rng.randrange(3))],
                  [text() for _ in range(rng.randrange(3))])


def read_of(x: Lesson):  # what the content digest stands for
    return x.trigger or "", x.action or "", tuple(x.tags), tuple(sorted(r.target for r in x.relationships))


def test_two_contents_digest_alike_exactly_when_the_graph_reads_them_alike():
    rng = random.Random(3)
    lessons = [random_lesson(rng, f"l{i}") for i in range(3000)]
    digests = _contents(lessons)
    by_read = {}
    for x in lessons:
        by_read.setdefault(read_of(x), set()).add(digests[x.id])
    assert all(len(d) == 1 for d in by_read.values())  # the same contents digest alike
    assert len({d for ds in by_read.values() for d in ds}) == len(by_read)  # different ones do not
    # links in another order are the same links
    x = lesson("l", links=["b", "a"])
    assert _contents([x])["l"] == _contents([lesson("l", links=["a", "b"])])["l"]


def test_the_stale_lessons_are_those_new_or_whose_content_changed():
    rng = random.Random(5)
    before = [random_lesson(rng, f"l{i:03d}") for i in range(300)]
    ids = [x.id for x in before]
    content = _contents(before)
    empty = Candidates(np.zeros(len(ids) + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    state = KeptLessons(ids, _joined(content, ids), np.zeros(len(ids), dtype=np.int64),
                        np.zeros(len(ids), dtype=np.uint64), empty).state()
    kept = KeptLessons.read(state)
    assert kept.ids == ids and kept.state() == state
    after = [random_lesson(rng, x.id) if rng.random() < 0.2 else x for x in before if rng.random() < 0.9]
    after += [random_lesson(rng, f"n{i}") for i in range(20)]
    after.sort(key=lambda x: x.id)
    now_ids = [x.id for x in after]
    place, _, stale = kept.renumbered(now_ids, _joined(_contents(after), now_ids))
    was = {x.id: read_of(x) for x in before}
    assert stale.tolist() == [was.get(x.id) != read_of(x) for x in after]
    assert place.tolist() == [ids.index(lid) if lid in was else -1 for lid in now_ids]


@pytest.mark.parametrize("cut", [1, 16])
def test_kept_lessons_with_digests_cut_short_are_ignored(cut):
    from mgcp.operations import framed

    ids = ["a", "b"]
    content = _joined({"a": bytes(16), "b": b"\1" * 16}, ids)
    empty = Candidates(np.zeros(3, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    state = KeptLessons(ids, content, np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.uint64), empty).state()
    header, parts = framed.unframe(state, 7)
    parts[1] = parts[1][:-cut]
    assert KeptLessons.read(framed.frame({"rules": header["rules"]}, parts)) is None


def test_the_most_central_members_are_as_a_sort_by_exact_inner_weight_then_id_gives_them():
    import math

    rng = random.Random(9)
    n = 200
    pairs = sorted({(min(x, y), max(x, y)) for x, y in ((rng.randrange(n), rng.randrange(n)) for _ in range(1500))
                    if x != y})
    w = [rng.choice([1.0, 0.5, 0.3, 0.1, 0.7, 1.3, 0.8]) for _ in pairs]  # ties, and sums that round
    g = graph([p[0] for p in pairs], [p[1] for p in pairs], w, n)
    ids = [f"l{i:03d}" for i in range(n)]
    weight = {p: x for p, x in zip(pairs, w)}
    for _ in range(20):
        members = np.array(sorted(rng.sample(range(n), rng.randrange(2, 120))), dtype=np.int64)
        inside = set(members.tolist())

        def centrality(node):  # the definition: the exact sum of its edges' weights inside
            return math.fsum(x for (a, b), x in weight.items() if node in (a, b) and ({a, b} - {node}) <= inside)

        slow = sorted(members.tolist(), key=lambda node: (-centrality(node), ids[node]))
        labels = np.arange(n, dtype=np.int64) + 1  # every other node alone
        labels[members] = 0
        assert g.central(members, g.centrality(labels)) == slow
