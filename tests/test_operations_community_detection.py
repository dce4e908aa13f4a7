import hashlib
import importlib.util

import pytest

from mgcp.config import DEFAULTS
from mgcp.models import Lesson, Relationship
from mgcp.operations import community_detection
from mgcp.operations.community_detection import community_id, compare

SETTINGS = DEFAULTS["community_detection"]
TS = "2026-01-01T00:00:00+00:00"


def lesson(id, trigger, action, tags=(), links=(), version=1):
    return Lesson(id=id, trigger=trigger, action=action, tags=list(tags), version=version,
                  relationships=[Relationship(target=t) for t in links], created_at=TS, last_refined=TS)


def kb(version=1):
    return [
        lesson("webhook-retry-logic", "When a webhook delivery fails",
               "Retry the webhook delivery with exponential backoff and record each webhook attempt.",
               ["webhooks"], version=version),
        lesson("webhook-signature-verify", "When a webhook request arrives",
               "Verify the webhook signature header before trusting the webhook payload.", ["webhooks"]),
        lesson("webhook-dead-letter-replay", "When webhook deliveries keep failing",
               "Move failed webhook deliveries to a dead letter queue and replay them later.", ["webhooks"]),
        lesson("webhook-timeout-handling", "When a webhook handler is slow",
               "Acknowledge the webhook quickly and process the webhook payload in a background job.",
               ["webhooks"]),
        lesson("git-small-commits", "When committing work in git", "Make small focused git commits.",
               ["git"], links=["git-rebase-before-push"]),
        lesson("git-rebase-before-push", "Before pushing a git branch", "Rebase the git branch on main.",
               ["git"], links=["git-no-force-push"]),
        lesson("git-no-force-push", "When a git push is rejected", "Never force push a shared git branch.",
               ["git"]),
        lesson("secret-token-leak", "When a secret token leaks",
               "Rotate the leaked secret token at once and audit where the token was used.",
               ["secrets"], links=["secret-storage"]),
        lesson("secret-storage", "When storing a secret", "Keep every secret in the vault, never in git.",
               ["secrets"]),
        lesson("api-key-leak", "When an api key leaks",
               "Rotate the leaked api key at once and audit where the key was used.", ["secrets"]),
    ]


def by_kind(result, kind):
    return [f for f in result.findings if f.kind == kind]


def test_unlinked_cluster_is_found_with_its_members():
    [cluster] = by_kind(community_detection.run(kb(), None, SETTINGS), "unlinked_cluster")
    assert cluster.data["members"] == ["webhook-dead-letter-replay", "webhook-retry-logic",
                                       "webhook-signature-verify", "webhook-timeout-handling"]
    assert cluster.title.startswith('New cluster of 4 lessons about "webhook')
    assert [o.action for o in cluster.options] == ["link_all", "link_subset", "keep", "skip"]
    assert cluster.options[1].multi_select == cluster.data["members"]
    assert all(m.action[:40] in cluster.description for m in kb() if m.id in cluster.data["members"])
    assert "(6 pairs)" in cluster.options[0].description


def test_orphan_gets_suggested_links_and_cluster_members_are_not_orphans():
    [orphan] = by_kind(community_detection.run(kb(), None, SETTINGS), "orphan")
    assert orphan.data["lesson"] == "api-key-leak"
    assert orphan.data["suggested"][0] == "secret-token-leak"
    assert orphan.options[orphan.recommended - 1].action == "link_suggested"
    by_id = {x.id: x for x in kb()}
    for lesson_id in (orphan.data["lesson"], orphan.data["suggested"][0]):  # a reviewer reads what each says
        assert by_id[lesson_id].action[:40] in orphan.description


def test_orphan_with_nothing_to_link_to_recommends_keeping_it():
    lessons = kb() + [lesson("css-grid-gap", "When spacing grid items in css", "Use the gap property.")]
    [orphan] = [f for f in by_kind(community_detection.run(lessons, None, SETTINGS), "orphan")
                if f.data["lesson"] == "css-grid-gap"]
    assert orphan.data["suggested"] == []
    assert orphan.options[orphan.recommended - 1].action == "keep"


