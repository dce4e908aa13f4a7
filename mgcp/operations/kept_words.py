"""The words of a corpus of texts (what `mgcp.text.terms` reads of each), as numpy arrays that a
cycle keeps for the next one (`mgcp.persistence.kept_corpora`).

A `Corpus` holds, for each of its texts in order, the text's digest (`shared.digest(WORDS, text)`)
and its words as ids into a vocabulary, one text after the other (`lengths`, `ids`, like a CSR
matrix's rows): everything `sparse.tf_idf_of` needs to build the corpus's TF-IDF matrix, which is
exactly `sparse.tf_idf` of the words (the compounds and stems are worked out again from the
vocabulary each time, so a new text that writes two words as one joins them in every other text).
A repeat cycle digests its texts, finds the rows of the unchanged ones in the corpus kept from the
last cycle (the kept corpus sharing the most texts with it; by their digests, with numpy) and reads
only the others; the words of the unchanged rows are copied a run of rows at a time.

Kept as bytes (`framed`): the digest of the rules words are read by (`shared.WORDS`; a corpus
kept under other rules is not used) and the counts in the header; the digests, the lengths and ids
as 32-bit integers, and the vocabulary (the words in the order the texts first use them) as UTF-8
joined by newlines (no word holds white space).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from itertools import chain

import numpy as np

from mgcp.operations import framed, sparse

SAMPLE = 64  # texts looked up in each kept corpus to find the one a new corpus continues


class Corpus:
    """Texts' words (see the module docstring). `name`: what it is kept under. `digests`: each
    text's digest, as a list of bytes or as the 16-byte digests joined."""

    def __init__(self, name: str, digests: list[bytes] | bytes, lengths: np.ndarray, ids: np.ndarray,
                 vocabulary: list[str]):
        self.name = name
        self.joined = digests if isinstance(digests, bytes) else b"".join(digests)
        if not isinstance(digests, bytes):
            self.digests = digests
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.ids = ids if ids.dtype == np.int32 else np.asarray(ids, dtype=np.int32)
        self.vocabulary = vocabulary
        self.kept = False  # decoded from what an earlier cycle kept
        # how many of its texts the corpus kept under its name lacks, plus how many texts that one
        # holds and this one does not (None: it holds none known)
        self.behind: int | None = None
        self.start = sparse.starts(self.lengths)

    @cached_property
    def digests(self) -> list[bytes]:
        """Each text's digest."""
        return [self.joined[i:i + 16] for i in range(0, len(self.joined), 16)]

    @cached_property
    def _halves(self) -> np.ndarray:
        """Each digest as two 64-bit integers."""
        return np.frombuffer(self.joined, dtype=np.uint64).reshape(-1, 2)

    def rows_of(self, joined: bytes) -> np.ndarray:
        """The row holding each of the 16-byte digests `joined` (the first, should a text be in
        the corpus twice), or -1 (`sparse.digest_places`: a text may be taken as not held, never as
        another)."""
        return sparse.digest_places(self.joined, joined)

    def words_of(self, row: int) -> tuple[str, ...]:
        """The words of the text in `row`."""
        return tuple(map(self.vocabulary.__getitem__, self.ids[self.start[row]:self.start[row + 1]].tolist()))

    def matrix(self) -> sparse.Matrix:
        """`sparse.tf_idf` of the texts' words."""
        return sparse.tf_idf_of(self.lengths, self.ids, self.vocabulary)

    # -- kept as bytes ---------------------------------------------------------------------------

    def encode(self, rules: bytes) -> bytes:
        """The corpus as bytes, kept under `rules` (the digest of the rules words are read by)."""
        order = sparse.first_seen(self.ids, len(self.vocabulary))  # only the words used, as first used
        renumber = np.zeros(len(self.vocabulary), dtype=np.int64)
        renumber[order] = np.arange(len(order))
        vocabulary = "\n".join(self.vocabulary[i] for i in order.tolist()).encode("utf-8", "surrogatepass")
        return framed.frame({"rules": rules.hex(), "texts": len(self.lengths), "ids": len(self.ids)},
                            [self.joined, self.lengths.astype("<i4").tobytes(),
                             renumber[self.ids].astype("<i4").tobytes(), vocabulary])

    @classmethod
    def decode(cls, name: str, state: bytes, rules: bytes) -> "Corpus | None":
        """The corpus kept as `state`, or None when it was kept under other `rules`, or is cut short
        or damaged (`framed.unframe`)."""
        read = framed.unframe(state, 4)
        if read is None or read[0].get("rules") != rules.hex():
            return None
        (header, (digests, lengths, ids, text)) = read
        n, m = header.get("texts"), header.get("ids")
        if not (isinstance(n, int) and isinstance(m, int) and len(digests) == 16 * n
                and len(lengths) == 4 * n and len(ids) == 4 * m):
            return None
        lengths = np.frombuffer(lengths, dtype="<i4").astype(np.int64)
        ids = np.frombuffer(ids, dtype="<i4")  # read only, as a kept corpus is
        try:
            vocabulary = text.decode("utf-8", "surrogatepass").split("\n") if text else []
        except UnicodeDecodeError:
            return None
        if int(lengths.sum()) != m or (m and int(ids.max()) >= len(vocabulary)) or (m and int(ids.min()) < 0):
            return None
        corpus = cls(name, digests, lengths, ids, vocabulary)
        corpus.kept = True
        return corpus


