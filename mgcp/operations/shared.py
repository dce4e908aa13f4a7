"""What the operations of one REM cycle can share: the same lessons vectorised once, the same notes
mined once. The engine makes one `CycleCache` per cycle and passes it to each operation; an
operation called without one computes afresh, so it behaves the same on its own. What outlives a
cycle here is only the words of the corpora the operations compare (`Reader`), which the engine
keeps in the database. No module-level state but the digest of the rules words are read by.
"""

from __future__ import annotations

import hashlib
import sys
import unicodedata
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import TypeVar

from mgcp import text

T = TypeVar("T")


class Interrupted(BaseException):
    """Raised by `CycleCache.tick` in an operation whose run was interrupted (not an Exception: no
    handler of an operation's own errors catches it)."""


class CycleCache:
    """Computed values by key, for one cycle. Values must be treated as read-only.

    `progress`, when set, hears how far the running operation has come: each percent from 0 to
    0.99 once, in order, as it is reached. Its long loops call `tick(done, total)`, and an
    operation of several loops gives each its share of the way with `stage(cache, low, high)`.
    Setting `progress` (the engine does, per operation) starts again from 0.

    `interrupt()`: the operation running in a worker thread stops at its next tick (raising
    Interrupted there), so that an interrupted run (Ctrl-C) does not wait for it to finish."""

    def __init__(self, progress: Callable[[float], None] | None = None, reader: "Reader | None" = None) -> None:
        self._values: dict = {}
        self.progress = progress
        self.reader = reader  # where what is read from texts is found and kept, or None: read afresh
        self.interrupted = False

    def interrupt(self) -> None:
        self.interrupted = True

    @property
    def progress(self) -> Callable[[float], None] | None:
        return self._progress

    @progress.setter
    def progress(self, progress: Callable[[float], None] | None) -> None:
        self._progress, self._span, self._heard = progress, (0.0, 1.0), -1

    def tick(self, done: int, total: int) -> None:
        if self.interrupted:
            raise Interrupted
        if self._progress is None or not total:
            return
        low, high = self._span
        reached = min(int((low + (high - low) * done / total) * 100), 99)
        while self._heard < reached:  # each percent once, even when a loop of blocks jumps
            self._heard += 1
            self._progress(self._heard / 100)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        if key not in self._values:
            self._values[key] = compute()
        return self._values[key]


def shared(cache: CycleCache | None, key: Hashable, compute: Callable[[], T]) -> T:
    """compute() once per key in `cache`; always afresh without one."""
    return compute() if cache is None else cache.get(key, compute)


@contextmanager
def stage(cache: CycleCache | None, low: float, high: float) -> Iterator[None]:
    """Inside, the running operation's ticks cover the share from `low` to `high` of its way."""
    if cache is None:
        yield
        return
    before, cache._span = cache._span, (low, high)
    try:
        yield
    finally:
        cache._span = before


def ticker(cache: CycleCache | None) -> Callable[[int, int], None]:
    """`cache.tick`, or a no-op without a cache."""
    return cache.tick if cache is not None else (lambda done, total: None)


# the words a set phrase starts with, as `text.terms` writes them when they stand alone
_PHRASE_STARTS = frozenset(w for first, *_ in text.PHRASES for w in (first, text.SYNONYMS.get(first, first)))


# What a text's words are read by (`mgcp.text` and the Unicode tables folding uses): kept words are
# found under it, so that another version of the rules finds none.
WORDS = hashlib.blake2b(b"words\0" + Path(text.__file__).read_bytes() + unicodedata.unidata_version.encode()
                        + text.STEMMER.encode(), digest_size=16).digest()


def digest(reading: bytes, doc: str) -> bytes:
    """What a reading of a text is kept under: a digest of the text, keyed by the reading's own."""
    return hashlib.blake2b(doc.encode("utf-8", "surrogatepass"), digest_size=16, key=reading).digest()


def digests(reading: bytes, docs: Sequence[str]) -> list[bytes]:
    """`digest(reading, doc)` of each of `docs` (a copy of one keyed hash costs less than keying one)."""
    keyed = hashlib.blake2b(digest_size=16, key=reading)

    def one(doc: str) -> bytes:
        h = keyed.copy()
        h.update(doc.encode("utf-8", "surrogatepass"))
        return h.digest()

    return list(map(one, docs))


# The share of its items a kept cache (a corpus's texts, the word index's lessons) may lack, or hold
# no longer, and still not be written again: at 100k lessons writing tens of MB costs more than
# reading those few items again next cycle.
BEHIND = 0.02