def test_an_orphan_is_offered_the_lessons_most_alike_in_text_not_those_that_only_share_a_tag():
    """A shared tag alone (an edge of the graph) suggests nothing; a lesson alike in text, even below
    the text edge threshold, is suggested first."""
    lessons = kb() + [
        lesson("xml-entity-expansion", "When parsing xml from users",
               "Turn off external entity expansion in the xml parser before parsing untrusted documents.",
               ["security"]),
        lesson("backup-restore-drill", "When planning backups", "Restore a backup into a scratch database monthly.",
               ["security"]),
        lesson("untrusted-pickle", "When loading serialized objects from users",
               "Never unpickle untrusted documents; parse them as json with a schema."),
    ]
    [orphan] = [f for f in by_kind(community_detection.run(lessons, None, SETTINGS), "orphan")
                if f.data["lesson"] == "xml-entity-expansion"]
    assert orphan.data["suggested"] == ["untrusted-pickle"]


def test_linked_communities_raise_nothing():
    result = community_detection.run(kb(), None, SETTINGS)
    flagged = {m for f in result.findings for m in f.subject}
    assert not flagged & {"git-small-commits", "git-rebase-before-push", "git-no-force-push"}


def test_community_ids_hash_sorted_members():
    for c in community_detection.run(kb(), None, SETTINGS).communities:
        assert c["member_ids"] == sorted(c["member_ids"])
        assert c["community_id"] == hashlib.sha256(",".join(c["member_ids"]).encode()).hexdigest()[:12]
        assert c["title"] and c["summary"].startswith(f"{len(c['member_ids'])} lessons")


def test_unchanged_graph_same_hash_and_no_changes():
    first = community_detection.run(kb(), None, SETTINGS)
    second = community_detection.run(list(reversed(kb())), first.communities, SETTINGS)
    assert second.graph_hash == first.graph_hash
    assert second.changes == {"new": [], "merged": [], "split": [], "dissolved": []}
    assert [f.model_dump() for f in second.findings] == [
        f.model_dump() | {"title": f.title.replace("New cluster", "Cluster"),
                          "description": f.description.replace("a new cluster", "a cluster"),
                          "data": f.data | ({"new": False} if "new" in f.data else {})}
        for f in first.findings]


def test_first_run_reports_every_community_as_new():
    result = community_detection.run(kb(), None, SETTINGS)
    assert result.changes["new"] == [c["community_id"] for c in result.communities]


def test_changed_version_changes_hash_and_fingerprint():
    a = community_detection.run(kb(), None, SETTINGS)
    b = community_detection.run(kb(version=2), None, SETTINGS)
    assert a.graph_hash != b.graph_hash
    assert by_kind(a, "unlinked_cluster")[0].fingerprint != by_kind(b, "unlinked_cluster")[0].fingerprint


def test_graph_without_edges():
    result = community_detection.run([lesson("a", "alpha", "one"), lesson("b", "beta", "two")], None, SETTINGS)
    assert result.communities == [] and result.modularity == 0.0
    assert [o.action for o in result.findings[0].options] == ["keep", "skip"]


def community(*members):
    return {"community_id": community_id(list(members)), "member_ids": sorted(members)}


def test_compare_merged():
    changes = compare([community("a", "b", "c"), community("d", "e", "f")],
                      [community("a", "b", "c", "d", "e", "f")])
    assert changes["merged"] == [{"into": community_id(list("abcdef")),
                                  "from": sorted([community_id(list("abc")), community_id(list("def"))])}]


def test_compare_split():
    changes = compare([community("a", "b", "c", "d", "e", "f")],
                      [community("a", "b", "c"), community("d", "e", "f")])
    assert changes["split"] == [{"from": community_id(list("abcdef")),
                                 "into": sorted([community_id(list("abc")), community_id(list("def"))])}]


def test_compare_new_and_dissolved():
    changes = compare([community("a", "b", "c")], [community("x", "y", "z")])
    assert changes["new"] == [community_id(list("xyz"))]
    assert changes["dissolved"] == [community_id(list("abc"))]


