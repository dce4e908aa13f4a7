"""Static-embedding similarity (the optional `semantic` extra: `pip install 'mgcp[semantic]'`).

`SemanticBackend` is a `SimilarityBackend` that adds, to the lexical TF-IDF cosine, the cosine of
two texts' model2vec embeddings (a static model: each token has a fixed vector and a text is the
mean of its tokens' vectors, so encoding is a table look-up and numpy is all it needs at run time).
It lets two lessons that say the same thing in different words meet: "retry webhook deliveries"
and "resend failed callbacks" share no word, but their words sit close together in the model.

How the two scores combine: the similarity of a pair is the HIGHER of its lexical and its semantic
cosine, max(lexical, semantic).
- A weighted mean could never raise a paraphrase that shares no word above the mean's weight on the
  semantic side (with half each, at most 0.5, far below the review threshold), which is the very
  case this backend exists for.
- The maximum keeps every pair the lexical backend finds at the score it finds it (the semantic
  side can only add pairs or raise scores), so the thresholds keep their meaning for lexical
  duplicates and nothing found today is lost.
- Nearest neighbours combine simply: a document's k best under the maximum are among its k best
  lexically or its k best semantically, so `nearest` merges the two lists (the semantic list is
  exact; the lexical one is approximate, as it is on its own).
The price: a model that rates unrelated texts on one topic alike raises pairs a reviewer declines.

What stays lexical: `vectors` returns the lexical TF-IDF vectors, so duplicate detection's
containment (which needs words) and its trigger factor are unchanged, and so is its exact-copy rule
(actions equal once normalised score at least the merge threshold), which does not depend on any
backend at all.

All pairs and nearest neighbours are exact matrix products of the L2-normalised embeddings, done a
block of rows at a time so that at most BLOCK_ENTRIES scores are held at once (16 MiB, a few times
that with their masks), whatever the number of documents. Time is quadratic: n^2 x d / 2
multiply-adds for `pairs`, twice that for `nearest`. Measured on a 2-core machine with 256
dimensions: 0.3 s and 0.8 s at 10k documents, about 90 s and 200 s at 100k (peak 335 MiB).

`load_model` reads a model from a local folder, or a Hugging Face name from the local cache or, if
it is not there, by downloading it: the engine calls it only with what the user wrote in
rem-config.yaml, so nothing is downloaded unless asked.
"""

from __future__ import annotations

import os

import numpy as np

from mgcp.operations.shared import CycleCache, shared
from mgcp.operations.similarity import Doc, LexicalBackend, SimilarityBackend, dot, top_k

BLOCK_ENTRIES = 1 << 22  # scores held at once (float32): 16 MiB
TOLERANCE = 1e-6         # float32 rounding: identical texts score 0.99999994, not 1
GROUPS = 64              # column groups whose maxima bound a row's k-th best score (see embedding_nearest)


class ModelError(Exception):
    """A model that cannot be loaded; the message is one line, for the user."""


def load_model(model: str):
    """A model2vec `StaticModel` from an absolute folder path, or from a Hugging Face model name
    (the local cache first, else a download). Raises ImportError without model2vec, ModelError when
    the model is missing or unreadable."""
    from model2vec import StaticModel

    if os.path.isabs(model) and not os.path.isdir(model):
        raise ModelError(f"no model folder at {model}")
    try:
        return StaticModel.from_pretrained(model, force_download=False)
    except Exception as exc:  # model2vec, safetensors, tokenizers and the hub each raise their own
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ModelError(f"cannot load a model2vec model from {model!r} ({type(exc).__name__}: {detail})") from None


