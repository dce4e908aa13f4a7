import itertools
import random

import numpy as np
import pytest

from mgcp.operations import similarity, sparse
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


@pytest.mark.parametrize("block", [1, 50, 4_000_000])  # candidates generated a row at a time .. all at once
@pytest.mark.parametrize("threshold", [0.3, 0.6, 0.8, 0.9])
def test_pairs_equal_brute_force(threshold, block, monkeypatch):
    monkeypatch.setattr(sparse, "BLOCK_ENTRIES", block)
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


def test_pairs_equal_brute_force_on_near_copies_with_colliding_signatures(monkeypatch):
    # one signature word: every word sets the same bit, so the bound leans on the word counts alone
    monkeypatch.setattr(sparse, "MASK_WORDS", 1)
    rng = random.Random(7)
    base = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(30)]
    docs = {}
    for i, doc in enumerate(base):
        words = doc.split()
        docs[f"b{i}"] = doc
        for c in range(2):  # light edits: a word swapped or dropped
            edited = list(words)
            if rng.random() < 0.5:
                edited[rng.randrange(len(edited))] = rng.choice(WORDS)
            else:
                del edited[rng.randrange(len(edited))]
            docs[f"b{i}c{c}"] = " ".join(edited)
    backend = LexicalBackend()
    vecs = backend.vectors(docs)
    for threshold in (0.7, 0.8, 0.9):
        expected = {(a, b) for a, b in itertools.combinations(docs, 2)
                    if sum(w * vecs[b].get(f, 0.0) for f, w in vecs[a].items()) >= threshold - 1e-12}
        assert {(a, b) for a, b, _ in backend.pairs(docs, threshold)} == expected


def test_scores_are_the_exact_cosines_either_way_round():
    docs = random_docs(50, seed=4)
    backend = LexicalBackend()
    vecs = backend.vectors(docs)
    m = backend.matrix(docs)
    keys = list(docs)
    a = np.array([i for i in range(50) for j in range(50)])
    b = np.array([j for i in range(50) for j in range(50)])
    forward, backward = m.dots(a, b), m.dots(b, a)
    assert (forward == backward).all()
    for i, j, s in zip(a.tolist(), b.tolist(), forward.tolist()):
        assert s == pytest.approx(similarity.dot(vecs[keys[i]], vecs[keys[j]]), abs=1e-12)


def test_neighbours_are_the_rows_sharing_most_distinctive_words_ties_to_the_rarer_word():
    from collections import Counter

    docs = random_docs(70, seed=5)
    backend = LexicalBackend()
    vecs = backend.vectors(docs)
    m = backend.matrix(docs)
    keys = list(docs)
    eligible = m.df <= 20
    rank = {w: r for r, w in enumerate(m.words)}
    expected = set()
    for i, key in enumerate(keys):
        mine = sorted((rank[f] for f in vecs[key] if eligible[rank[f]]))
        shared = Counter()
        rarest = {}
        for j, other in enumerate(keys):
            common = [r for r in mine if m.words[r] in vecs[other]]
            if j != i and common:
                shared[j], rarest[j] = len(common), common[0]
        for j in sorted(shared, key=lambda j: (-shared[j], rarest[j], j))[:6]:
            expected.add((min(i, j), max(i, j)))
    for block in (1, 30, 4_000_000):
        sparse.BLOCK_ENTRIES, before = block, sparse.BLOCK_ENTRIES
        try:
            row, other = sparse.proposals(m, eligible, 6)
        finally:
            sparse.BLOCK_ENTRIES = before
        assert set(zip(np.minimum(row, other).tolist(), np.maximum(row, other).tolist())) == expected