def test_cluster_title_is_a_shared_phrase_when_the_members_have_one():
    members = [lesson(f"w{i}", trigger, "Handle it.", ["webhooks", "error-handling"])
               for i, trigger in enumerate(["When a webhook delivery fails", "When a webhook times out",
                                            "When webhook retries run out"])]
    by_id = {m.id: m for m in members}
    idf, _ = community_detection._idf(members)
    assert community_detection._title(list(by_id), by_id, idf) == "webhook error handling"
    # a phrase only some members use is too narrow: the shared words are listed instead
    assert community_detection._title(["webhook-retry-logic", "webhook-signature-verify",
                                       "webhook-dead-letter-replay", "webhook-timeout-handling"],
                                      {m.id: m for m in kb()}, community_detection._idf(kb())[0]
                                      ).startswith("webhook, ")


def test_a_title_is_not_made_of_the_words_that_say_how_to_follow_a_rule():
    members = [lesson(f"s{i}", trigger, action, ["security"]) for i, (trigger, action) in enumerate([
        ("When storing passwords", "Never store passwords in plain text; hash them with argon2."),
        ("When logging requests", "Never log passwords or tokens; avoid logging request bodies."),
        ("When handling tokens", "Don't put tokens in URLs; never keep passwords in cookies.")])]
    by_id = {m.id: m for m in members}
    title = community_detection._title(list(by_id), by_id, community_detection._idf(members)[0])
    assert not {"never", "avoid", "don"} & set(title.replace(",", " ").split()), title
    assert "password" in title


def test_an_unchanged_graph_is_not_partitioned_again():
    first = community_detection.run(kb(), None, SETTINGS)
    again = community_detection.run(kb(), first.communities, SETTINGS, first.graph_hash, first.modularity)
    assert again.unchanged and again.findings == [] and again.communities == first.communities
    changed = community_detection.run(kb(version=2), first.communities, SETTINGS, first.graph_hash)
    assert not changed.unchanged


PARTITION_SCRIPT = """
import json, random
from mgcp.config import DEFAULTS
from mgcp.models import Lesson, Relationship
from mgcp.operations import community_detection
rng = random.Random(7)
# four parts with nothing in common; in each, three sub-topics that share the part's words
parts = [[f"{p}word{i}" for i in range(12)] for p in "abcd"]
subs = [[f"{p}{q}sub{i}" for i in range(10)] for p in "abcd" for q in "xyz"]
lessons = []
for n in range(240):
    words = rng.sample(subs[n % 12], 3) + rng.sample(parts[n % 12 // 3], 3)
    links = [Relationship(target=f"l{n - 12:03d}")] if n % 5 == 0 and n >= 12 else []
    lessons.append(Lesson(id=f"l{n:03d}", trigger="when " + " ".join(words[:3]),
                          action="do " + " ".join(words[3:]), relationships=links,
                          created_at="2026-01-01T00:00:00+00:00", last_refined="2026-01-01T00:00:00+00:00"))
import sys
settings = {**DEFAULTS["community_detection"], "louvain": sys.argv[1]}
result = community_detection.run(lessons, None, settings)
print(json.dumps([c["member_ids"] for c in result.communities]))
"""

IMPLEMENTATIONS = ["python-louvain", pytest.param("igraph", marks=pytest.mark.skipif(
    importlib.util.find_spec("igraph") is None, reason="the [fast] extra (igraph) is not installed"))]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_the_partition_does_not_depend_on_the_hash_seed(implementation):
    import json
    import os
    import subprocess
    import sys

    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", PARTITION_SCRIPT, implementation], env=env, capture_output=True,
                             text=True, check=True).stdout
        outputs.append(json.loads(out))
    assert len(outputs[0]) > 3
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_each_louvain_finds_the_clear_communities(implementation):
    result = community_detection.run(kb(), None, {**SETTINGS, "louvain": implementation})
    members = [set(c["member_ids"]) for c in result.communities]
    assert {"webhook-retry-logic", "webhook-signature-verify", "webhook-dead-letter-replay",
            "webhook-timeout-handling"} in members
    assert {"git-small-commits", "git-rebase-before-push", "git-no-force-push"} in members


def test_the_louvain_setting_is_part_of_the_graph_hash_and_igraph_missing_is_a_clear_error(monkeypatch):
    a = community_detection.run(kb(), None, {**SETTINGS, "louvain": "python-louvain"})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    b = community_detection.run(kb(), None, {**SETTINGS, "louvain": "auto"})  # falls back
    assert b.graph_hash == a.graph_hash
    monkeypatch.setitem(__import__("sys").modules, "igraph", None)
    with pytest.raises(RuntimeError, match=r"louvain is 'igraph' but igraph is not installed"):
        community_detection.run(kb(), None, {**SETTINGS, "louvain": "igraph"})


