"""The words of a corpus kept between cycles (`mgcp.operations.kept_words`) give the TF-IDF matrix
`sparse.tf_idf` gives from scratch, bit for bit, however the texts change from cycle to cycle."""

import importlib
import math
import random
from collections import Counter

import numpy as np
import pytest

from mgcp import text
from mgcp.operations import kept_words, sparse

shared = importlib.import_module("mgcp.operations.shared")  # the package exports a function of that name

WORDS = ("pool connection size retry timeout cache type script typescript data base database queue "
         "worker über straße naïve café the and is 42 a x log logs logging front end frontend").split()


def _doc(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return ""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 14)))


def _same(a: sparse.Matrix, b: sparse.Matrix) -> None:
    assert a.n == b.n and a.words == b.words
    for name in ("df", "start", "rank", "tf", "row"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.weight.tobytes() == b.weight.tobytes()  # the same floats, bit for bit


def _cycle(docs: list[str], kept: dict[str, bytes]) -> tuple[sparse.Matrix, dict[str, bytes], list[str]]:
    """One cycle's matrix of `docs` through a reader over `kept`, what is kept after it, and the
    texts it read."""
    reader = shared.Reader(kept)
    read = []

    def words(i: int) -> tuple[str, ...]:
        read.append(docs[i])
        return tuple(text.terms(docs[i]))

    m = reader.corpus(docs, words).matrix()
    write, drop = reader.keep_corpora()
    after = {name: state for name, state in kept.items() if name not in drop}
    after.update(write)
    return m, after, read


def test_random_corpora_changing_from_cycle_to_cycle_give_the_matrix_tf_idf_gives():
    rng = random.Random(5)
    docs = [_doc(rng) for _ in range(300)]
    kept: dict[str, bytes] = {}
    unwritten: set[str] = set()  # texts read by cycles whose corpus was not written (few were new)
    writes = 0
    for turn in range(12):
        m, after, read = _cycle(docs, kept)
        _same(m, sparse.tf_idf([text.terms(d) for d in docs]))
        if turn:
            assert set(read) <= changed | unwritten
        written = after != kept
        writes += written
        unwritten = set() if written else unwritten | set(read)
        kept = after
        changed = set()
        for _ in range(rng.randint(0, 12)):  # refine, archive, add, reorder
            i = rng.randrange(len(docs))
            what = rng.random()
            if what < 0.4:
                docs[i] = _doc(rng)
                changed.add(docs[i])
            elif what < 0.7 and len(docs) > 1:
                del docs[i]
            else:
                docs.insert(i, _doc(rng))
                changed.add(docs[i])
        if turn % 4 == 3:
            rng.shuffle(docs)
        changed = {d for d in changed if d in docs}
    assert writes  # (when a cycle skips writing: test_a_corpus_is_written_again_only_once_...)


def test_a_corpus_is_written_again_only_once_its_kept_one_is_more_than_a_few_texts_behind():
    docs = [f"rule number {i} about the pool" for i in range(200)]  # BEHIND (2%) of 200: 4 texts
    _, kept, _ = _cycle(docs, {})
    seen = []
    for turn in range(5):  # a text more each cycle: the kept corpus lacks 1, 2, 3, 4, then 5
        docs.append(f"a new rule {turn} about retries")
        m, after, read = _cycle(docs, kept)
        _same(m, sparse.tf_idf([text.terms(d) for d in docs]))
        seen.append((len(read), after != kept))
        kept = after
    # each cycle reads again every text the kept corpus lacks; the fifth such text gets it written
    assert seen == [(1, False), (2, False), (3, False), (4, False), (5, True)]
    _, again, read = _cycle(docs, kept)
    assert read == [] and again == kept
    # texts gone count too: a kept corpus holding 5 texts no longer used is written again
    for fewer, written in ((docs[4:], False), (docs[5:], True)):
        m, after, read = _cycle(fewer, kept)
        _same(m, sparse.tf_idf([text.terms(d) for d in fewer]))
        assert read == [] and (after != kept) is written


def test_a_compound_appearing_or_going_changes_the_other_texts_as_a_full_build_does():
    docs = ["the type script build", "a typescript check", "front end tests", "data base pool"]
    m, kept, _ = _cycle(docs, {})
    _same(m, sparse.tf_idf([text.terms(d) for d in docs]))
    assert "typescript" in m.words
    for changed in (["the type script build", "a type check", "front end tests", "frontend and database"],
                    ["the type script build", "a typescript check", "front end tests", "data base pool"],
                    ["", "", "typescript", "café über naïve straße"]):
        m, kept, read = _cycle(changed, kept)
        _same(m, sparse.tf_idf([text.terms(d) for d in changed]))
        assert set(read) <= set(changed) - set(docs)
        docs = changed


def test_an_empty_corpus_and_empty_texts():
    _same(_cycle([], {})[0], sparse.tf_idf([]))
    m, kept, _ = _cycle(["", "", "the"], {})
    _same(m, sparse.tf_idf([[], [], ["the"]]))
    m, _, read = _cycle(["", "the", ""], kept)
    _same(m, sparse.tf_idf([[], ["the"], []]))
    assert read == []


def test_a_corpus_kept_under_other_rules_or_damaged_is_not_used(monkeypatch):
    docs = ["retry the pool", "cache the queue"]
    _, kept, _ = _cycle(docs, {})
    (name, state), = kept.items()
    assert kept_words.Corpus.decode(name, state, shared.WORDS) is not None
    assert kept_words.Corpus.decode(name, state[:-3], shared.WORDS) is None
    flipped = bytearray(state)
    flipped[-len(docs[0])] ^= 1  # a byte of the words changed, every size as it was
    assert kept_words.Corpus.decode(name, bytes(flipped), shared.WORDS) is None
    monkeypatch.setattr(shared, "WORDS", b"another version of the rules")
    m, after, read = _cycle(docs, kept)
    assert read == docs and set(after) == {name} and after[name] != state
    _same(m, sparse.tf_idf([text.terms(d) for d in docs]))


def test_each_corpus_continues_the_kept_one_sharing_most_texts_and_unchanged_ones_are_not_written_again():
    triggers = ["when the pool runs dry", "when retries pile up", "on a slow query"]
    actions = ["raise the pool size", "back off before retrying", "add an index"]
    reader = shared.Reader()
    for docs in (triggers, actions):
        reader.corpus(docs, lambda i, docs=docs: text.terms(docs[i]))
    kept, drop = reader.keep_corpora()
    assert len(kept) == 2 and drop == []
    reader = shared.Reader(kept)
    read = []
    for docs in (actions, triggers[:2] + ["on a fast query"]):
        reader.corpus(docs, lambda i, docs=docs: read.append(docs[i]) or text.terms(docs[i]))
    write, drop = reader.keep_corpora()
    assert read == ["on a fast query"] and drop == []
    assert len(write) == 1 and kept_words.Corpus.decode(*write.popitem(), shared.WORDS).digests[2] == \
        shared.digest(shared.WORDS, "on a fast query")
    # a reader's words of a text it built a corpus of are text.terms's
    assert reader.terms("raise the pool size") == tuple(text.terms("raise the pool size"))
    assert reader.terms("not in any corpus") == tuple(text.terms("not in any corpus"))


@pytest.mark.parametrize("n", [1, 2, 7])
def test_first_seen(n):
    ids = np.array([3, 1, 3, 0, 1, 5][:n], dtype=np.int64)
    assert sparse.first_seen(ids, 6).tolist() == list(dict.fromkeys(ids.tolist()))


def test_first_seen_of_many_values_some_first_met_late():
    rng = np.random.default_rng(4)
    ids = np.r_[rng.integers(0, 500, 100_000), rng.integers(0, 2_000, 100_000)].astype(np.int32)
    assert sparse.first_seen(ids, 2_100).tolist() == list(dict.fromkeys(ids.tolist()))


def test_compounds_are_joined_as_text_join_compounds_joins_each_text():
    rng = random.Random(3)
    parts = ["type", "script", "front", "end", "data", "base", "pool", "set", "up", "setup", "typescript",
             "frontend", "database", "endpool", "upset", "scripttype"]
    docs = [[rng.choice(parts) for _ in range(rng.randint(0, 9))] for _ in range(400)]
    vocabulary = list(dict.fromkeys(w for doc in docs for w in doc))
    index = {w: i for i, w in enumerate(vocabulary)}
    ids = np.array([index[w] for doc in docs for w in doc], dtype=np.int64)
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    joined, joined_lengths = sparse._join_compounds(ids, lengths, vocabulary, sparse.first_seen(ids, len(vocabulary)))
    cuts = sparse.starts(joined_lengths).tolist()
    got = [[vocabulary[i] for i in joined[lo:hi].tolist()] for lo, hi in zip(cuts, cuts[1:])]
    assert got == [text.join_compounds(d, set(vocabulary)) for d in docs]
    assert any(len(g) < len(d) for g, d in zip(got, docs))


def _defined(docs: list[list[str]]) -> list[list[tuple[str, float, int]]]:
    """Each row of `sparse.tf_idf(docs)` as (stem, weight, count) in rank order, by its definition,
    one text at a time: a text's norm is summed over its stems in the order `tf_idf` numbers them
    (the order their words are first used in), so the floats are the same bit for bit."""
    vocabulary = list(dict.fromkeys(w for doc in docs for w in doc))
    number: dict[str, int] = {}
    for word in vocabulary:
        for stem in text.stems([word]):
            number.setdefault(stem, len(number))
    counts = [Counter(text.stems(text.join_compounds(doc, set(vocabulary)))) for doc in docs]
    df = Counter(stem for c in counts for stem in c)
    rank = {stem: i for i, stem in enumerate(sorted(number, key=lambda stem: (df[stem], stem)))}
    rows = []
    for c in counts:
        weight = {f: (1.0 + math.log(tf)) * (math.log((1 + len(docs)) / (1 + df[f])) + 1.0) for f, tf in c.items()}
        norm = 0.0
        for f in sorted(weight, key=number.__getitem__):
            norm += weight[f] * weight[f]
        rows.append(sorted(((f, w / math.sqrt(norm), c[f]) for f, w in weight.items()), key=lambda e: rank[e[0]]))
    return rows


def _rows(m: sparse.Matrix) -> list[list[tuple[str, float, int]]]:
    return [[(m.words[r], w, t) for r, w, t in zip(m.rank[lo:hi].tolist(), m.weight[lo:hi].tolist(),
                                                   m.tf[lo:hi].tolist())]
            for lo, hi in zip(m.start[:-1].tolist(), m.start[1:].tolist())]


@pytest.mark.parametrize("seed", range(6))
def test_tf_idf_of_random_corpora_in_any_word_order_equals_its_definition_bit_for_bit(seed, monkeypatch):
    rng = random.Random(seed)
    parts = WORDS + ["set", "up", "setup", "end", "pool", "endpool", "up", "upset"]
    docs = [text.terms(" ".join(rng.choice(parts) for _ in range(rng.randint(0, 12))) * rng.randint(1, 2))
            for _ in range(rng.randint(1, 120))]
    want = _defined(docs)
    m = sparse.tf_idf(docs)
    assert _rows(m) == want
    assert m.words == sorted(m.words, key=lambda w: (int(m.df[m.words.index(w)]), w))
    # the words numbered in another order, with words no text uses: the same matrix
    vocabulary = list(dict.fromkeys(w for doc in docs for w in doc)) + ["unused", "typescript", "setup"]
    rng.shuffle(vocabulary)
    index = {w: i for i, w in enumerate(vocabulary)}
    ids = np.array([index[w] for doc in docs for w in doc], dtype=np.int32)
    lengths = np.array([len(doc) for doc in docs], dtype=np.int64)
    _same(sparse.tf_idf_of(lengths, ids, vocabulary), m)
    # and when the entries' sort key would not fit in 63 bits, through the general constructor
    monkeypatch.setattr(sparse, "_packed_bits", lambda *bits: 64)
    _same(sparse.tf_idf_of(lengths, ids, vocabulary), m)


def test_rows_of_finds_each_digest_at_its_first_row_as_a_dict_would():
    rng = random.Random(8)
    texts = [str(rng.randrange(50)) for _ in range(200)]  # many texts twice or more
    keys = [shared.digest(shared.WORDS, t) for t in texts]
    corpus = kept_words.Corpus("0", keys, np.zeros(len(keys), dtype=np.int64), np.zeros(0, dtype=np.int32), [])
    asked = [shared.digest(shared.WORDS, str(i)) for i in range(80)]
    first = {}
    for row, key in enumerate(keys):
        first.setdefault(key, row)
    assert corpus.rows_of(b"".join(asked)).tolist() == [first.get(key, -1) for key in asked]
    assert kept_words.Corpus("1", [], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), []
                             ).rows_of(b"".join(asked)).tolist() == [-1] * len(asked)
