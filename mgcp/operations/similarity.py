"""Text similarity between lessons, without comparing every pair.

`SimilarityBackend` is the seam: `pairs(docs, min_similarity)` returns every pair of documents at or
above a cosine similarity, `nearest(docs, min_similarity, k)` each document's k best of them,
`similarity(a, b)` scores one pair, and `vectors(docs)` gives each document's sparse word vector
(for what needs words, such as duplicate detection's containment). `LexicalBackend` is the default
(numpy for the bulk searches); `mgcp.operations.semantic.SemanticBackend` adds static embeddings as
an optional extra.

How `LexicalBackend` works:

- Each document becomes a sparse TF-IDF vector over stemmed words (sublinear tf, smoothed idf),
  L2-normalised, so the dot product is the cosine. Word order does not matter, so reordered clauses
  cost nothing; a swapped or added word costs a little, in proportion to its rarity. The corpus is
  vectorised in bulk (`mgcp.operations.sparse.tf_idf`: each distinct word joined, stemmed and
  weighed once); `vectors` reads one document's dict from that matrix when asked for.
- `pairs` is exact (the same pairs as comparing every pair), sub-quadratic in practice and done in
  bulk by numpy on the corpus as a sparse matrix (`mgcp.operations.sparse`): prefix filtering
  proposes the pairs sharing one of their rarest words, a bound on how many words two documents
  can share (from 256-bit signatures of their words) and then on what their shared rarest words
  leave open drops almost all of them unscored, and the rest are scored exactly.
- `nearest` serves a graph, which needs each document's few nearest neighbours, not every weak
  pair: a document's candidates are the `CANDIDATES_PER_NEIGHBOUR * k` documents sharing the most
  of its *distinctive* words (carried by at most `DISTINCTIVE_DF` documents), counted by numpy;
  they are scored exactly and the k strongest at or above the threshold are kept. Approximate by
  design: a pair that shares only common words is never a candidate (the missed edges are those
  sharing the fewest distinctive words).
- Everything is built in document order and in one global word order (rarest first, then the
  word), never in set order, so results do not depend on the process's hash seed.

numpy is imported only when a search runs, never by importing this module.

What each choice bought on the benchmark is in benchmarks/README.md.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from itertools import chain

from mgcp import text
from mgcp.operations.shared import CycleCache, stage, terms, tf_idf, ticker

Doc = Hashable
DISTINCTIVE_DF = 200          # a word in more documents than this does not propose neighbours
CANDIDATES_PER_NEIGHBOUR = 2  # candidates scored exactly per neighbour asked for


class SimilarityBackend(ABC):
    """Scores text similarity in [0, 1]."""

    @abstractmethod
    def pairs(self, docs: dict[Doc, str], min_similarity: float) -> list[tuple[Doc, Doc, float]]:
        """Every pair (a, b, similarity) with similarity >= min_similarity, a before b in `docs`
        order, sorted by similarity (highest first), then by that order."""

    @abstractmethod
    def similarity(self, a: str, b: str) -> float:
        """The similarity of two texts on their own (no corpus statistics)."""

    @abstractmethod
    def vectors(self, docs: dict[Doc, str]) -> Mapping[Doc, dict[str, float]]:
        """Each document as an L2-normalised sparse vector of words (so a dot product is a cosine)."""

    def nearest(self, docs: dict[Doc, str], min_similarity: float, k: int) -> list[tuple[Doc, Doc, float]]:
        """Each document's (at most) k most similar documents at or above min_similarity, as pairs
        sorted like `pairs`; a pair is kept when it is among the k nearest of either end. This
        default is exact; a backend may approximate it for speed."""
        return top_k(self.pairs(docs, min_similarity), k)


def matrix_of(cache: CycleCache | None, texts: list[str]):
    """The texts' TF-IDF vectors as a `mgcp.operations.sparse.Matrix`, a row per text in order:
    `shared.tf_idf` over each text's `text.terms`, read once per text in a cycle (through the cache's
    `Reader`: only the texts no kept corpus holds), the reading ticking the cache's progress."""
    tick = ticker(cache)

    def read(i: int) -> tuple[str, ...]:
        tick(i, len(texts))
        return terms(cache, texts[i])

    return tf_idf(cache, texts, read)