def continued(corpora: Sequence[Corpus], digests: list[bytes]) -> Corpus | None:
    """The corpus of `corpora` that holds the most of a sample of `digests` (the first of equals),
    or None when none holds any."""
    if not digests:
        return None
    sample = np.frombuffer(b"".join(dict.fromkeys(digests[::max(1, len(digests) // SAMPLE)])),
                           dtype=np.uint64).reshape(-1, 2)
    sample = sample[np.argsort(sample[:, 0], kind="stable")]
    best, hits = None, 0
    for corpus in corpora:  # each corpus's digests looked up among the few of the sample
        held = corpus._halves
        at = np.minimum(np.searchsorted(sample[:, 0], held[:, 0]), len(sample) - 1)
        found = len(np.unique(at[(sample[at] == held).all(axis=1)]))
        if found > hits:
            best, hits = corpus, found
    return best


def build(name: str, digests: list[bytes], read: Callable[[int], Sequence[str]], base: Corpus | None) -> Corpus:
    """The corpus of the texts with `digests` (kept under `name`), with the words of the texts
    `base` holds taken from it and the others read by `read(i)` (the words of the i-th text)."""
    n = len(digests)
    joined = b"".join(digests)
    if base is None:
        rows = np.full(n, -1, dtype=np.int64)
        vocabulary: list[str] = []
    else:
        rows = base.rows_of(joined)
        vocabulary = list(base.vocabulary)
    missing = np.flatnonzero(rows < 0)
    index = {w: i for i, w in enumerate(vocabulary)}
    read_words = [read(i) for i in missing.tolist()]
    new_lengths = np.fromiter(map(len, read_words), dtype=np.int64, count=len(read_words))
    said = list(chain.from_iterable(read_words))
    for word in dict.fromkeys(said):  # each new word numbered where it is first used
        index.setdefault(word, len(index))
    new_ids = np.fromiter(map(index.__getitem__, said), dtype=np.int32, count=len(said))
    vocabulary += list(index)[len(vocabulary):]
    lengths = np.zeros(n, dtype=np.int64)
    found = np.flatnonzero(rows >= 0)
    if base is not None:
        lengths[found] = base.lengths[rows[found]]
    lengths[missing] = new_lengths
    corpus = Corpus(name, joined, lengths, np.empty(int(lengths.sum()), dtype=np.int32), vocabulary)
    corpus.digests = digests
    if base is not None and len(found):
        _copy_rows(base, rows, found, corpus)
    corpus.ids[sparse.expand(corpus.start, missing)] = new_ids
    if base is not None and (base.kept or base.behind is not None):
        # the texts the kept corpus lacks, and those it holds that this one does not
        unused = len(base.lengths) - (len(np.unique(rows[found])) if len(found) else 0)
        corpus.behind = len(missing) + unused + (base.behind or 0)
    return corpus


def _copy_rows(base: Corpus, rows: np.ndarray, found: np.ndarray, corpus: Corpus) -> None:
    """Copy the words of `base`'s rows `rows[found]` into `corpus`'s rows `found`: a run of rows
    that follow each other in both at once, when there are few runs (a corpus changed a little)."""
    step = np.flatnonzero((np.diff(found) != 1) | (np.diff(rows[found]) != 1)) + 1
    firsts = np.r_[0, step]
    if len(firsts) > len(found) // 8:
        corpus.ids[sparse.expand(corpus.start, found)] = base.ids[sparse.expand(base.start, rows[found])]
        return
    lasts = np.r_[step, len(found)] - 1
    for lo, hi, at in zip(corpus.start[found[firsts]].tolist(), corpus.start[found[lasts] + 1].tolist(),
                          base.start[rows[found[firsts]]].tolist()):
        corpus.ids[lo:hi] = base.ids[at:at + hi - lo]