def test_among_k_best_keeps_what_top_k_keeps():
    rng = random.Random(9)
    for _ in range(200):
        n = rng.randint(0, 40)
        a = np.array([rng.randrange(8) for _ in range(n)], dtype=np.int64)
        b = np.array([rng.randrange(8) for _ in range(n)], dtype=np.int64)
        k = rng.randint(1, 4)
        expected = top_k([(x, y, 1.0 - i / 100) for i, (x, y) in enumerate(zip(a.tolist(), b.tolist()))], k)
        kept = sparse.among_k_best(a, b, k)
        assert [(x, y) for x, y, keep in zip(a.tolist(), b.tolist(), kept.tolist()) if keep] == \
            [(x, y) for x, y, _ in expected]


@pytest.mark.parametrize("in_pair_order", [True, False])
def test_strongest_first_is_by_rounded_score_then_by_pair(in_pair_order):
    rng = random.Random(4)
    for _ in range(200):
        pairs = [(rng.randrange(12), rng.randrange(12)) for _ in range(rng.randint(0, 50))]
        pairs = [(x, y) for x, y in pairs if x < y]
        if in_pair_order:  # as the searches give them (the stable sort by score alone)
            pairs = sorted(set(pairs))
        scores = [rng.choice([0.25, 0.5, 0.5 + 1e-12, 0.75, 0.1234567885, 0.1234567885 + 1e-17, 1.0 + 2e-16])
                  for _ in pairs]
        a = np.array([x for x, _ in pairs], dtype=np.int64)
        b = np.array([y for _, y in pairs], dtype=np.int64)
        expected = sorted(range(len(pairs)), key=lambda i: (-round(scores[i], 9), pairs[i], i))
        assert sparse.strongest_first(a, b, np.array(scores)).tolist() == expected


@pytest.mark.parametrize("top", [1, 7, 70_000, 2 ** 40])
def test_stable_order_is_numpys_stable_argsort(top):
    rng = np.random.default_rng(top)
    for size in (0, 1, 5, 300):
        keys = rng.integers(0, top, size)
        assert sparse.stable_order(keys).tolist() == np.argsort(keys, kind="stable").tolist()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_contained_finds_every_pair_whose_longer_row_holds_the_shorter(seed):
    rng = random.Random(seed)
    docs = {}
    for i in range(80):
        words = rng.sample(WORDS, rng.randint(2, 8))
        docs[f"d{i}"] = " ".join(words)
        if rng.random() < 0.4:  # the same words and a few more
            docs[f"d{i}q"] = " ".join(words + rng.sample(WORDS, rng.randint(1, 6)))
    backend = LexicalBackend()
    vecs = backend.vectors(docs)
    keys = list(docs)
    for max_df in (2, 5, 200):
        df = {}
        for v in vecs.values():
            for f in v:
                df[f] = df.get(f, 0) + 1
        expected = set()
        for a, va in vecs.items():
            rarest = min(va, key=lambda f: (df[f], f), default=None)
            if len(va) < 3 or df[rarest] > max_df:
                continue
            for b, vb in vecs.items():
                if len(va) < len(vb) <= 2.0 * len(va) and all(f in vb for f in va):
                    expected.add((a, b))
        small, large = sparse.contained(backend.matrix(docs), 3, 2.0, max_df)
        assert {(keys[i], keys[j]) for i, j in zip(small.tolist(), large.tolist())} == expected
        assert max_df < 200 or expected


def reference_vectors(docs):
    """TF-IDF vectors by their definition, a document at a time (`text.join_compounds` over the
    corpus's words, `text.stems`, sublinear tf x smoothed idf, L2-normalised)."""
    import math
    from collections import Counter

    from mgcp import text

    words = {key: text.terms(doc) for key, doc in docs.items()}
    vocabulary = set(itertools.chain.from_iterable(words.values()))
    counts = {key: Counter(text.stems(text.join_compounds(w, vocabulary))) for key, w in words.items()}
    df = Counter(f for c in counts.values() for f in c)
    n = len(docs)
    out = {}
    for key, c in counts.items():
        vec = {f: (1.0 + math.log(tf)) * (math.log((1 + n) / (1 + df[f])) + 1.0) for f, tf in c.items()}
        norm = math.sqrt(sum(w * w for w in vec.values()))
        out[key] = {f: w / norm for f, w in vec.items()} if norm else {}
    return out


