"""Duplicate detection's pair search kept between cycles: a repeat cycle compares only the actions
that changed with all the others, and finds exactly the pairs a full search finds.

The search finds every pair of actions whose TF-IDF cosine is at least t (`floor` of
`mgcp.operations.duplicate_detection.score_pairs`). A full search keeps, for the corpus it ran on
(the *base*, of n0 actions):

- each stem's document frequency df0, so each stem's idf0 = log((1 + n0) / (1 + df0)) + 1;
- for each distinct action text (by a digest of the text and of the rules it is read by): a code
  of its row, the stems and their counts (`_codes`);
- every pair of distinct texts whose cosine was >= LOW = t / DRIFT^2 (less SLACK);
- when asked, every contained pair of texts (see below).

A later corpus reads every text again (the words are kept elsewhere) and builds its matrix in full,
with the idf of now. For a row whose text is in the base with the same code (the same stems and
counts: the stems of a text can move when another text adds a compound word), let r be each of
its stems' idf now over its idf0, x0 its base weights (L2-normalised) and N = |x0 r|, the norm of
its base weights times r (computable from its counts and both idfs). Its weights now are x0 r / N.
The row is *unchanged* when its *stretch* g = max(r) / N is at most DRIFT; any other row is
*changed*.

Claim: two unchanged rows whose texts are not a kept pair have a cosine below t now.
Proof: for unchanged rows x and y (all weights positive),

    cos = sum(x0 y0 r^2) / (N_x N_y)  <=  cos0 * max_x(r) max_y(r) / (N_x N_y)  =  cos0 * g_x * g_y
        <=  cos0 * DRIFT^2,

since each shared stem's r is at most both rows' max(r). A pair not kept had cos0 < LOW, so
cos < t. (SLACK, far above the rounding of these sums, keeps this true of the computed values.)
g >= 1, and g = 1 when every idf moved by one factor (as when only n changes much); a stem whose
idf moved far stretches its rows in proportion to its weight in them.

So the pairs at or above t are: those with a changed row, found by `sparse.pairs_touching`; the
kept pairs of unchanged rows, scored again on the matrix of now; and the pairs of unchanged rows
with the same text. Each is scored by `Matrix.dots` on the matrix of now, so every pair carries
the value, bit for bit, that the full search gives it.

With `containment` (the rule of `sparse.contained`), the search also finds the contained pairs
(every stem of the smaller row in the larger, and their sizes in bounds; the smaller looked up only
when its rarest stem is in at most max_df rows), and the base keeps them too, by text. That a pair
is contained depends only on the two rows' stems, which a text with the same code has unchanged;
only whether the smaller is looked up depends on the other rows (its rarest stem's df). So the
contained pairs now are: those with a row whose code is not the base's, and those whose smaller
row was not looked up in the base but is now, found by `sparse.contained_touching`; and the kept
pairs of rows with the base's codes whose smaller is looked up now.

The base stays the base: the pairs of texts added since are found again by each later search,
until more than CHANGED_SHARE of the rows are changed; then a full search (at LOW) makes a new base.
Texts no longer in the corpus are dropped from the base with their pairs once they are more than
CHANGED_SHARE of its texts, so that a cycle that only removes a few rewrites nothing (until then a
text that comes back is one of the base like any other: the claim holds for every text of the
base, whatever was in the corpus since). The state is stale, and a full search runs, when it is
missing or unreadable, was made by other rules (`RULES`: how texts are read and weighed, this
module and the searches), for another t (the review threshold and trigger support set it) or for
another containment rule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from mgcp.operations import framed, similarity, sparse
from mgcp.operations.shared import WORDS, digests, terms, ticker

FORMAT = 3
DRIFT = 1.005         # how far a row may stretch (see the module docstring) and still count as unchanged
CHANGED_SHARE = 0.05  # more changed rows than this: a full search, which makes a new base
SLACK = 1e-9          # LOW is lowered by this, so that rounding never drops a pair

RULES = hashlib.blake2b(
    b"kept-search\0" + str(FORMAT).encode() + WORDS
    + b"".join(Path(module.__file__).read_bytes() for module in (sparse, similarity))
    + Path(__file__).read_bytes(), digest_size=16).digest()


class KeptSearch:
    """The kept state in (`state`: bytes as the store keeps them, or None) and out (`keep`: the
    bytes to keep after the cycle, or None when the kept state holds as it is). `changed`: how many
    rows the last search compared with all the others (None: it searched all pairs). `contained`:
    the contained pairs the last search found, when asked to (see `pairs`)."""

    def __init__(self, state: bytes | None = None):
        self.state = state
        self.keep: bytes | None = None
        self.changed: int | None = None
        self.contained: list[tuple[Hashable, Hashable]] | None = None

    def pairs(self, docs: dict[Hashable, str], min_similarity: float, backend: similarity.LexicalBackend,
              containment: tuple[int, float, int] | None = None) -> list[tuple[Hashable, Hashable, float]]:
        """What `backend.pairs(docs, min_similarity)` returns, the same pairs and values. With
        `containment` (min_words, max_growth, max_df of `sparse.contained`), what
        `sparse.contained` finds on the same matrix is left in `contained` as (smaller, larger)
        keys, the same pairs in another order."""
        t = max(min_similarity, 1e-9)
        low = t / DRIFT ** 2 - SLACK
        m = backend.matrix(docs)
        tick = ticker(backend.cache)
        keys = list(docs)
        texts = _digests(backend, list(docs.values()))
        codes = _codes(m)
        base = _Base.decode(self.state, low, containment)
        compared = base.compare(m, texts, codes) if base is not None else None
        if compared is None or int(compared[2].sum()) > CHANGED_SHARE * m.n:
            self.changed = None
            a, b, s = sparse.pairs(m, low, tick)
            small, large = sparse.contained(m, *containment) if containment else (a[:0], b[:0])
            self.keep = _Base.of(m, texts, codes, a, b, low, containment, small, large).encode()
            good = s >= t - 1e-12
            a, b, s = a[good], b[good], s[good]
        else:
            at, same, touched, looked_up_then = compared
            self.changed = int(touched.sum())
            a1, b1, s1 = sparse.pairs_touching(m, t, touched, tick)
            a2, b2 = base.rows_of_pairs(at, ~touched & (m.lengths > 0))  # an empty row pairs with none
            s2 = m.dots(a2, b2)
            good = s2 >= t - 1e-12
            a, b, s = np.r_[a1, a2[good]], np.r_[b1, b2[good]], np.r_[s1, s2[good]]
            if containment:
                min_words, _, max_df = containment
                looked_up = sparse.looked_up_rows(m, min_words, max_df)
                small1, large1 = sparse.contained_touching(m, *containment, ~same | (looked_up & ~looked_up_then), ~same)
                small2, large2 = base.rows_of_contained(at, same)
                held = looked_up[small2]
                small, large = np.r_[small1, small2[held]], np.r_[large1, large2[held]]
            kept = base.without_texts_other_than(at)
            self.keep = None if kept is base else kept.encode()
        if containment:
            self.contained = list(zip(map(keys.__getitem__, small.tolist()), map(keys.__getitem__, large.tolist())))
        return similarity._sorted_pairs(keys, a, b, s)


def _digests(backend: similarity.LexicalBackend, docs: list[str]) -> list[bytes]:
    """Each text's digest as its words are kept (`shared.digest(WORDS, text)`): those of the corpus
    the backend's matrix was built from, when its cache has a `Reader`; else made here."""
    cache = backend.cache
    if cache is not None and cache.reader is not None:
        return cache.reader.corpus(docs, lambda i: terms(cache, docs[i])).digests
    return digests(WORDS, docs)