class SemanticBackend(SimilarityBackend):
    """max(lexical TF-IDF cosine, embedding cosine); see the module docstring. `model` is anything
    with model2vec's `encode(texts) -> array`. With a `cache`, one cycle embeds the same texts once."""

    def __init__(self, model, cache: CycleCache | None = None):
        self.model = model
        self.cache = cache
        self.lexical = LexicalBackend(cache)

    def embeddings(self, docs: dict[Doc, str]) -> np.ndarray:
        """One L2-normalised float32 row per document, in `docs` order; a text with no token the
        model knows gets a row of zeros (similar to nothing)."""
        return shared(self.cache, ("embeddings", id(self.model), tuple(docs.items())),
                      lambda: self._embed(list(docs.values())))

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        matrix = np.asarray(self.model.encode(texts, use_multiprocessing=False), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms > 0, norms, 1.0)

    def vectors(self, docs: dict[Doc, str]) -> dict[Doc, dict[str, float]]:
        """The lexical vectors: what needs words (containment, the trigger factor) stays lexical."""
        return self.lexical.vectors(docs)

    def similarity(self, a: str, b: str) -> float:
        ea, eb = self._embed([a, b])
        return max(self.lexical.similarity(a, b), _score(ea @ eb))

    def pairs(self, docs: dict[Doc, str], min_similarity: float) -> list[tuple[Doc, Doc, float]]:
        # A pair at or above the threshold under the maximum is at or above it on one side, so the
        # union of both sides' pairs, each at its higher score, is exact.
        keys = list(docs)
        index = {key: i for i, key in enumerate(keys)}
        best = {(index[a], index[b]): s for a, b, s in self.lexical.pairs(docs, min_similarity)}
        for i, j, s in embedding_pairs(self.embeddings(docs), min_similarity):
            if s > best.get((i, j), -1.0):
                best[(i, j)] = s
        return _ordered(keys, best)

    def nearest(self, docs: dict[Doc, str], min_similarity: float, k: int) -> list[tuple[Doc, Doc, float]]:
        keys = list(docs)
        index = {key: i for i, key in enumerate(keys)}
        matrix = self.embeddings(docs)
        lexical = self.vectors(docs)
        best: dict[tuple[int, int], float] = {}
        for a, b, s in self.lexical.nearest(docs, min_similarity, k):
            i, j = index[a], index[b]
            best[(i, j)] = max(s, _score(matrix[i] @ matrix[j]))
        for i, j, s in embedding_nearest(matrix, min_similarity, k):
            if (i, j) not in best:
                best[(i, j)] = max(s, dot(lexical[keys[i]], lexical[keys[j]]))
        return top_k(_ordered(keys, best), k)


def embedding_pairs(matrix: np.ndarray, min_similarity: float) -> list[tuple[int, int, float]]:
    """Every pair of rows (i < j) whose dot product is at or above min_similarity (and above 0),
    by blocks of rows against the rows from the block's first on."""
    n = len(matrix)
    floor = min_similarity - TOLERANCE
    block = _rows_per_block(n)
    found: list[tuple[int, int, float]] = []
    for start in range(0, n, block):
        scores = matrix[start:start + block] @ matrix[start:].T
        rows, cols = np.nonzero((scores >= floor) & (scores > 0))
        upper = cols > rows  # both offsets start at `start`
        rows, cols = rows[upper], cols[upper]
        found.extend((int(r) + start, int(c) + start, _score(s))
                     for r, c, s in zip(rows, cols, scores[rows, cols]))
    return found


def embedding_nearest(matrix: np.ndarray, min_similarity: float, k: int) -> list[tuple[int, int, float]]:
    """Each row's (at most) k best other rows at or above min_similarity (and above 0), as pairs
    (i < j, each pair once).

    A full top-k selection per row (argpartition) costs more than the matrix product, so each row
    first gets a lower bound on its k-th best score: split the columns into GROUPS, take each
    group's maximum, and the k-th highest of those maxima is reached by k different columns. Only
    the few scores at or above that bound (and the threshold) are then ranked."""
    n = len(matrix)
    if n < 2 or k < 1:
        return []
    width = min(k, n - 1)
    floor = max(min_similarity - TOLERANCE, 0.0)
    starts = np.unique(np.linspace(0, n, max(GROUPS, 4 * width), endpoint=False).astype(int))
    block = _rows_per_block(n)
    found: dict[tuple[int, int], float] = {}
    for start in range(0, n, block):
        scores = matrix[start:start + block] @ matrix.T
        rows = np.arange(len(scores))
        scores[rows, rows + start] = -np.inf  # not its own neighbour
        maxima = np.maximum.reduceat(scores, starts, axis=1)
        bound = np.maximum(np.partition(maxima, -width, axis=1)[:, -width], floor)
        rows, cols = np.nonzero((scores >= bound[:, None]) & (scores > 0))
        values = scores[rows, cols]
        order = np.lexsort((-values, rows))  # by row, best first
        rows, cols, values = rows[order], cols[order], values[order]
        rank = np.arange(len(rows)) - np.searchsorted(rows, rows)  # place within its row
        for r, c, v in zip(rows[rank < width], cols[rank < width], values[rank < width]):
            i, j = int(r) + start, int(c)
            found[(min(i, j), max(i, j))] = _score(v)
    return [(i, j, s) for (i, j), s in found.items()]


def _rows_per_block(n: int) -> int:
    return max(1, BLOCK_ENTRIES // max(n, 1))


def _ordered(keys: list[Doc], scores: dict[tuple[int, int], float]) -> list[tuple[Doc, Doc, float]]:
    """Pairs sorted like `SimilarityBackend.pairs`: highest first, then by document order."""
    ranked = sorted(scores.items(), key=lambda item: (-round(item[1], 9), item[0]))
    return [(keys[i], keys[j], s) for (i, j), s in ranked]


def _score(dot) -> float:
    """A float32 dot product as a score: within [0, 1], rounded to 6 places (float32 carries about
    7 digits; the rounding turns 0.89999998 back into the 0.9 it stands for)."""
    return round(min(max(float(dot), 0.0), 1.0), 6)