def test_bulk_vectors_equal_their_definition_compounds_stop_words_and_numbers_included():
    rng = random.Random(11)
    pieces = WORDS + ["type", "script", "typescript", "next", "js", "nextjs", "a", "the", "of", "42", "x",
                      "tail", "wind", "tailwind", "css", "windcss", "retries", "retrying", "useEffect"]
    docs = {f"d{i}": " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))) for i in range(300)}
    docs.update({"split": "type", "next-doc": "script again", "triple": "tail wind css", "empty": "",
                 "only-stop": "the of a", "repeated": "cache cache cache retry"})
    got = LexicalBackend().vectors(docs)
    want = reference_vectors(docs)
    assert list(got) == list(want)
    for key in docs:
        assert got[key].keys() == want[key].keys(), key
        for f, w in want[key].items():
            assert got[key][f] == pytest.approx(w, rel=1e-12, abs=1e-15)


def test_a_compound_is_joined_left_to_right_and_never_across_documents():
    docs = {"a": "tail wind css", "b": "tailwind windcss", "c": "type", "d": "script typescript"}
    vecs = LexicalBackend().vectors(docs)
    assert set(vecs["a"]) == {"tailwind", "css"}  # "tail wind" joins first; "wind css" is not read
    assert set(vecs["c"]) == {"type"} and set(vecs["d"]) == {"script", "typescript"}


@pytest.mark.parametrize("size", [0, 1, 5, 1000])
def test_distinct_is_numpys_unique(size):
    values = np.random.default_rng(size).integers(0, max(size // 3, 1), size)
    assert sparse.distinct(values).tolist() == np.unique(values).tolist()


def test_nearest_in_the_corpus_matrix_is_nearest():
    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    docs = {f"d{i:03d}": " ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for i in range(150)}
    backend = LexicalBackend()
    keys = list(docs)
    m = backend.matrix(docs)
    a, b, s, proposed = similarity.nearest_in(m, keys, 0.2, 3)
    assert [(keys[i], keys[j], min(v, 1.0)) for i, j, v in zip(a.tolist(), b.tolist(), s.tolist())] \
        == LexicalBackend().nearest(docs, 0.2, 3)
    # each row's candidates, none of them itself, each with its pair's score
    owner = np.repeat(np.arange(len(keys)), np.diff(proposed.start))
    assert len(proposed.start) == len(keys) + 1 and (proposed.other != owner).all()
    low, high = np.minimum(owner, proposed.other), np.maximum(owner, proposed.other)
    assert proposed.score.tolist() == m.dots(low, high).tolist()


def test_bulk_rounding_is_pythons_round_ties_included():
    rng = np.random.default_rng(3)
    near_ties = (np.arange(5000) + 0.5) / 1e9
    values = np.concatenate([rng.random(20000), near_ties, np.nextafter(near_ties, 0), np.nextafter(near_ties, 1),
                             [0.0, 1.0, 1e-9, 5e-10, 2.5e-9, 1e300]])
    assert sparse._round9(values).tolist() == [round(v, 9) for v in values.tolist()]


def test_digest_places_is_each_digests_first_place_as_a_dict_would_give_it():
    import hashlib
    import random

    from mgcp.operations import sparse

    rng = random.Random(3)
    pool = [hashlib.blake2b(str(i).encode(), digest_size=16).digest() for i in range(60)]
    for _ in range(50):
        kept = [rng.choice(pool) for _ in range(rng.randint(0, 40))]  # repeats: the first copy counts
        asked = [rng.choice(pool) for _ in range(rng.randint(0, 30))]
        first: dict[bytes, int] = {}
        for place, digest in enumerate(kept):
            first.setdefault(digest, place)
        found = sparse.digest_places(b"".join(kept), b"".join(asked))
        assert found.tolist() == [first.get(digest, -1) for digest in asked]