def _codes(m: sparse.Matrix) -> np.ndarray:
    """Per row: how many stems it has, and two sums (mod 2^64) over its stems of a 64-bit hash of
    the stem times (2 x its count + 1), an odd factor, so no count maps two hashes to one value.
    Equal rows have equal codes; two different rows, only by a chance of about 2^-128."""
    hashes = np.frombuffer(b"".join(hashlib.blake2b(w.encode("utf-8", "surrogatepass"), digest_size=16).digest()
                                    for w in m.words), dtype=np.uint64).reshape(-1, 2)
    factor = 2 * m.tf.astype(np.uint64) + np.uint64(1)
    out = [m.lengths.astype(np.uint64)]
    running = np.zeros(len(factor) + 1, dtype=np.uint64)
    for half in (0, 1):  # a column at a time: a running sum down a column of two is several times slower
        np.cumsum(np.ascontiguousarray(hashes[:, half])[m.rank] * factor, dtype=np.uint64, out=running[1:])
        out.append(running[m.start[1:]] - running[m.start[:-1]])  # wraps around 2^64, as the sums do
    return np.column_stack(out)


@dataclass
class _Base:
    """The corpus the kept pairs were found in; see the module docstring."""

    low: float
    containment: tuple[int, float, int] | None
    n: int
    stems: list[str]
    df: np.ndarray      # per stem
    texts: list[bytes]  # digests of the distinct texts
    codes: np.ndarray   # per text: its row's code
    a: np.ndarray       # kept pairs of texts (indexes into `texts`, a < b)
    b: np.ndarray
    small: np.ndarray   # kept contained pairs of texts: the smaller's, the larger's
    large: np.ndarray

    @classmethod
    def of(cls, m: sparse.Matrix, digests: list[bytes], codes: np.ndarray, a: np.ndarray, b: np.ndarray,
           low: float, containment: tuple[int, float, int] | None, small: np.ndarray, large: np.ndarray) -> "_Base":
        """The base of matrix m, from its pairs (rows a, b) at or above `low` and its contained
        pairs (rows small, large)."""
        first: dict[bytes, int] = {}
        for row, d in enumerate(digests):
            first.setdefault(d, row)
        texts = sorted(first)
        size = max(len(texts), 1)
        index = {d: i for i, d in enumerate(texts)}
        text_of = np.array([index[d] for d in digests], dtype=np.int64)
        ta, tb = text_of[a], text_of[b]
        ta, tb = np.minimum(ta, tb), np.maximum(ta, tb)
        distinct = ta != tb
        pair = np.unique(ta[distinct] * size + tb[distinct])
        held = np.unique(text_of[small] * size + text_of[large])  # a text never holds itself: it is longer
        rows = np.array([first[d] for d in texts], dtype=np.int64)
        return cls(low, containment, m.n, list(m.words), m.df.copy(), texts,
                   codes[rows] if len(rows) else codes[:0], pair // size, pair % size, held // size, held % size)

    def compare(self, m: sparse.Matrix, digests: list[bytes], codes: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per row of m: its text's index in the base (-1: not there); whether its text is in the
        base with the same code (its stems and counts); whether it is changed since the base (see
        the module docstring); and whether the base's contained search looked it up as the smaller
        (False for a row not the same)."""
        at = self._at(digests)
        same = at >= 0
        same[same] = (self.codes[at[same]] == codes[same]).all(axis=1)
        known = dict(zip(self.stems, self.df.tolist()))
        df0 = np.array([known.get(w, -1) for w in m.words], dtype=np.int64)
        idf0 = np.where(df0 >= 0, sparse.idf(self.n, np.maximum(df0, 0)), np.nan)
        idf = sparse.idf(m.n, m.df)
        filled = m.lengths > 0
        rarest_then = np.full(m.n, -1, dtype=np.int64)
        if filled.any():
            rarest_then[filled] = np.minimum.reduceat(df0[m.rank], m.start[:-1][filled])
        # A row whose stems' idf all moved by a factor within [1 / b, b], b = DRIFT^0.49, stretches
        # by at most b^2 = DRIFT^0.98 (N is at least its smallest factor; the gap to DRIFT is far
        # more than rounding can move): steady. Only the rows with a stem that moved further (or
        # is new: nan) are gone through, to work out their stretch as the module docstring defines.
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = idf / idf0  # per stem
            band = DRIFT ** 0.49 if DRIFT > 1 else 1.0
            far = ~((ratio >= 1 / band) & (ratio <= band)) if DRIFT > 1 else np.ones(len(ratio), dtype=bool)
        rows = np.flatnonzero(np.bincount(m.row[far[m.rank]], minlength=m.n) > 0)
        steady = np.ones(m.n, dtype=bool)
        if len(rows):
            entries = sparse.expand(m.start, rows)
            at_row = np.repeat(np.arange(len(rows)), m.lengths[rows])
            rank = m.rank[entries]
            sublinear = 1.0 + np.log(np.maximum(m.tf[entries], 1))
            then = np.bincount(at_row, weights=(sublinear * idf0[rank]) ** 2, minlength=len(rows))
            now = np.bincount(at_row, weights=(sublinear * idf[rank]) ** 2, minlength=len(rows))
            with np.errstate(invalid="ignore", divide="ignore"):
                high = np.maximum.reduceat(ratio[rank], sparse.starts(m.lengths[rows])[:-1])  # each row non-empty
                steady[rows] = high * np.sqrt(then / now) <= DRIFT  # False where a ratio is nan
        looked_up_then = same & filled
        if self.containment is not None:
            min_words, _, max_df = self.containment
            looked_up_then &= (m.lengths >= min_words) & (rarest_then <= max_df)
        return at, same, ~(same & steady), looked_up_then

    def _at(self, digests: list[bytes]) -> np.ndarray:
        """Each digest's index in `texts`, or -1 (`sparse.digest_places`: a text may be taken as not
        in the base, which only makes its row changed; never as another text)."""
        return sparse.digest_places(self.joined, b"".join(digests))

    @cached_property
    def joined(self) -> bytes:
        """The digests of `texts`, joined."""
        return b"".join(self.texts)

    def _rows_by_text(self, at: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`rows` (of texts in the base; `at`: each row's text, from `compare`) grouped by text:
        (rows, start, count), text t's rows at rows[start[t]:start[t] + count[t]]."""
        text = at[rows]
        order = np.argsort(text, kind="stable")
        count = np.bincount(text, minlength=len(self.texts))
        return rows[order], sparse.starts(count), count

    @staticmethod
    def _each_with_each(ta: np.ndarray, tb: np.ndarray, rows: np.ndarray, start: np.ndarray, count: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Every row of text ta[k] with every row of text tb[k], for each k."""
        ca, cb = count[ta], count[tb]
        total = ca * cb
        pair = np.repeat(np.arange(len(total)), total)
        k = np.arange(int(total.sum())) - np.repeat(np.cumsum(total) - total, total)
        return rows[start[ta[pair]] + k // cb[pair]], rows[start[tb[pair]] + k % cb[pair]]

    def rows_of_pairs(self, at: np.ndarray, unchanged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a, b) arrays, a < b, of the pairs of unchanged rows whose texts are a kept pair or the
        same text (`at`: each row's text, from `compare`)."""
        rows, start, count = self._rows_by_text(at, np.flatnonzero(unchanged))
        ra, rb = self._each_with_each(self.a, self.b, rows, start, count)
        # every two rows of one text
        same_a, same_b = [], []
        for t in np.flatnonzero(count > 1).tolist():
            held = rows[start[t]:start[t + 1]].tolist()
            for i, x in enumerate(held):
                same_a += [x] * (len(held) - i - 1)
                same_b += held[i + 1:]
        a = np.r_[ra, np.array(same_a, dtype=np.int64)]
        b = np.r_[rb, np.array(same_b, dtype=np.int64)]
        return np.minimum(a, b), np.maximum(a, b)

    def rows_of_contained(self, at: np.ndarray, same: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(smaller, larger) arrays of the pairs of rows with the base's codes whose texts are a
        kept contained pair (`at`: each row's text, from `compare`)."""
        return self._each_with_each(self.small, self.large, *self._rows_by_text(at, np.flatnonzero(same)))

    def without_texts_other_than(self, at: np.ndarray) -> "_Base":
        """The base without the texts no row has (`at`: each row's text, from `compare`) and their
        pairs; itself while those are at most CHANGED_SHARE of its texts."""
        held = np.bincount(at[at >= 0], minlength=len(self.texts)) > 0
        if int((~held).sum()) <= CHANGED_SHARE * len(self.texts):
            return self
        new_index = np.cumsum(held) - 1
        both = held[self.a] & held[self.b]
        inside = held[self.small] & held[self.large]
        return _Base(self.low, self.containment, self.n, self.stems, self.df,
                     [d for d, h in zip(self.texts, held) if h], self.codes[held],
                     new_index[self.a[both]], new_index[self.b[both]],
                     new_index[self.small[inside]], new_index[self.large[inside]])

    # -- as bytes ------------------------------------------------------------------------------------

    def encode(self) -> bytes:
        stems = "\n".join(self.stems).encode("utf-8", "surrogatepass")
        parts = [stems, self.df.astype("<i8").tobytes(), b"".join(self.texts), self.codes.astype("<u8").tobytes(),
                 *(x.astype("<i8").tobytes() for x in (self.a, self.b, self.small, self.large))]
        return framed.frame({"format": FORMAT, "rules": RULES.hex(), "low": self.low,
                             "containment": _listed(self.containment), "n": self.n, "stems": len(self.stems),
                             "texts": len(self.texts), "pairs": len(self.a), "contained": len(self.small)}, parts)

    @classmethod
    def decode(cls, state: bytes | None, low: float, containment: tuple[int, float, int] | None = None
               ) -> "_Base | None":
        """The base kept in `state`, or None when there is none, it is unreadable or damaged
        (`framed.unframe`), or it was made by other rules, for another threshold or another
        containment rule."""
        read = framed.unframe(state, 8)
        if read is None:
            return None
        header, parts = read
        if (header.get("format") != FORMAT or header.get("rules") != RULES.hex() or header.get("low") != low
                or header.get("containment") != _listed(containment)):
            return None
        try:
            stems_bytes, df, texts, codes, *pairs = parts
            stems = stems_bytes.decode("utf-8", "surrogatepass").split("\n") if header["stems"] else []
            a, b, small, large = (np.frombuffer(x, dtype="<i8").astype(np.int64) for x in pairs)
            base = cls(low, containment, int(header["n"]), stems, np.frombuffer(df, dtype="<i8").astype(np.int64),
                       [texts[i:i + 16] for i in range(0, len(texts), 16)],
                       np.frombuffer(codes, dtype="<u8").astype(np.uint64).reshape(-1, 3), a, b, small, large)
            base.joined = texts
            indexes = np.r_[base.a, base.b, base.small, base.large]
            consistent = (base.n >= 0 and len(base.stems) == header["stems"] == len(base.df)
                          and len(texts) == 16 * header["texts"]
                          and len(base.texts) == header["texts"] == len(base.codes)
                          and len(base.a) == len(base.b) == header["pairs"] and bool(np.all(base.a < base.b))
                          and len(base.small) == len(base.large) == header["contained"]
                          and (not len(indexes) or (indexes.min() >= 0 and indexes.max() < len(base.texts))))
        except (ValueError, KeyError, TypeError, OverflowError, UnicodeDecodeError):
            return None
        return base if consistent else None


def _listed(containment: tuple[int, float, int] | None) -> list | None:
    """The containment rule as the header holds it (JSON has no tuples)."""
    return None if containment is None else [int(containment[0]), float(containment[1]), int(containment[2])]
