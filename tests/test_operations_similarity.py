import itertools
import random

import pytest

from mgcp.operations.similarity import LexicalBackend, SimilarityBackend

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


@pytest.mark.parametrize("threshold", [0.3, 0.6, 0.9])
def test_pairs_equal_brute_force(threshold):
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