ODD_TEXTS = ["When the API's rate-limit (429) hits, retry_after headers", "Running runs ran: 2024 x y",
             "snake_case_names and kebab-case-names", "", "the a an of", "Réseau naïve café 42nd"]


def test_idf_reads_each_text_as_its_keywords():
    """The per-token reading gives exactly the document frequency of `text.keywords` per text."""
    import math
    from collections import Counter

    from mgcp import text

    lessons = [lesson(f"l{i}", t, "act", tags=[tag] if tag else [])
               for i, (t, tag) in enumerate([(t, tag) for t in ODD_TEXTS for tag in ("", "Rate-Limits", "x")])]
    df = Counter()
    for item in lessons:
        df.update(set(text.keywords(item.trigger + " " + " ".join(item.tags))))
    n = len(lessons)
    assert community_detection._idf(lessons)[0] == {w: math.log((1 + n) / (1 + d)) + 1.0 for w, d in df.items()}


def test_the_collector_runs_again_after_a_run():
    import gc

    community_detection.run(kb(), None, SETTINGS)
    assert gc.isenabled()
    gc.disable()
    try:
        community_detection.run(kb(), None, SETTINGS)
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def test_orphans_beyond_the_cap_are_counted_in_the_summary_as_the_findings_they_would_be():
    """Only the orphans shown are made into findings; the summary holds the rest exactly as a run
    with room for all of them makes them."""
    words = ["boiler", "kettle", "lathe", "piano", "rudder", "sextant", "tuba", "umbrella", "violin", "wagon"]
    lessons = [lesson(f"{word}-{how}", f"When the {word} {how}", f"Look at the {word} before it {how} again.", [word])
               for word in words for how in ("breaks", "leaks")]  # pairs: orphans with a suggestion
    lessons.append(lesson("alone", "When the zither squeaks", "Oil the zither pegs."))
    everything = community_detection.run(lessons, None, {**SETTINGS, "max_findings": 100})
    capped = community_detection.run(lessons, None, {**SETTINGS, "max_findings": 5})
    shown, [summary] = capped.findings[:-1], capped.findings[-1:]
    assert len(everything.findings) == 21 and len(shown) == 5 and summary.kind == "summary"
    assert everything.findings[0].data["suggested"] and not everything.findings[-1].data["suggested"]
    made = {f.data["lesson"]: f for f in everything.findings}
    assert all(f.model_dump() == made[f.data["lesson"]].model_dump() for f in shown)
    rest = [f for f in everything.findings if f.data["lesson"] not in {s.data["lesson"] for s in shown}]
    assert summary.data["fingerprints"] == sorted(f.fingerprint for f in rest)
    assert summary.data["items"] == [{"kind": "orphan", "data": f.data, "subject": f.subject} for f in rest
                                     if f.data["suggested"]] != []
    assert summary.description.splitlines()[1:11] == [f"- {f.title}" for f in rest[:10]]


@pytest.mark.parametrize("implementation", ["python-louvain", "igraph"])
def test_the_reported_modularity_is_newmans_over_the_weighted_graph(implementation):
    if implementation == "igraph" and importlib.util.find_spec("igraph") is None:
        pytest.skip("igraph is not installed")
    import networkx as nx
    from networkx.algorithms.community import modularity

    settings = {**SETTINGS, "louvain": implementation}
    result = community_detection.run(kb(), None, settings)
    graph = nx.Graph()
    graph.add_nodes_from(x.id for x in kb())
    weights: dict = {}
    for x in kb():  # explicit links weigh 1.0, each shared tag (of few lessons) shared_tag_weight
        for target in (rel.target for rel in x.relationships):
            weights[tuple(sorted((x.id, target)))] = 1.0
    by_tag: dict = {}
    for x in kb():
        for tag in x.tags:
            by_tag.setdefault(tag, []).append(x.id)
    for ids in by_tag.values():
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                pair = tuple(sorted((a, b)))
                weights[pair] = weights.get(pair, 0.0) + settings["shared_tag_weight"]
    backend = community_detection.LexicalBackend()
    texts = {x.id: community_detection.lesson_text(x) for x in kb()}
    for a, b, _ in backend.nearest(texts, settings["similarity_edge_threshold"], community_detection.NEIGHBOURS):
        pair = tuple(sorted((a, b)))
        weights[pair] = weights.get(pair, 0.0) + settings["similarity_edge_weight"]
    graph.add_weighted_edges_from((a, b, w) for (a, b), w in weights.items())
    members = [set(c["member_ids"]) for c in result.communities]
    members += [{node} for node in graph if not any(node in m for m in members)]
    assert result.modularity == pytest.approx(modularity(graph, members, weight="weight"), abs=1e-12)