class LexicalBackend(SimilarityBackend):
    """TF-IDF cosine over stemmed words, all-pairs by prefix filtering (see the module docstring).
    With a `cache`, the operations of one cycle vectorise the same lessons once."""

    def __init__(self, cache: CycleCache | None = None):
        self.cache = cache
        self._matrices: list = []  # (keys, texts, matrix) of each corpus built

    # -- vectors ---------------------------------------------------------------------------------

    def counts(self, docs: dict[Doc, str]) -> dict[Doc, Counter]:
        """Each document's stemmed terms, with the compounds the documents also write as one word
        joined (`text.join_compounds`)."""
        words = {key: terms(self.cache, doc) for key, doc in docs.items()}
        vocabulary = set(chain.from_iterable(words.values()))
        return {key: Counter(text.stems(text.join_compounds(w, vocabulary))) for key, w in words.items()}

    def vectors(self, docs: dict[Doc, str]) -> Mapping[Doc, dict[str, float]]:
        """TF-IDF vectors (L2-normalised) of a corpus, each read from `matrix` when asked for;
        empty documents get an empty vector."""
        return _Rows(list(docs), self.matrix(docs))

    def similarity(self, a: str, b: str) -> float:
        counts = self.counts({0: a, 1: b})
        va, vb = (_normalise({f: 1.0 + math.log(tf) for f, tf in counts[k].items()}) for k in (0, 1))
        return dot(va, vb)

    def matrix(self, docs: dict[Doc, str]):
        """The corpus's TF-IDF vectors as a `mgcp.operations.sparse.Matrix`, rows in `docs` order
        (`sparse.tf_idf` over each document's `text.terms`, read once per text in a cycle, and with
        the cache's `Reader` only for the texts no kept corpus holds: `shared.tf_idf`). Kept
        by this backend, which an operation makes for its own run, so an operation that searches
        one corpus in several ways builds it once, and its memory goes with the operation."""
        keys, texts = list(docs), list(docs.values())
        for kept_keys, kept_texts, m in self._matrices:  # the same objects again, mostly: cheap to compare
            if kept_keys == keys and kept_texts == texts:
                return m
        m = matrix_of(self.cache, texts)
        self._matrices.append((keys, texts, m))
        return m

    # -- all pairs -------------------------------------------------------------------------------

    def pairs(self, docs: dict[Doc, str], min_similarity: float) -> list[tuple[Doc, Doc, float]]:
        from mgcp.operations import sparse

        a, b, s = sparse.pairs(self.matrix(docs), max(min_similarity, 1e-9), ticker(self.cache))
        return _sorted_pairs(list(docs), a, b, s)

    # -- nearest neighbours ----------------------------------------------------------------------

    def nearest(self, docs: dict[Doc, str], min_similarity: float, k: int) -> list[tuple[Doc, Doc, float]]:
        keys = list(docs)
        with stage(self.cache, 0.0, 0.6):  # reading the words is most of the work
            m = self.matrix(docs)
        with stage(self.cache, 0.6, 1.0):
            a, b, s, _ = nearest_in(m, keys, min_similarity, k, tick=ticker(self.cache))
        return [(keys[i], keys[j], min(v, 1.0)) for i, j, v in zip(a.tolist(), b.tolist(), s.tolist())]


@dataclass(frozen=True)
class Candidates:
    """Each document's candidates (the documents its own search proposed, best first) as arrays over
    row numbers: row r's are other[start[r]:start[r + 1]], and score[e] is what the pair of entry e
    scored when it was last scored (`nearest_in`)."""
    start: "np.ndarray"
    other: "np.ndarray"
    score: "np.ndarray"