class Reader:
    """The words of the corpora the operations compare, found among what earlier cycles kept or
    read anew: `corpora` holds the kept ones as bytes by name (`mgcp.operations.kept_words`); each
    corpus built in the cycle continues the kept one that shares the most texts with it, and
    `keep_corpora` says what to keep of them. One thread uses it at a time."""

    MAX_CORPORA = 8  # kept corpora, beyond which those this cycle did not build are dropped

    def __init__(self, corpora: dict[str, bytes] | None = None):
        self.corpora = dict(corpora or {})  # let go of once a corpus built in the cycle replaces it
        self._kept_names = set(self.corpora)
        self.built: dict = {}  # name -> the corpus built in this cycle
        self._decoded: dict = {}  # name -> the kept corpus, or None when it cannot be used
        self._texts: list = []  # (docs, corpus) of each corpus built in this cycle
        self._row_of: dict[int, dict[str, int]] = {}  # by place in `_texts`: a row by text

    def terms(self, doc: str) -> tuple[str, ...]:
        """`text.terms(doc)`: from a corpus built in this cycle that holds the text, else read."""
        for place, (docs, corpus) in enumerate(self._texts):
            if place not in self._row_of:
                self._row_of[place] = dict(zip(docs, range(len(docs))))
            row = self._row_of[place].get(doc)
            if row is not None:
                return corpus.words_of(row)
        return tuple(map(sys.intern, text.terms(doc)))

    def let_go(self) -> None:
        """Drop what `terms` made to answer quickly (each corpus's rows by text); the corpora stay,
        and `terms` makes them again if asked."""
        self._row_of.clear()

    def built_corpus(self, docs: list[str]):
        """The corpus of `docs` built in this cycle, or None (nothing is read or built here)."""
        for built_docs, corpus in self._texts:
            if built_docs == docs:  # the same strings, mostly: cheap to compare
                return corpus
        return None

    def corpus(self, docs: list[str], read: Callable[[int], Sequence[str]]):
        """The words of `docs` (`read(i)`: docs[i]'s words, for those no kept corpus holds) as a
        `kept_words.Corpus`, rows in `docs` order."""
        from mgcp.operations import kept_words

        corpus = self.built_corpus(docs)  # the same texts again
        if corpus is not None:
            return corpus
        for name in list(self.corpora):
            if name not in self._decoded:
                self._decoded[name] = kept_words.Corpus.decode(name, self.corpora[name], WORDS)
        keys = digests(WORDS, docs)
        candidates = list(self.built.values()) + [c for name, c in self._decoded.items()
                                                  if c is not None and name not in self.built]
        base = kept_words.continued(candidates, keys)
        if base is not None:
            name = base.name
        else:
            taken = {n for n, c in self._decoded.items() if c is not None} | set(self.built)  # the unusable: replaced
            name = str(next(i for i in range(len(taken) + 1) if str(i) not in taken))
        corpus = kept_words.build(name, keys, read, base)
        self.built[name] = corpus
        if base is not None and base.kept:
            self.corpora.pop(name, None)
            self._decoded.pop(name, None)
        self._texts.append((docs, corpus))
        return corpus

    def keep_corpora(self) -> tuple[dict[str, bytes], list[str]]:
        """What to keep of the corpora: the states to write by name, and the names to drop: of the
        kept corpora this cycle did not build, those kept under other rules, and those beyond
        MAX_CORPORA (by name). A corpus built in this cycle is written unless the texts the corpus
        kept under its name lacks, and those it holds no longer used, are at most BEHIND of its
        texts (the words of a text are what its digest says, however old the corpus they come from,
        so this changes no result)."""
        write = {name: corpus.encode(WORDS) for name, corpus in sorted(self.built.items())
                 if corpus.behind is None or corpus.behind > BEHIND * len(corpus.lengths)}
        others = sorted(self._kept_names - set(self.built))
        drop = [name for name in others if name in self._decoded and self._decoded[name] is None]
        rest = [name for name in others if name not in drop]
        room = max(self.MAX_CORPORA - len(self.built), 0)
        drop += rest[room:]
        return write, drop


def _read(cache: CycleCache | None, doc: str) -> tuple[str, ...]:
    if cache is not None and cache.reader is not None:
        return cache.reader.terms(doc)
    return tuple(map(sys.intern, text.terms(doc)))


def tf_idf(cache: CycleCache | None, docs: list[str], read: Callable[[int], Sequence[str]]):
    """`sparse.tf_idf([read(i) for i in range(len(docs))])`, where `read(i)` gives the words of
    docs[i] (`text.terms`), through the cache's `Reader` when it has one: then only the texts no
    kept corpus holds are read."""
    from mgcp.operations import sparse

    if cache is not None and cache.reader is not None:
        return cache.reader.corpus(docs, read).matrix()
    return sparse.tf_idf([read(i) for i in range(len(docs))])


def terms(cache: CycleCache | None, doc: str) -> tuple[str, ...]:
    """`text.terms(doc)`, read once per text in a cycle (duplicates, copies and communities read the
    same actions), through the cache's `Reader` when it has one; kept as a tuple of interned words,
    so that 100k texts' words cost little memory."""
    return shared(cache, ("terms", doc), lambda: _read(cache, doc))


def joined_terms(cache: CycleCache | None, parts: list[str]) -> tuple[str, ...]:
    """`text.terms(" ".join(parts))`, from each part's terms: no word spans the space between two
    parts, so the words are the same, unless a set phrase (`text.PHRASES`, at most three words)
    could start in the last two words of one part and go on in the next; then the whole text is
    read. Only the parts' words are kept in the cycle (its one caller reads each joined text once)."""
    pieces = [terms(cache, part) for part in parts]
    if any(word in _PHRASE_STARTS for piece in pieces[:-1] for word in piece[-2:]):
        return _read(cache, " ".join(parts))
    return tuple(chain.from_iterable(pieces))