class _Delegate(community_detection.SimilarityBackend):
    """Another backend (as the semantic one is): the lexical backend's answers, through the seam."""

    def __init__(self):
        self.lexical = community_detection.LexicalBackend()

    def pairs(self, docs, min_similarity):
        return self.lexical.pairs(docs, min_similarity)

    def similarity(self, a, b):
        return self.lexical.similarity(a, b)

    def vectors(self, docs):
        return self.lexical.vectors(docs)

    def nearest(self, docs, min_similarity, k):
        return self.lexical.nearest(docs, min_similarity, k)


def test_another_backend_builds_the_same_graph_through_nearest_and_keeps_nothing():
    lexical = community_detection.run(kb(), None, SETTINGS)
    other = community_detection.run(kb(), None, SETTINGS, backend=_Delegate())
    assert other.communities == lexical.communities and other.modularity == lexical.modularity
    assert [f.model_dump() for f in other.findings] == [f.model_dump() for f in lexical.findings]
    assert other.kept is None and lexical.kept is not None
    again = community_detection.run(kb(), None, SETTINGS, backend=_Delegate(), kept=lexical.kept)
    assert not again.incremental


def _random_graphs(count: int):
    """`count` random graphs (seeded): (rng, n, a, b, w, the `_Graph` of them), edges a < b in order."""
    import numpy as np

    from mgcp.operations.community_detection import _Graph

    for seed in range(count):
        r = np.random.default_rng(seed)
        n = int(r.integers(1, 50))
        codes = np.unique(r.integers(0, n * n, size=int(r.integers(0, 3 * n))))
        a, b = codes // n, codes % n
        a, b = a[a < b], b[a < b]
        w = r.choice([0.1, 0.3, 0.4, 1.0, 1.3], size=len(a))
        yield r, n, a, b, w, _Graph(n, a, b, w, np.zeros(0, dtype=np.int64), None)


def test_the_strongest_neighbours_of_the_nodes_asked_are_those_of_their_definition():
    import numpy as np

    for r, n, a, b, w, graph in _random_graphs(30):
        nodes = np.sort(r.choice(n, size=int(r.integers(0, n + 1)), replace=False)).astype(np.int64)
        of = graph.strongest(3, nodes)
        for i in nodes.tolist():
            edges = sorted([(-v, y) for x, y, v in zip(a.tolist(), b.tolist(), w.tolist()) if x == i]
                           + [(-v, x) for x, y, v in zip(a.tolist(), b.tolist(), w.tolist()) if y == i])
            assert of(i) == ([y for _, y in edges[:3]], -edges[0][0] if edges else 0.0)


def test_each_nodes_edges_are_its_neighbours_ascending_with_their_weights_and_degree():
    for _, n, a, b, w, graph in _random_graphs(30):
        for i in range(n):
            edges = sorted([(y, e) for e, (x, y) in enumerate(zip(a.tolist(), b.tolist())) if x == i]
                           + [(x, e) for e, (x, y) in enumerate(zip(a.tolist(), b.tolist())) if y == i])
            lo, hi = int(graph.start[i]), int(graph.start[i + 1])
            assert graph.neighbour[lo:hi].tolist() == [y for y, _ in edges]
            assert graph.edge_at[lo:hi].tolist() == [e for _, e in edges]
            assert graph.neighbours(i) == ([y for y, _ in edges], [float(w[e]) for _, e in edges])
            assert graph.degree[i] == sum(float(w[e]) for _, e in edges)
