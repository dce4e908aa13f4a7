"""Text similarity between lessons, without comparing every pair.

`SimilarityBackend` is the seam: `pairs(docs, min_similarity)` returns every pair of documents at or
above a cosine similarity, `nearest(docs, min_similarity, k)` each document's k best of them,
`similarity(a, b)` scores one pair, and `vectors(docs)` gives each document's sparse word vector
(for what needs words, such as duplicate detection's containment). `LexicalBackend` is the default
(stdlib only); `mgcp.operations.semantic.SemanticBackend` adds static embeddings as an optional extra.

How `LexicalBackend.pairs` stays sub-quadratic (all-pairs similarity search with prefix filtering,
after Bayardo, Ma & Srikant, "Scaling up all pairs similarity search", WWW 2007):

- Each document becomes a sparse TF-IDF vector over stemmed words (sublinear tf, smoothed idf),
  L2-normalised, so the dot product is the cosine. Word order does not matter, so reordered clauses
  cost nothing; a swapped or added word costs a little, in proportion to its rarity.
- Features are put in one global order, rarest first. For a document x, its *prefix* is the shortest
  run of its rarest features such that the rest (the suffix) cannot reach the threshold t on its own:
  min(||suffix||, sum_f x_f * max_weight_f) < t. If cos(x, y) >= t then x and y share a feature that
  is in both prefixes (their rarest common feature must be in x's prefix, or the suffix bound is
  violated, and likewise for y). So only documents that meet in a prefix posting list are candidates,
  and each candidate is verified with an exact sparse dot product.
- At the duplicate thresholds (0.8) a prefix holds only a document's few rarest words, but those are
  often topic words: a lesson still meets many earlier ones in its prefix lists, of which almost
  none come near the threshold. So each document also
  takes a second route when it is cheaper: count, in C (`Counter`), how many of its rarest words
  every earlier document shares, and check only those sharing at least the number a match needs
  (`_counting_prefix` gives the bound). The route is chosen per document by comparing posting
  entries to count with candidates to check (`COUNTING_COST`); both routes are exact.
- The result is exact (same pairs as brute force), deterministic, and memory is linear in the
  total number of words. MinHash-LSH would be approximate and, in pure Python, slower to hash; a
  plain inverted index on all tokens would touch every pair sharing a common word.
- At low thresholds (community detection's 0.35) the prefix covers most of a document and nearly
  every pair sharing a topic word becomes a candidate. A graph needs each lesson's nearest neighbours, not every weak pair, so `nearest` answers
  that instead: a document's candidates are the documents sharing the most of its *distinctive*
  words (carried by at most `DISTINCTIVE_DF` documents; counted in C by `Counter`), the best
  `CANDIDATES_PER_NEIGHBOUR * k` of them are scored exactly, and the k strongest at or above the
  threshold are kept. Approximate by design: a pair that shares only common words is never a
  candidate (the missed edges are those sharing the fewest distinctive words).

What each choice bought on the benchmark is in benchmarks/README.md.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Hashable
from itertools import chain

from mgcp import text
from mgcp.operations.shared import CycleCache, shared, ticker

Doc = Hashable
DISTINCTIVE_DF = 200          # a word in more documents than this does not propose neighbours
CANDIDATES_PER_NEIGHBOUR = 2  # candidates scored exactly per neighbour asked for
COUNTING_SUFFIX = 0.75        # see _counting_prefix
COUNTING_COST = 10            # posting entries counted in C per candidate checked in Python


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
    def vectors(self, docs: dict[Doc, str]) -> dict[Doc, dict[str, float]]:
        """Each document as an L2-normalised sparse vector of words (so a dot product is a cosine)."""

    def nearest(self, docs: dict[Doc, str], min_similarity: float, k: int) -> list[tuple[Doc, Doc, float]]:
        """Each document's (at most) k most similar documents at or above min_similarity, as pairs
        sorted like `pairs`; a pair is kept when it is among the k nearest of either end. This
        default is exact; a backend may approximate it for speed."""
        return top_k(self.pairs(docs, min_similarity), k)


class LexicalBackend(SimilarityBackend):
    """TF-IDF cosine over stemmed words, all-pairs by prefix filtering (see the module docstring).
    With a `cache`, the operations of one cycle vectorise the same lessons once."""

    def __init__(self, cache: CycleCache | None = None):
        self.cache = cache

    # -- vectors ---------------------------------------------------------------------------------

    @staticmethod
    def counts(docs: dict[Doc, str]) -> dict[Doc, Counter]:
        """Each document's stemmed terms (`text.terms`), with the compounds the corpus also writes
        as one word joined (`text.join_compounds`)."""
        words = {key: text.terms(doc) for key, doc in docs.items()}
        vocabulary = set(chain.from_iterable(words.values()))
        return {key: Counter(text.stems(text.join_compounds(w, vocabulary))) for key, w in words.items()}

    def vectors(self, docs: dict[Doc, str]) -> dict[Doc, dict[str, float]]:
        """TF-IDF vectors (L2-normalised) of a corpus; empty documents get an empty vector."""
        return shared(self.cache, ("tf-idf", tuple(docs.items())), lambda: self._vectors(docs))

    def _vectors(self, docs: dict[Doc, str]) -> dict[Doc, dict[str, float]]:
        counts = self.counts(docs)
        df: Counter = Counter()
        for c in counts.values():
            df.update(c.keys())
        n = len(docs)
        idf = {f: math.log((1 + n) / (1 + d)) + 1.0 for f, d in df.items()}
        return {key: _normalise({f: (1.0 + math.log(tf)) * idf[f] for f, tf in c.items()})
                for key, c in counts.items()}

    def similarity(self, a: str, b: str) -> float:
        counts = self.counts({0: a, 1: b})
        va, vb = (_normalise({f: 1.0 + math.log(tf) for f, tf in counts[k].items()}) for k in (0, 1))
        return dot(va, vb)

    # -- all pairs -------------------------------------------------------------------------------

    def pairs(self, docs: dict[Doc, str], min_similarity: float) -> list[tuple[Doc, Doc, float]]:
        keys = list(docs)
        vecs = self.vectors(docs)
        return self.pairs_from_vectors(keys, [vecs[k] for k in keys], min_similarity)

    def pairs_from_vectors(self, keys: list[Doc], vecs: list[dict[str, float]],
                           min_similarity: float) -> list[tuple[Doc, Doc, float]]:
        t = max(min_similarity, 1e-9)
        df: Counter = Counter()
        max_weight: dict[str, float] = {}
        for v in vecs:
            df.update(v.keys())
            for f, w in v.items():
                if w > max_weight.get(f, 0.0):
                    max_weight[f] = w
        rank = {f: i for i, f in enumerate(sorted(df, key=lambda f: (df[f], f)))}

        keysets = [frozenset(v) for v in vecs]
        reach = [_reach(v) for v in vecs]
        prefixed: dict[str, list[int]] = defaultdict(list)   # feature -> documents with it in their prefix
        everyone: dict[str, list[int]] = defaultdict(list)   # feature -> every document with it
        found: list[tuple[int, int, float]] = []
        floor = min_similarity - 1e-12
        fsum = math.fsum
        tick = ticker(self.cache)
        for i, vec in enumerate(vecs):
            tick(i, len(vecs))
            if not vec:
                continue
            features = sorted(vec, key=rank.__getitem__)
            prefix = features[: _prefix_length(features, vec, max_weight, t)]
            counted, need = _counting_prefix(features, vec, t)
            lists = [everyone[f] for f in counted]
            if sum(map(len, lists)) <= COUNTING_COST * sum(len(prefixed[f]) for f in prefix):
                counts = Counter(chain.from_iterable(lists))
                candidates = [j for j, c in counts.items() if c >= need]
            else:
                pool: set[int] = set()
                for f in prefix:
                    pool.update(prefixed[f])
                keys_i, reach_i = keysets[i], reach[i]
                # Cauchy-Schwarz on the c shared words: the score is at most the product of the
                # norms of each side's c heaviest weights. Most candidates share too few words.
                candidates = [j for j in pool
                              if reach_i[(c := len(keys_i & keysets[j]))] * reach[j][c] >= floor]
            for f in prefix:
                prefixed[f].append(i)
            for f in features:
                everyone[f].append(i)
            for j in candidates:
                vec_j = vecs[j]
                # fsum is exactly rounded, so set iteration order (hash seed) cannot move a score.
                s = fsum([vec[f] * vec_j[f] for f in keysets[i] & keysets[j]])
                if s >= floor:
                    found.append((j, i, min(s, 1.0)))
        found.sort(key=lambda p: (-round(p[2], 9), p[0], p[1]))
        return [(keys[a], keys[b], s) for a, b, s in found]

    # -- nearest neighbours ----------------------------------------------------------------------

    def nearest(self, docs: dict[Doc, str], min_similarity: float, k: int) -> list[tuple[Doc, Doc, float]]:
        keys = list(docs)
        vecs = list(self.vectors(docs).values())
        df: Counter = Counter()
        for v in vecs:
            df.update(v.keys())
        postings: dict[str, list[int]] = defaultdict(list)
        for i, v in enumerate(vecs):
            for f in v:
                if df[f] <= DISTINCTIVE_DF:
                    postings[f].append(i)
        width = CANDIDATES_PER_NEIGHBOUR * k
        floor = min_similarity - 1e-12
        fsum = math.fsum
        scored: dict[tuple[int, int], float] = {}
        tick = ticker(self.cache)
        for i, vec in enumerate(vecs):
            tick(i, len(vecs))
            # rarest words first, so that among equal counts the documents sharing a rarer word win
            lists = [postings[f] for f in sorted(vec, key=lambda f: (df[f], f)) if df[f] <= DISTINCTIVE_DF]
            counts = Counter(chain.from_iterable(lists))
            counts.pop(i, None)
            keys_i = vec.keys()
            for j in _most_shared(counts, width):
                pair = (i, j) if i < j else (j, i)
                if pair not in scored:
                    vec_j = vecs[j]
                    scored[pair] = fsum([vec[f] * vec_j[f] for f in keys_i & vec_j.keys()])
        found = sorted(((a, b, min(s, 1.0)) for (a, b), s in scored.items() if s >= floor),
                       key=lambda p: (-round(p[2], 9), p[0], p[1]))
        return top_k([(keys[a], keys[b], s) for a, b, s in found], k)


def _most_shared(counts: Counter, width: int) -> list:
    """The `width` keys with the highest counts, ties going to the first counted: the set
    `heapq.nlargest` would pick, found by a C-level sort of the counts and two filters instead of a
    heap loop in Python."""
    if len(counts) <= width:
        return list(counts)
    cut = sorted(counts.values(), reverse=True)[width - 1]
    above = [j for j, c in counts.items() if c > cut]
    return above + [j for j, c in counts.items() if c == cut][: width - len(above)]


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


def _reach(vec: dict[str, float]) -> list[float]:
    """reach[c]: the norm of the c heaviest weights of a vector, c = 0..len (1.0 at the end)."""
    out, total = [0.0], 0.0
    for w in sorted(vec.values(), reverse=True):
        total += w * w
        out.append(math.sqrt(total))
    return out


def _counting_prefix(features: list[str], vec: dict[str, float], t: float) -> tuple[list[str], int]:
    """The leading (rarest) features whose count decides, and how many of them a candidate must share.

    Split x into the counted features C (the rarest, until the rest's norm is below
    COUNTING_SUFFIX * t) and the rest R. For any unit y sharing c features of C:
    x.y <= reach_C[c] * ||y_C|| + ||x_R|| * ||y_R|| <= sqrt(reach_C[c]^2 + ||x_R||^2),
    where reach_C[c] is the norm of C's c heaviest weights. So y can reach t only if it shares at
    least `need` features of C, the smallest c where that bound reaches t."""
    rest, k = 1.0, 0
    while k < len(features) and rest >= (COUNTING_SUFFIX * t) ** 2:
        rest -= vec[features[k]] ** 2
        k += 1
    total, need = max(rest, 0.0), 0
    for w in sorted((vec[f] for f in features[:k]), reverse=True):
        if total >= t * t - 1e-9:
            break
        total += w * w
        need += 1
    return features[:k], max(need, 1)


def _prefix_length(features: list[str], vec: dict[str, float], max_weight: dict[str, float],
                   t: float) -> int:
    """How many leading (rarest) features must be indexed so that the rest cannot reach t."""
    suffix_sq = 0.0
    suffix_bound = 0.0
    k = len(features)
    while k > 0:
        w = vec[features[k - 1]]
        sq = suffix_sq + w * w
        bound = suffix_bound + w * max_weight[features[k - 1]]
        if min(math.sqrt(sq), bound) >= t:
            break
        suffix_sq, suffix_bound = sq, bound
        k -= 1
    return max(k, 1)


def _normalise(vec: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in vec.values()))
    return {f: w / norm for f, w in vec.items()} if norm else {}


def dot(a: dict[str, float], b: dict[str, float]) -> float:
    """The dot product of two sparse vectors: their cosine, when both are L2-normalised."""
    # The key intersection runs in C; candidates usually share only a few words.
    return math.fsum([a[f] * b[f] for f in a.keys() & b.keys()])
