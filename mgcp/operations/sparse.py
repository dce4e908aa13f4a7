"""Sparse word vectors as numpy arrays, and the similarity searches that run on them in bulk.

The lexical backend (`mgcp.operations.similarity`) keeps each document as a dict of word weights;
for a whole corpus that is a sparse matrix, and `Matrix` holds it the way numpy can work on it: one
row per document, its entries sorted by the word's rank in one global order (rarest first, ties by
the word), in flat arrays (`start`, `rank`, `weight`, like a CSR matrix). Everything is built in
document order and word order, never in set order, and every sum is taken in one fixed order, so a
result does not depend on the hash seed of the process.

`pairs(matrix, t)`: every pair with cosine >= t, exactly (the same pairs as comparing all of them),
in three stages, each a bound that only drops pairs below t:

1. Prefix filtering (Bayardo, Ma & Srikant, "Scaling up all pairs similarity search", WWW 2007):
   a row's *prefix* is the shortest run of its rarest words such that the rest has a norm below t.
   If cos(x, y) >= t, their rarest common word is in both prefixes (else every common word lies in
   one side's rest, and Cauchy-Schwarz bounds the cosine by that rest's norm). So the candidates
   are the pairs that meet in the posting list of a prefix word, generated a block at a time.
2. Word counts: two rows share at most as many words as their 256-bit signatures (a bit per word,
   `mask`) share bits, plus the words either one folded onto a bit it already had; over c shared
   words the cosine is at most the product of each row's c heaviest weights' norm (`reach`). On
   the benchmark this drops all but about 1 in 4,000 candidates. Where `reach` would cost more
   than it saves (a repeat search, below), the bound over c shared words is c times the product of
   the two rows' heaviest weights (`heaviest`), looser but a pass over the weights only.
3. Positional bound (as in ppjoin): every common word up to the last prefix word two rows share is
   in both prefixes, so those words give part A of the cosine exactly, and the words after that
   last one bound the rest: cos <= A + ||x after it|| * ||y after it||.
The survivors are scored exactly (`overlap`: a few rows laid out dense, the other side's words
looked up in them, the products summed in word order).

`proposals(matrix, eligible, width)`: for each row, the `width` rows sharing the most of its
eligible words, ties to the row sharing the rarer word, then to the lower row: every (row, other,
word) meeting is packed into one integer and one sort groups and orders them.

`contained(matrix, ...)`: pairs where one row's words are all in the other's.

`pairs_touching(matrix, t, touched)`: what `pairs` finds of the pairs with a touched row, with only
the touched rows' prefix entries proposing candidates (a repeat search over the rows that changed;
see `mgcp.operations.kept_search`). Its stage 2 takes the looser bound of the heaviest weights,
since `reach` sorts every row's weights.

Memory is bounded by the blocks: a block's candidates are generated, filtered and dropped before the
next block (BLOCK_ENTRIES), and scoring lays out at most DENSE_CELLS cells at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from itertools import chain

import numpy as np

from mgcp import text

BLOCK_ENTRIES = 500_000   # candidates generated at once (each costs about 150 bytes while held)
DENSE_CELLS = 4_000_000   # cells of the dense rows that pairs are scored against (32 MB)
MASK_WORDS = 4            # 64-bit words of a row's signature
SLACK = 1e-9              # bounds are widened by this, so that rounding never drops a pair


class Matrix:
    """Rows of sparse vectors over ranked words; see the module docstring. `row`, `word` and
    `weight`: one entry per (row, word) with its weight, in any order; `words`: the words, and
    `df`: how many rows hold each; `tf`, when known, each entry's count of its word in its row."""

    def __init__(self, n: int, row: np.ndarray, word: np.ndarray, weight: np.ndarray, words: Sequence[str],
                 df: np.ndarray, tf: np.ndarray | None = None):
        order, rank_of = _ranked(words, df)
        row = np.asarray(row, dtype=np.int64)
        ranks = rank_of[word]
        order_in_row = np.argsort(row * max(len(words), 1) + ranks, kind="stable")
        self._laid_out(n, row[order_in_row], ranks[order_in_row], np.asarray(weight, dtype=np.float64)[order_in_row],
                       None if tf is None else np.asarray(tf, dtype=np.int64)[order_in_row],
                       [words[i] for i in order], np.asarray(df, dtype=np.int64)[order])

    def _laid_out(self, n: int, row: np.ndarray, rank: np.ndarray, weight: np.ndarray, tf: np.ndarray | None,
                  words: list[str], df: np.ndarray) -> None:
        """Set the rows from their entries laid out already: rows ascending (`row`: each entry's),
        each row's entries by rank (`words` and `df`: in rank order)."""
        self.words = words
        self.df = df
        self.row = row
        self.rank = rank
        self.weight = weight
        self.tf = tf  # each entry's count of its word in its row, when known
        self.start = np.searchsorted(row, np.arange(n + 1, dtype=np.int64))
        self.lengths = np.diff(self.start)
        self.n = n
        self.size = len(words)

    @classmethod
    def of(cls, vectors: Sequence[dict[str, float]]) -> "Matrix":
        """The matrix of word -> weight dicts, a row each."""
        index: dict[str, int] = {}
        word = np.fromiter((index.setdefault(f, len(index)) for f in chain.from_iterable(vectors)),
                           dtype=np.int64)
        lengths = np.fromiter(map(len, vectors), dtype=np.int64, count=len(vectors))
        row = np.repeat(np.arange(len(vectors), dtype=np.int64), lengths)
        weight = np.fromiter(chain.from_iterable(v.values() for v in vectors), dtype=np.float64, count=len(word))
        return cls(len(vectors), row, word, weight, list(index), np.bincount(word, minlength=len(index)))

    def vector(self, r: int) -> dict[str, float]:
        """Row r as a word -> weight dict."""
        lo, hi = int(self.start[r]), int(self.start[r + 1])
        return dict(zip(map(self.words.__getitem__, self.rank[lo:hi].tolist()), self.weight[lo:hi].tolist()))

    # -- what `pairs` bounds scores with, computed on first use ------------------------------------

    @cached_property
    def tail(self) -> np.ndarray:
        """tail[e]: the norm of e's row from e on (the whole row's norm, 1.0, at its first entry)."""
        return np.sqrt(_row_sums(self.weight ** 2, self.start, self.lengths, from_end=True))

    @cached_property
    def reach(self) -> np.ndarray:
        """reach[start[r] + c - 1]: the norm of row r's c heaviest weights."""
        heaviest = np.lexsort((-self.weight, self.row))
        return np.sqrt(_row_sums(self.weight[heaviest] ** 2, self.start, self.lengths, from_end=False))

    @cached_property
    def heaviest(self) -> np.ndarray:
        """Each row's largest weight (0 for an empty row)."""
        out = np.zeros(self.n)
        filled = self.lengths > 0
        if filled.any():
            out[filled] = np.maximum.reduceat(self.weight, self.start[:-1][filled])
        return out

    @cached_property
    def mask(self) -> np.ndarray:
        """A 256-bit signature of each row's words (MASK_WORDS 64-bit words, a bit per word)."""
        bits = (self.rank * 2654435761) % (64 * MASK_WORDS)
        mask = np.zeros((self.n, MASK_WORDS), dtype=np.uint64)
        bit = np.left_shift(np.uint64(1), (bits % 64).astype(np.uint64))
        np.bitwise_or.at(mask, (self.row, bits // 64), bit)
        return mask

    @cached_property
    def folded(self) -> np.ndarray:
        """How many of each row's words share a signature bit with another of its words."""
        return self.lengths - np.bitwise_count(self.mask).sum(axis=1, dtype=np.int64)

    def tail_after(self, entries: np.ndarray) -> np.ndarray:
        """The norm of each entry's row after that entry."""
        nxt = entries + 1
        inside = nxt < self.start[self.row[entries] + 1]
        out = np.zeros(len(entries))
        out[inside] = self.tail[nxt[inside]]
        return out

    def dots(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The exact dot product of rows a[k] and b[k] for each k, summed over the shared words in
        rank order (so the same pair scores the same, bit for bit, either way round)."""
        return self.overlap(a, b)[0]

    def overlap(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dot product, shared words) of rows a[k] and b[k] for each k (weights are positive, so a
        word is shared where the product is not 0). Rows of a are laid out dense a block at a time
        (DENSE_CELLS), and b's words looked up in them."""
        dots, shared = np.zeros(len(a)), np.zeros(len(a), dtype=np.int64)
        by_a = np.argsort(a, kind="stable")
        distinct = np.flatnonzero(np.r_[True, a[by_a][1:] != a[by_a][:-1]]) if len(a) else by_a
        step = max(1, DENSE_CELLS // max(self.size, 1))
        # one dense block for all of them, its written cells set back to 0 after each use (a fresh
        # block each time cost more in zeroing than the lookups)
        dense = np.zeros((min(step, len(distinct)), max(self.size, 1)))
        for lo in range(0, len(distinct), step):
            pick = by_a[distinct[lo]:distinct[lo + step] if lo + step < len(distinct) else len(a)]
            held, local = np.unique(a[pick], return_inverse=True)
            cells = expand(self.start, held)
            at = (np.repeat(np.arange(len(held)), self.lengths[held]), self.rank[cells])
            dense[at] = self.weight[cells]
            entries = expand(self.start, b[pick])
            pair = np.repeat(np.arange(len(pick)), self.lengths[b[pick]])
            found = dense[local[pair], self.rank[entries]]
            dense[at] = 0.0
            dots[pick] = np.bincount(pair, weights=found * self.weight[entries], minlength=len(pick))
            shared[pick] = np.bincount(pair[found > 0], minlength=len(pick))
        return dots, shared


def tf_idf(docs: Sequence[Sequence[str]]) -> Matrix:
    """The TF-IDF matrix of documents given as their words (`mgcp.text.terms`), the same as
    reading each with `text.join_compounds` (over the words of all of them), then `text.stems`, and
    weighing its stems by sublinear tf times smoothed idf, L2-normalised (see
    `mgcp.operations.similarity`), but in bulk: each distinct word is joined, stemmed and weighed
    once, and the words are counted by numpy."""
    index: dict[str, int] = {}
    lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
    ids = np.fromiter((index.setdefault(w, len(index)) for w in chain.from_iterable(docs)), dtype=np.int32,
                      count=int(lengths.sum()))
    return tf_idf_of(lengths, ids, list(index))


def first_seen(ids: np.ndarray, size: int) -> np.ndarray:
    """The distinct values of `ids` (each below `size`) in the order they first occur."""
    first = np.full(size, len(ids), dtype=np.int64)
    # most values occur early: their first places are found among the first ones, and only the
    # places of the values not met there are gone through after
    head = min(len(ids), 1 << 16)
    np.minimum.at(first, ids[:head], np.arange(head, dtype=np.int64))
    if head < len(ids):
        later = np.flatnonzero((first == len(ids))[ids[head:]]) + head
        np.minimum.at(first, ids[later], later)
    present = np.flatnonzero(first < len(ids))
    return present[np.argsort(first[present], kind="stable")]


def tf_idf_of(lengths: np.ndarray, ids: np.ndarray, vocabulary: Sequence[str]) -> Matrix:
    """`tf_idf` of the documents whose words are `vocabulary[i]` for the `ids`, `lengths[d]` of them
    for document d, one document after the other; `vocabulary` may hold words no document has and
    be in any order.

    The same matrix bit for bit: the stems are numbered in the order `tf_idf` numbers them (the
    order their words are first used in), each row's entries are counted in that order, and its
    norm is summed in it; the entries are then laid out by rank. Both orders come from sorting one
    integer per entry (document, then stem number or rank, packed into 63 bits when they fit)."""
    n = len(lengths)
    lengths = np.asarray(lengths, dtype=np.int64)
    ids = np.asarray(ids)
    used = first_seen(ids, len(vocabulary))  # only the words used count, in the order first used
    ids, lengths = _join_compounds(ids, lengths, vocabulary, used)
    stem_of_used, stems = _stems([vocabulary[i] for i in used.tolist()])
    stem_of = np.full(len(vocabulary), -1, dtype=np.int32 if len(stems) < 1 << 31 else np.int64)
    stem_of[used] = stem_of_used
    stem = stem_of.take(ids)
    del ids  # each array is let go as soon as it is read: at 100k documents each is tens of MB
    kept = stem >= 0
    # (document, stem number) as one integer, in 32 bits when it fits (sorted twice as fast)
    row_bits, stem_bits = max(1, (n - 1).bit_length()), max(1, (len(stems) - 1).bit_length())
    dtype = np.int32 if _packed_bits(row_bits, stem_bits) <= 31 else np.int64
    code = np.repeat(np.arange(n, dtype=dtype) << stem_bits, lengths)
    code |= stem.astype(dtype, copy=False)
    code = code[kept]
    del stem, kept
    code.sort()  # the distinct (document, stem) codes and their counts, as np.unique gives them
    new = np.empty(len(code), dtype=bool)
    new[:1] = True
    np.not_equal(code[1:], code[:-1], out=new[1:])
    first = np.flatnonzero(new)
    del new
    tf = np.diff(np.r_[first, len(code)])
    if len(first) < len(code):
        code = code[first]
    del first
    # the arrays are worked on in place where they can be: at 100k documents, memory the process has
    # not touched yet costs more to fault in than the arithmetic done in it
    word = code & ((1 << stem_bits) - 1)
    code >>= stem_bits
    row = code
    df = np.bincount(word, minlength=len(stems))
    # the logarithms as Python takes them, once per distinct count (at its count; 0 is never one)
    sublinear = np.array([0.0] + [1.0 + math.log(t) for t in range(1, int(tf.max(initial=1)) + 1)])
    weight = sublinear.take(tf)
    weight *= idf(n, df).take(word)
    weight /= np.sqrt(np.bincount(row, weights=weight * weight, minlength=n)).take(row)
    return _by_rank(n, row, word, weight, tf, stems, df)


def _by_rank(n: int, row: np.ndarray, word: np.ndarray, weight: np.ndarray, tf: np.ndarray, words: list[str],
             df: np.ndarray) -> Matrix:
    """`Matrix(n, row, word, weight, words, df, tf)` of entries in row order (rows ascending, a
    row's words distinct): each row's entries put in rank order by one sort of (row, rank, entry)
    packed into an integer, when they fit in 63 bits."""
    row_bits = max(1, (n - 1).bit_length())
    rank_bits = max(1, (len(words) - 1).bit_length())
    entry_bits = max(1, (len(row) - 1).bit_length())
    if _packed_bits(row_bits, rank_bits, entry_bits) > 63:
        return Matrix(n, row, word, weight, words, df, tf)
    order, rank_of = _ranked(words, df)
    key = row.astype(np.int64) << (rank_bits + entry_bits)
    key |= rank_of.take(word) << entry_bits
    key |= np.arange(len(row), dtype=np.int64)
    del row, word
    key.sort()
    entry = key & ((1 << entry_bits) - 1)
    key >>= entry_bits
    rank = key & ((1 << rank_bits) - 1)
    key >>= rank_bits
    m = Matrix.__new__(Matrix)
    m._laid_out(n, key, rank, weight.take(entry), tf.take(entry), [words[i] for i in order], df[order])
    return m


def _packed_bits(*bits: int) -> int:
    """The bits an integer packing fields of `bits` bits each takes (a seam for the tests)."""
    return sum(bits)


def _ranked(words: Sequence[str], df: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The order of `words` by rank (rarest first, `df`: how many rows hold each; then by the word),
    and each word's rank."""
    order = sorted(range(len(words)), key=list(zip(np.asarray(df).tolist(), words)).__getitem__)
    rank_of = np.empty(len(words), dtype=np.int64)
    rank_of[order] = np.arange(len(words))
    return order, rank_of


def idf(n: int, df: np.ndarray) -> np.ndarray:
    """The inverse document frequency of `tf_idf`, per stem: ln((1 + n) / (1 + df)) + 1."""
    return np.array([math.log((1 + n) / (1 + d)) + 1.0 for d in df.tolist()])


def _join_compounds(ids: np.ndarray, lengths: np.ndarray, vocabulary: Sequence[str], used: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """`text.join_compounds` on every document at once (`lengths`: each one's number of `ids`; `used`:
    the ids of the words the documents use, the only ones that join or are joined into): two adjacent
    words of a document become one where the words used hold them written together, left to right
    (of "a b c" with "ab" and "bc" both words, "ab" is taken and "c" stays). The ids and lengths after."""
    index = {vocabulary[i]: i for i in used.tolist()}
    joins = {(index[w[:k]], index[w[k:]]): i for w, i in index.items()
             for k in range(1, len(w)) if w[:k] in index and w[k:] in index}
    if not joins or len(ids) < 2:
        return ids, lengths
    size = len(vocabulary)
    codes = np.array(sorted(a * size + b for a, b in joins), dtype=np.int64)
    joined = np.array([joins[divmod(int(c), size)] for c in codes], dtype=np.int64)
    left = np.zeros(size, dtype=bool)
    left[codes // size] = True
    place = np.flatnonzero(left[ids[:-1]])  # only a place whose word starts a compound can join
    adjacent = ids[place].astype(np.int64) * size + ids[place + 1]
    at = np.minimum(np.searchsorted(codes, adjacent), len(codes) - 1)
    start = starts(lengths)
    row = np.searchsorted(start, place, side="right") - 1
    joinable = (codes[at] == adjacent) & (place + 1 < start[row + 1])  # never across two documents
    place, at, row = place[joinable], at[joinable], row[joinable]
    if not len(place):
        return ids, lengths
    # in a run of joinable places, a join consumes the next word, so every other place joins
    run_start = np.maximum.accumulate(np.where(np.r_[True, place[1:] != place[:-1] + 1], place, 0))
    joins_here = (place - run_start) % 2 == 0
    take = place[joins_here]
    out = np.delete(ids, take + 1)
    out[take - np.arange(len(take))] = joined[at[joins_here]]  # each earlier join took one word out
    return out, lengths - np.bincount(row[joins_here], minlength=len(lengths))


def _stems(vocabulary: list[str]) -> tuple[np.ndarray, list[str]]:
    """For each word, the index of its stem in the returned list of stems, or -1 for what
    `text.stems` leaves out (stop words, pure numbers, one letter)."""
    stems: dict[str, int] = {}
    of = np.fromiter((stems.setdefault(text.stem(w), len(stems))
                      if len(w) > 1 and w not in text.STOP_WORDS and not w.isdigit() else -1
                      for w in vocabulary), dtype=np.int64, count=len(vocabulary))
    return of, list(stems)


def distinct(values: np.ndarray) -> np.ndarray:
    """`np.unique(values)` (the distinct values, ascending), by sorting: numpy's hashing unique
    takes about 20 times as long on a million int64 codes."""
    values = np.sort(values)
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values


def digest_places(kept: bytes, wanted: bytes) -> np.ndarray:
    """For each 16-byte digest of `wanted` (joined), the place of its first copy among the 16-byte
    digests of `kept` (joined), or -1: found by their first 8 bytes and checked on all 16. Should two
    kept digests share their first 8 bytes (a 64-bit chance), a digest may be taken as not kept,
    never as another."""
    held = np.frombuffer(kept, dtype=np.uint64).reshape(-1, 2)
    asked = np.frombuffer(wanted, dtype=np.uint64).reshape(-1, 2)
    if not len(held):
        return np.full(len(asked), -1, dtype=np.int64)
    order = np.argsort(held[:, 0], kind="stable")
    at = order[np.minimum(np.searchsorted(held[order, 0], asked[:, 0]), len(order) - 1)]
    return np.where((held[at] == asked).all(axis=1), at, -1)


def starts(lengths) -> np.ndarray:
    """Where each of rows of `lengths` entries starts, laid one after the other, and where the last
    ends: row r's entries are at start[r]:start[r + 1]."""
    start = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=start[1:])
    return start


def expand(start: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The places of the entries of each of `rows` (laid out from `start`), one row after the other."""
    counts = start[rows + 1] - start[rows]
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(start[rows], counts) + offsets


def _row_sums(values: np.ndarray, start: np.ndarray, lengths: np.ndarray, from_end: bool) -> np.ndarray:
    """Running sums of `values` within each row (from its first entry on, or from its end back),
    each row summed alone, one entry after the other: the rows are put in order of length, and
    those of one length summed as the lines of a 2-D array (read back to front from the end) by
    `np.cumsum`, which adds in order."""
    order = np.argsort(lengths, kind="stable")
    counts = lengths[order]
    ends = np.cumsum(counts)
    offsets = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - counts, counts)
    places = np.repeat(start[:-1][order], counts)
    places += np.repeat(counts - 1, counts) - offsets if from_end else offsets
    laid = values[places]  # each row's values in the order they are added, rows by length
    # where each run of rows of one length starts, and where the last one ends
    bounds = (np.flatnonzero(np.r_[True, counts[1:] != counts[:-1], True]) if len(counts)
              else np.zeros(1, dtype=np.int64))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        size = int(counts[lo])
        if size > 1:
            block = laid[ends[lo] - size:ends[hi - 1]].reshape(hi - lo, size)
            np.cumsum(block, axis=1, out=block)
    out = np.empty_like(values)
    out[places] = laid
    return out


def _prefix_entries(m: Matrix, s: float) -> np.ndarray:
    """The entries in each row's prefix: the leading run of entries whose tail (the row's norm from
    there on) is at least s, so that the rest has a norm below s; at least a row's first entry."""
    reaches = m.tail >= s - SLACK
    reaches[m.start[:-1][m.start[:-1] < m.start[1:]]] = True
    return np.flatnonzero(reaches)


def _earlier_in_group(items: np.ndarray, group_start: np.ndarray, group_of: np.ndarray):
    """For each of `items` (indexes into a list sorted by group), every earlier index of its group:
    (earlier, item) arrays."""
    before = items - group_start[group_of[items]]
    item = np.repeat(items, before)
    offsets = np.arange(int(before.sum())) - np.repeat(np.cumsum(before) - before, before)
    return group_start[group_of[item]] + offsets, item


def pairs(m: Matrix, t: float, tick: Callable[[int, int], None] | None = None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, cosine) arrays of every pair of rows a < b with cosine >= t (see the module docstring),
    in no particular order."""
    floor = t - 1e-12
    entries = _prefix_entries(m, t)
    # the prefix entries grouped by word, rows in order within a word
    by_word = entries[np.lexsort((m.row[entries], m.rank[entries]))]
    words = m.rank[by_word]
    word_start = np.searchsorted(words, np.arange(m.size + 1))
    place = np.empty(m.weight.size, dtype=np.int64)  # an entry's index in by_word
    place[by_word] = np.arange(len(by_word))
    rows = m.row[entries]
    cum = np.cumsum(place[entries] - word_start[m.rank[entries]])  # candidates up to each entry
    found_a, found_b, found_s = [], [], []
    for lo, hi in _blocks(rows, cum, m.n, tick):
        y_entry, x_entry = _earlier_in_group(place[entries[lo:hi]], word_start, words)
        x_entry, y_entry = by_word[x_entry], by_word[y_entry]  # x: the later row, y: an earlier one
        ys, xs, scores = _verified(m, x_entry, y_entry, floor)
        found_a.append(ys)
        found_b.append(xs)
        found_s.append(scores)
    return _joined(found_a, found_b, found_s)


def pairs_touching(m: Matrix, t: float, touched: np.ndarray, tick: Callable[[int, int], None] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, cosine) arrays of every pair of rows a < b with cosine >= t of which at least one row
    is `touched` (a boolean per row), in no particular order: what `pairs` finds of those pairs,
    by the same stages, with only the touched rows' prefix entries proposing candidates (a pair
    with one touched row is proposed by it alone, two touched rows by the later one)."""
    floor = t - 1e-12
    entries = _prefix_entries(m, t)  # in row order
    mine = entries[touched[m.row[entries]]]
    # the prefix entries of the words the touched rows' prefixes hold, grouped by word, rows in order
    wanted = np.zeros(m.size, dtype=bool)
    wanted[m.rank[mine]] = True
    near = entries[wanted[m.rank[entries]]]
    by_word = near[np.argsort(m.rank[near], kind="stable")]
    word_start = np.searchsorted(m.rank[by_word], np.arange(m.size + 1))
    counts = word_start[m.rank[mine] + 1] - word_start[m.rank[mine]]
    cum = np.cumsum(counts)
    found_a, found_b, found_s = [], [], []
    for lo, hi in _blocks(m.row[mine], cum, m.n, tick):
        x_entry = np.repeat(mine[lo:hi], counts[lo:hi])
        y_entry = by_word[expand(word_start, m.rank[mine[lo:hi]])]
        x, y = m.row[x_entry], m.row[y_entry]
        keep = (x != y) & (~touched[y] | (y < x))
        ys, xs, scores = _verified(m, x_entry[keep], y_entry[keep], floor, sorted_rows=False)
        found_a.append(np.minimum(xs, ys))
        found_b.append(np.maximum(xs, ys))
        found_s.append(scores)
    return _joined(found_a, found_b, found_s)


def _verified(m: Matrix, x_entry: np.ndarray, y_entry: np.ndarray, floor: float, sorted_rows: bool = True
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of the candidates met at prefix entries (x_entry[k] of one row, y_entry[k] of the other;
    every prefix word a pair shares met once, always with the same row on the x side), the pairs
    whose exact cosine is >= floor: (y rows, x rows, cosines), after stages 2 and 3 (see the module
    docstring) dropped most of them unscored. Stage 2 bounds by `reach` when `sorted_rows` (it sorts
    every row's weights, which few candidates do not repay), else by `heaviest`."""
    if len(x_entry):
        x, y = m.row[x_entry], m.row[y_entry]
        # how many words two rows can share: the bits their signatures share, plus the words one of
        # them lost to bits it sets twice; over that many words the cosine is at most the norm of
        # each row's that many heaviest weights (Cauchy-Schwarz), and at most that many times the
        # product of the two rows' heaviest weights
        shared = np.bitwise_count(m.mask[x] & m.mask[y]).sum(axis=1, dtype=np.int64)
        c = np.minimum(shared + np.minimum(m.folded[x], m.folded[y]), np.minimum(m.lengths[x], m.lengths[y]))
        if sorted_rows:
            bound = m.reach[m.start[x] + c - 1] * m.reach[m.start[y] + c - 1]
        else:
            bound = c * m.heaviest[x] * m.heaviest[y]
        keep = bound >= floor - SLACK
        x_entry, y_entry = x_entry[keep], y_entry[keep]
    if not len(x_entry):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    code = m.row[x_entry] * m.n + m.row[y_entry]
    order = np.lexsort((m.rank[x_entry], code))
    code, x_entry, y_entry = code[order], x_entry[order], y_entry[order]
    first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    last = np.r_[first[1:], len(code)] - 1
    exact = np.add.reduceat(m.weight[x_entry] * m.weight[y_entry], first)
    bound = exact + m.tail_after(x_entry[last]) * m.tail_after(y_entry[last])
    pick = bound >= floor - SLACK
    xs, ys = m.row[x_entry[first[pick]]], m.row[y_entry[first[pick]]]
    scores = m.dots(xs, ys)
    good = scores >= floor
    return ys[good], xs[good], scores[good]


def _joined(a: list[np.ndarray], b: list[np.ndarray], s: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not a:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(a), np.concatenate(b), np.concatenate(s)


def _blocks(rows: np.ndarray, cum: np.ndarray, n: int,
            tick: Callable[[int, int], None] | None) -> Iterator[tuple[int, int]]:
    """(lo, hi): consecutive slices of entries (`rows`: each entry's row, in row order) holding whole
    rows and about BLOCK_ENTRIES candidates each (`cum`: the candidates up to each entry), telling
    `tick` the row each starts at."""
    lo = 0
    while lo < len(rows):
        hi = max(int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + BLOCK_ENTRIES, side="right")), lo + 1)
        if hi < len(rows):
            hi = int(np.searchsorted(rows, rows[hi - 1], side="right"))
        if tick is not None:
            tick(int(rows[lo]), n)
        yield lo, hi
        lo = hi


def proposals(m: Matrix, eligible: np.ndarray, width: int, rows: np.ndarray | None = None,
              tick: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each row, the `width` other rows sharing the most of its eligible words (`eligible`: a
    boolean per word rank), ties going to the row sharing the rarer word, then to the lower row:
    (row, other) arrays of each row's partners (fewer when fewer rows share its eligible words),
    rows ascending, each row's partners best first. `rows`: only these rows' partners (searched
    among all rows); all rows when None."""
    entries = np.flatnonzero(eligible[m.rank])  # in row order, ranks ascending within a row
    by_word = entries[stable_order(m.rank[entries])]  # word after word, each word's rows ascending
    holder = m.row[by_word]  # the rows holding each word, word after word
    word_start = np.searchsorted(m.rank[by_word], np.arange(m.size + 1))
    if rows is not None:  # the rows searched for; every row can be found
        wanted = np.zeros(m.n, dtype=bool)
        wanted[rows] = True
        entries = entries[wanted[m.row[entries]]]
    rows = m.row[entries]
    cum = np.cumsum(m.df[m.rank[entries]])
    # a (row, other row, rank) triple packed into one integer, so one sort groups and orders them
    row_bits, rank_bits = max(1, (m.n - 1).bit_length()), max(1, (m.size - 1).bit_length())
    packed = 2 * row_bits + rank_bits < 63
    found_row: list[np.ndarray] = []
    found_other: list[np.ndarray] = []
    for lo, hi in _blocks(rows, cum, m.n, tick):
        # every row holding one of the block's eligible words, with the word's rank
        group = m.rank[entries[lo:hi]]
        counts = word_start[group + 1] - word_start[group]
        x = np.repeat(rows[lo:hi], counts)
        y = holder[expand(word_start, group)]
        rank = np.repeat(group, counts)
        if packed:
            # runs of ascending keys (a word's holders, for each word of each row): timsort merges
            # them about three times as fast as a quicksort sorts them; the keys are distinct
            key = np.sort((x << (row_bits + rank_bits)) | (y << rank_bits) | rank, kind="stable")
            pair = key >> rank_bits
            first = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
            rarest = key[first] & ((1 << rank_bits) - 1)
            px, py = pair[first] >> row_bits, pair[first] & ((1 << row_bits) - 1)
        else:
            order = np.lexsort((rank, y, x))
            x, y, rank = x[order], y[order], rank[order]
            first = np.flatnonzero(np.r_[True, (x[1:] != x[:-1]) | (y[1:] != y[:-1])])
            rarest, px, py = rank[first], x[first], y[first]
        shared = np.diff(np.r_[first, len(x)])
        other = px != py
        # a partner sharing one word is never taken by a row with `width` partners sharing more
        strong = np.bincount(px[other & (shared > 1)], minlength=m.n)
        other &= (shared > 1) | (strong[px] < width)
        px, py, shared, rarest = px[other], py[other], shared[other], rarest[other]
        # each row's partners, most shared words first, then the rarer word, then the lower row
        count_bits = int(shared.max(initial=1)).bit_length()
        if packed and 2 * row_bits + rank_bits + count_bits < 63:
            fewer = (1 << count_bits) - 1 - shared
            ranked = np.sort((((((px << count_bits) | fewer) << rank_bits) | rarest) << row_bits) | py)
            px = ranked >> (count_bits + rank_bits + row_bits)
            py = ranked & ((1 << row_bits) - 1)
        else:
            order = np.lexsort((py, rarest, -shared, px))
            px, py = px[order], py[order]
        starts = np.flatnonzero(np.r_[True, px[1:] != px[:-1]])
        place = np.arange(len(px)) - np.repeat(starts, np.diff(np.r_[starts, len(px)]))
        keep = place < width
        found_row.append(px[keep])
        found_other.append(py[keep])
    if not found_row:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(found_row), np.concatenate(found_other)


def contained(m: Matrix, min_words: int, max_growth: float, max_df: int) -> tuple[np.ndarray, np.ndarray]:
    """(smaller, larger) arrays of the pairs of rows where every word of the smaller is in the
    larger, the smaller has at least `min_words` words and the larger more words but at most
    `max_growth` times as many. A smaller row is looked up through its rarest word, and only when
    that word is in at most `max_df` rows, so the search stays linear; a candidate whose signature
    (`mask`) lacks a bit of the smaller's cannot hold all its words, and only the rest are counted.
    Ordered by the smaller row, then the larger."""
    return contained_touching(m, min_words, max_growth, max_df, np.ones(m.n, dtype=bool), np.zeros(m.n, dtype=bool))


def strongest_first(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The order of pairs (a, b, s): highest s first (rounded to 9 places, so that rounding noise
    never decides), then by a, then by b. Pairs already in (a, b) order (as the searches give them)
    need only a stable sort by s: by the rounded score in billionths, a whole number, when the
    scores are small enough for that to be exact."""
    rounded = _round9(s)
    if len(a) < 2 or ((a[1:] > a[:-1]) | ((a[1:] == a[:-1]) & (b[1:] > b[:-1]))).all():
        if len(s) and np.isfinite(rounded).all() and np.abs(rounded).max() < 1e6:
            # round(v, 9) is the double nearest to a whole number of billionths: that number again
            billionths = np.rint(rounded * 1e9).astype(np.int64)
            return stable_order(billionths.max() - billionths)
        return np.argsort(-rounded, kind="stable")
    return np.lexsort((b, a, -rounded))


def stable_order(keys: np.ndarray) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` of non-negative whole numbers, by one stable sort per 16
    bits of the largest (numpy sorts 16-bit keys by radix sort, in linear time)."""
    top = int(keys.max(initial=0))
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while top >> shift:
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
    return order


def _round9(s: np.ndarray) -> np.ndarray:
    """`round(v, 9)` of each value, as Python rounds it (to the double nearest the decimal), in bulk:
    away from a tie, rint(v * 1e9) / 1e9 is that double (the product's error, under 1e-6 here, cannot
    cross a half, and the division is correctly rounded); at or near a tie, and past 2^52, Python
    rounds it."""
    with np.errstate(over="ignore", invalid="ignore"):  # what overflows is left to Python
        scaled = s * 1e9
        rounded = np.rint(scaled) / 1e9
        doubtful = (np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6 + np.abs(scaled) * 1e-15) \
            | ~(np.abs(scaled) < 2.0 ** 52)
    picked = np.flatnonzero(doubtful)
    if len(picked):
        rounded[picked] = [round(v, 9) for v in s[picked].tolist()]
    return rounded


def among_k_best(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """For pairs listed strongest first, whether each is among the k strongest pairs of either of
    its ends (what `mgcp.operations.similarity.top_k` keeps)."""
    n = len(a)
    # both ends of pair i at places 2i and 2i + 1: a stable sort by end keeps each end's pairs in
    # the order listed
    ends = np.column_stack([a, b]).reshape(-1)
    by_end = stable_order(ends)
    ends, listed = ends[by_end], by_end // 2
    starts = np.flatnonzero(np.r_[True, ends[1:] != ends[:-1]]) if n else np.zeros(0, dtype=np.int64)
    place = np.arange(2 * n) - np.repeat(starts, np.diff(np.r_[starts, 2 * n]))
    keep = np.zeros(n, dtype=bool)
    keep[listed[place < k]] = True
    return keep


def repeated_rows(start: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The non-empty rows (of `ids` laid out from `start`, values >= 0) whose sequence of ids may
    equal another row's, ascending: every row that does, and rarely (a 64-bit hash of a sequence
    alike by chance) one that does not; the caller compares the few it gets exactly. Each id and
    each place in a row is given a fixed pseudo-random 64-bit value, and a row's hash is the sum of
    their products (mod 2^64)."""
    lengths = np.diff(start)
    filled = np.flatnonzero(lengths > 0)
    if not len(filled):
        return filled
    rng = np.random.default_rng(20_24)  # fixed: the hashes only group rows within one call
    of_id = rng.integers(0, 2 ** 64, size=int(ids.max()) + 1, dtype=np.uint64, endpoint=False)
    of_place = rng.integers(0, 2 ** 64, size=int(lengths.max()), dtype=np.uint64) | np.uint64(1)
    place = np.arange(len(ids), dtype=np.int64)
    place -= np.repeat(start[:-1], lengths)
    hashed = of_id[ids]
    hashed *= of_place[place]
    del place
    running = np.zeros(len(ids) + 1, dtype=np.uint64)
    np.cumsum(hashed, dtype=np.uint64, out=running[1:])
    sums = running[start[1:][filled]] - running[start[:-1][filled]]  # wraps around 2^64, as the sums do
    order = np.lexsort((sums, lengths[filled]))
    same = (sums[order][1:] == sums[order][:-1]) & (lengths[filled][order][1:] == lengths[filled][order][:-1])
    repeated = np.zeros(len(filled), dtype=bool)
    repeated[1:] |= same
    repeated[:-1] |= same
    return np.sort(filled[order[repeated]])


def contained_touching(m: Matrix, min_words: int, max_growth: float, max_df: int, smaller: np.ndarray,
                       larger: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What `contained` finds of the pairs whose smaller row is one of `smaller` or whose larger row
    is one of `larger` (booleans per row), each pair once, by the same rule: each searched smaller
    row with the rows holding its rarest word, and each searched larger row with the rows looked up
    through a word it holds (their rarest), so that only the searched rows' words are gone through."""
    rarest = np.full(m.n, -1, dtype=np.int64)
    filled = np.flatnonzero(m.lengths > 0)
    rarest[filled] = m.rank[m.start[filled]]
    looked_up = looked_up_rows(m, min_words, max_df)
    # each searched smaller row with every row holding its rarest word
    xs = np.flatnonzero(looked_up & smaller)
    wanted = np.zeros(m.size + 1, dtype=bool)
    wanted[rarest[xs]] = True
    holding = np.flatnonzero(wanted[m.rank])  # entries, in row order
    holding = holding[np.argsort(m.rank[holding], kind="stable")]
    word_start = np.searchsorted(m.rank[holding], np.arange(m.size + 1))
    counts = word_start[rarest[xs] + 1] - word_start[rarest[xs]]
    x1, y1 = np.repeat(xs, counts), m.row[holding[expand(word_start, rarest[xs])]]
    if not larger.any():  # each pair found once, in the order of `contained`
        fits = (m.lengths[x1] < m.lengths[y1]) & (m.lengths[y1] <= max_growth * m.lengths[x1])
        return _holding(m, x1[fits], y1[fits])
    # each searched larger row with every looked-up row whose rarest word it holds
    small = np.flatnonzero(looked_up)
    small = small[np.argsort(rarest[small], kind="stable")]
    small_start = np.searchsorted(rarest[small], np.arange(m.size + 1))
    entries = expand(m.start, np.flatnonzero(larger))
    counts = small_start[m.rank[entries] + 1] - small_start[m.rank[entries]]
    x2, y2 = small[expand(small_start, m.rank[entries])], np.repeat(m.row[entries], counts)
    x, y = np.r_[x1, x2], np.r_[y1, y2]
    fits = (m.lengths[x] < m.lengths[y]) & (m.lengths[y] <= max_growth * m.lengths[x])
    code = distinct(x[fits] * m.n + y[fits])
    return _holding(m, code // max(m.n, 1), code % max(m.n, 1))


def looked_up_rows(m: Matrix, min_words: int, max_df: int) -> np.ndarray:
    """Per row, whether `contained` looks it up as the smaller of a pair: it has at least
    `min_words` words (and one), and its rarest is in at most `max_df` rows."""
    filled = np.flatnonzero((m.lengths >= min_words) & (m.lengths > 0))
    out = np.zeros(m.n, dtype=bool)
    out[filled] = m.df[m.rank[m.start[filled]]] <= max_df
    return out


def _holding(m: Matrix, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (x[k], y[k]) where row y holds every word of row x: y must set every bit of x's
    signature (`mask`), and only those that do are counted."""
    mask = m.mask
    covers = np.ones(len(x), dtype=bool)
    for k in range(MASK_WORDS):
        covers &= (mask[x, k] & ~mask[y, k]) == 0
    x, y = x[covers], y[covers]
    _, shared = m.overlap(x, y)
    holds = shared == m.lengths[x]
    return x[holds], y[holds]
