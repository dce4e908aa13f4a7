import itertools
import random

import pytest

from mgcp.operations import similarity
from mgcp.operations.similarity import LexicalBackend, SimilarityBackend, top_k

WORDS = ("cache retry webhook token schema index migration queue worker lock timeout branch "
         "commit deploy secret config logging metric trace parser render widget column cursor").split()


def random_docs(n, seed=1):
    rng = random.Random(seed)
    return {f"d{i}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for i in range(n)}


def test_lexical_backend_is_a_similarity_backend():
    assert isinstance(LexicalBackend(), SimilarityBackend)


def test_identical_texts_score_one():
    assert LexicalBackend().similarity("retry webhooks", "retry webhooks") == pytest.approx(1.0)


def test_word_order_does_not_matter():
    assert LexicalBackend().similarity("validate input then escape output",
                                       "escape output then validate input") == pytest.approx(1.0)


def test_unrelated_texts_score_zero():
    assert LexicalBackend().similarity("rotate api keys", "paginate database queries") == 0.0


@pytest.mark.parametrize("counting_cost", [0, 10, 10**9])  # prefix candidates only, mixed, counting only
@pytest.mark.parametrize("threshold", [0.3, 0.6, 0.8, 0.9])
def test_pairs_equal_brute_force(threshold, counting_cost, monkeypatch):
    monkeypatch.setattr(similarity, "COUNTING_COST", counting_cost)
    docs = random_docs(60)
    backend = LexicalBackend()
    vecs = backend.vectors(docs)
    expected = {(a, b) for a, b in itertools.combinations(docs, 2)
                if sum(w * vecs[b].get(f, 0.0) for f, w in vecs[a].items()) >= threshold - 1e-12}
    assert {(a, b) for a, b, _ in backend.pairs(docs, threshold)} == expected


def test_pairs_are_sorted_strongest_first():
    scores = [s for _, _, s in LexicalBackend().pairs(random_docs(40), 0.3)]
    assert scores == sorted(scores, reverse=True)


def test_empty_documents_pair_with_nothing():
    assert LexicalBackend().pairs({"a": "", "b": "the of and", "c": ""}, 0.1) == []


def test_nearest_is_exact_when_every_candidate_is_scored():
    docs = random_docs(60)
    backend = LexicalBackend()
    # 60 documents, all words distinctive, 3 x 20 candidates: every other document is scored
    assert backend.nearest(docs, 0.3, 20) == top_k(backend.pairs(docs, 0.3), 20)


def test_nearest_returns_true_pairs_each_among_the_k_best_of_one_end():
    docs = random_docs(80)
    backend = LexicalBackend()
    found = backend.nearest(docs, 0.3, 2)
    exact = {(a, b): s for a, b, s in backend.pairs(docs, 0.3)}
    assert found and all(exact[(a, b)] == s for a, b, s in found)
    for a, b, s in found:
        assert min(sum(1 for x, y, t in found if end in (x, y) and t > s) for end in (a, b)) < 2


def test_top_k_keeps_a_pair_that_is_among_the_k_best_of_either_end():
    pairs = [("a", "b", 0.9), ("b", "c", 0.8), ("a", "c", 0.7)]
    assert top_k(pairs, 1) == [("a", "b", 0.9), ("b", "c", 0.8)]
    assert top_k(pairs, 2) == pairs


def test_most_shared_picks_what_a_stable_heap_would():
    import heapq
    from collections import Counter
    from operator import itemgetter

    rng = random.Random(3)
    for _ in range(500):
        counts = Counter(rng.choice(range(60)) for _ in range(rng.randint(0, 300)))
        width = rng.randint(1, 30)
        expected = {j for j, _ in heapq.nlargest(width, counts.items(), key=itemgetter(1))}
        assert set(similarity._most_shared(counts, width)) == expected