def nearest_in(m, keys: list[Doc], min_similarity: float, k: int, kept: Candidates | None = None,
               stale=None, tick=None):
    """`LexicalBackend.nearest` on the corpus's TF-IDF matrix `m` (rows in `keys` order), as index
    arrays (a, b, similarity; a < b, strongest first), and each document's candidates with the
    scores of their pairs (`Candidates`).

    With `kept` (candidates from an earlier call, renumbered to the rows of `keys`; a candidate no
    longer in `keys` is -1) and `stale` (a boolean per row: changed since, or nothing kept), a row
    keeps its candidates, less those gone, unless it is stale or the candidates gone leave it fewer
    than k (and fewer than it kept); only those rows search again (against every row). A candidate
    that is itself stale stays a candidate. A pair with a stale end or an end searched again is
    scored anew; a pair between two rows that both kept their candidates keeps its kept score (an
    earlier matrix's, so it drifts with the idf until its pair is scored anew). With no `kept` the
    pairs are `nearest`'s."""
    import numpy as np

    from mgcp.operations import sparse

    width = CANDIDATES_PER_NEIGHBOUR * k
    search = None
    if kept is not None:
        owner = np.repeat(np.arange(m.n, dtype=np.int64), np.diff(kept.start))
        there = kept.other >= 0  # a candidate gone is dropped
        # a row searches again when it is stale, or when a candidate gone leaves it fewer than k
        again = np.array(stale, dtype=bool) | (np.bincount(owner[there], minlength=m.n)
                                               < np.minimum(np.diff(kept.start), k))
        search = np.flatnonzero(again)
    row, other = sparse.proposals(m, m.df <= DISTINCTIVE_DF, width, search, tick)
    if kept is not None:
        taken = ~again[owner] & there
        # each row's entries, best first: the searched rows' and the kept ones' are two runs, each in
        # row order, which a stable sort merges
        held = len(row)
        row, other = np.concatenate([row, owner[taken]]), np.concatenate([other, kept.other[taken]])
        merged = np.argsort(row, kind="stable")
        row, other = row[merged], other[merged]
    # the distinct pairs (a < b, ascending), and each entry's pair
    code = np.minimum(row, other) * m.n + np.maximum(row, other)
    by_code = np.argsort(code)
    head = np.r_[True, code[by_code][1:] != code[by_code][:-1]] if len(code) else np.zeros(0, dtype=bool)
    pair = code[by_code][head]
    of_entry = np.empty(len(code), dtype=np.int64)
    of_entry[by_code] = np.cumsum(head) - 1
    del by_code, head
    a, b = pair // max(m.n, 1), pair % max(m.n, 1)
    if kept is None:
        s = m.dots(a, b)
    else:
        s = np.zeros(len(pair))
        fresh = again[a] | again[b]
        s[fresh] = m.dots(a[fresh], b[fresh])
        # the rest are pairs of two rows that kept their candidates: each kept entry's score
        from_kept = np.flatnonzero(merged >= held)
        at = of_entry[from_kept]
        still = ~fresh[at]
        s[at[still]] = kept.score[taken][merged[from_kept[still]] - held]
    found = Candidates(sparse.starts(np.bincount(row, minlength=m.n)), other, s[of_entry])
    keep = s >= min_similarity - 1e-12
    a, b, s = a[keep], b[keep], s[keep]
    order = sparse.strongest_first(a, b, s)
    a, b, s = a[order], b[order], s[order]
    best = sparse.among_k_best(a, b, k)
    return a[best], b[best], s[best], found


class _Rows(Mapping):
    """A matrix's rows by document key, each a word -> weight dict made when asked for."""

    def __init__(self, keys: list[Doc], matrix):
        self.index = dict(zip(keys, range(len(keys))))
        self.m = matrix

    def __getitem__(self, key: Doc) -> dict[str, float]:
        return self.m.vector(self.index[key])

    def __iter__(self):
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


def _sorted_pairs(keys: list[Doc], a, b, s) -> list[tuple[Doc, Doc, float]]:
    """Index arrays as (key, key, similarity) pairs, strongest first, then in `keys` order."""
    from mgcp.operations import sparse

    order = sparse.strongest_first(a, b, s).tolist()
    a, b, s = a.tolist(), b.tolist(), s.tolist()
    return [(keys[a[i]], keys[b[i]], min(s[i], 1.0)) for i in order]


def top_k(pairs: list[tuple[Doc, Doc, float]], k: int) -> list[tuple[Doc, Doc, float]]:
    """The pairs (sorted strongest first) that are among the k strongest of either of their ends."""
    taken: Counter = Counter()
    kept = []
    for a, b, s in pairs:
        if taken[a] < k or taken[b] < k:
            kept.append((a, b, s))
        taken[a] += 1
        taken[b] += 1
    return kept


def _normalise(vec: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in vec.values()))
    return {f: w / norm for f, w in vec.items()} if norm else {}


def dot(a: dict[str, float], b: dict[str, float]) -> float:
    """The dot product of two sparse vectors: their cosine, when both are L2-normalised."""
    # The key intersection runs in C; candidates usually share only a few words.
    return math.fsum([a[f] * b[f] for f in a.keys() & b.keys()])
