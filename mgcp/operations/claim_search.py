"""The contradiction scan's claim search (`mgcp.operations.contradiction_scan`): which claims of
which distinct actions contradict, over all the actions at once (`search`), or kept between cycles
(`KeptClaims`), so that a repeat reads and compares only the actions new since the last search and
finds exactly the same claim pairs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from types import ModuleType

import numpy as np

from mgcp import text
from mgcp.operations import framed, sparse
from mgcp.operations.shared import WORDS
from mgcp.operations.shared import digests as keyed_digests

FORMAT = 4
_OWN = Path(__file__).read_bytes()


def rules(scan: ModuleType) -> bytes:
    """What a kept search is made by: this module's rules and those actions are read by (`scan`,
    the contradiction scan, which hands itself to the search: its `READING`)."""
    return hashlib.blake2b(b"kept-claims\0" + str(FORMAT).encode() + scan.READING + _OWN, digest_size=16).digest()


# (u, k, v, l, overlap): claim k of action u contradicts claim l of action v; (u, k) < (v, l)
ClaimPair = tuple[int, int, int, int, float]


def search(actions: list[str], claim_at: float,
           scan: ModuleType) -> tuple[Callable[[int], list], list[ClaimPair]]:
    """(the compared claims of a read action by its index, the contradicting claim pairs) of the
    distinct `actions`, read by the rules of `scan` (the contradiction scan: `Claim`s, `_screen`,
    `_compared`, `_contradiction`, REFUSING); see `_Search`."""
    found = _Search(actions, claim_at, scan)
    return found.said.__getitem__, found.pairs


class _Search:
    """The claim search over all the distinct actions.

    A pair needs a refused claim, so the actions are read in two rounds: first those with a word
    that can refuse (REFUSING), then, of the others (whose claims are all said, none refused; their
    stems are `rest`), only those that hold enough of a refused claim's words for the claim
    threshold (`_meeting`). The claims read are compared in bulk (`_Table`)."""

    def __init__(self, actions: list[str], claim_at: float, scan: ModuleType):
        self.ids: dict[str, int] = {}  # every word (a claim's or a stem of the rest) by its number
        self.said: dict[int, list] = {}
        stem_of: dict[str, int] = {}
        rest, lengths, stems = [], [], []  # the rest's stems, one flat list (a set per action costs far more)
        for u, action in enumerate(actions):
            words = scan._screen(action)
            if words & scan.REFUSING:
                self.said[u] = scan._compared(action)
                continue
            for w in words.difference(stem_of):  # the words met for the first time
                stem_of[w] = self.ids.setdefault(text.stem(w), len(self.ids))
            row = set(map(stem_of.__getitem__, words))
            rest.append(u)
            lengths.append(len(row))
            stems.extend(row)
        self.rest = np.array(rest, dtype=np.int64)
        self.rest_start = sparse.starts(np.array(lengths, dtype=np.int64))
        self.rest_word = np.array(stems, dtype=np.int64)
        refused = [claim.about for said in self.said.values() for claim in said if not claim.positive]
        self.met = self.rest[_meeting(refused, self.ids, self.rest_start, self.rest_word, claim_at)]
        for u in self.met.tolist():
            self.said[u] = scan._compared(actions[u])
        self.table = _Table.of(self.said, self.ids)
        self.pairs = self.table.contradicting(*self.table.candidates(claim_at), claim_at, self.said.__getitem__,
                                              scan._contradiction)


def _csr(rows: list) -> tuple[np.ndarray, np.ndarray]:
    """Rows of numbers as (start, values): row r is values[start[r]:start[r + 1]]."""
    start = sparse.starts(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)))
    return start, np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(start[-1]))


def _meeting(refused: list[frozenset[str]], ids: dict[str, int], start: np.ndarray, word: np.ndarray,
             claim_at: float) -> np.ndarray:
    """The rows (each the distinct numbers of an action's stems, of its `_screen` words; `ids`
    numbers the words) that could hold a claim at least `claim_at` alike (Jaccard) to a refused one:
    such a claim shares at least ceil(claim_at x n) of the refused claim's n words, so the row holds
    that many. Counted for each refused claim over all rows at once, from the rows holding each of
    its words."""
    rows = len(start) - 1
    distinct = {about: math.ceil(claim_at * len(about) - 1e-6) for about in refused}
    if not distinct:
        return np.zeros(0, dtype=np.int64)
    if min(distinct.values()) <= 0:
        return np.arange(rows, dtype=np.int64)
    wanted = np.array(sorted({ids[w] for about in distinct for w in about if w in ids}), dtype=np.int64)
    lookup = np.zeros(len(ids) + 1, dtype=bool)
    lookup[wanted] = True
    held = lookup[word]
    row_of = np.repeat(np.arange(rows, dtype=np.int64), np.diff(start))[held]
    word_of = word[held]
    order = np.argsort(word_of, kind="stable")
    row_of, word_of = row_of[order], word_of[order]
    bounds = np.searchsorted(word_of, np.r_[wanted, len(ids) + 1])
    numbers = {w: row_of[lo:hi] for w, lo, hi in zip(wanted.tolist(), bounds[:-1].tolist(), bounds[1:].tolist())
               if hi > lo}
    met = np.zeros(rows, dtype=bool)
    counts = np.zeros(rows, dtype=np.int32)
    for about, need in distinct.items():
        arrays = [numbers[ids[w]] for w in about if w in ids and ids[w] in numbers]
        if len(arrays) < need:
            continue
        for found in arrays:
            counts[found] += 1
        met |= counts >= need
        for found in arrays:
            counts[found] -= 1
    return np.flatnonzero(met)


@dataclass
class _Table:
    """Compared claims as arrays: per claim its action (`text`), its place among the action's
    compared claims (`pos`), its polarity, and its words (numbers) word[start[c]:start[c + 1]]."""

    text: np.ndarray
    pos: np.ndarray
    positive: np.ndarray
    start: np.ndarray
    word: np.ndarray

    @classmethod
    def of(cls, said: dict[int, list], ids: dict[str, int]) -> "_Table":
        """The claims of `said` (action -> its compared claims), by action, each action's in order."""
        texts, places, positive, rows = [], [], [], []
        for u in sorted(said):
            for k, claim in enumerate(said[u]):
                texts.append(u)
                places.append(k)
                positive.append(claim.positive)
                rows.append([ids.setdefault(w, len(ids)) for w in claim.about])
        start, word = _csr(rows)
        return cls(np.array(texts, dtype=np.int64), np.array(places, dtype=np.int64),
                   np.array(positive, dtype=bool), start, word)

    def rows(self, claims: np.ndarray) -> "_Table":
        """The table of the claims `claims` (numbers), in that order."""
        start = sparse.starts(self.start[claims + 1] - self.start[claims])
        return _Table(self.text[claims], self.pos[claims], self.positive[claims], start,
                      self.word[sparse.expand(self.start, claims)])

    def joined(self, other: "_Table") -> "_Table":
        return _Table(np.r_[self.text, other.text], np.r_[self.pos, other.pos], np.r_[self.positive, other.positive],
                      np.r_[self.start[:-1], other.start + self.start[-1]], np.r_[self.word, other.word])

    def candidates(self, claim_at: float, fresh: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(positive claim, negative claim) pairs that include every pair of opposite polarity
        sharing at least `_need` of each one's words: among all claims (`fresh` None), by
        prefix filtering (each claim's words in one order, rarest first: such a pair shares a word
        among both claims' first n - need + 1); else those with a `fresh` claim, whose first
        n - need + 1 words hold a word the other claim holds (in any order)."""
        lengths = np.diff(self.start)
        owner = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        size = int(self.word.max(initial=0)) + 1
        df = np.bincount(self.word, minlength=size)
        order = np.lexsort((df[self.word] * size + self.word, owner))  # rarest first within each claim
        place = np.arange(len(order)) - self.start[owner]
        prefix = order[place < (lengths - _need(claim_at, lengths) + 1)[owner]]
        if fresh is None:
            source, held = prefix, prefix
        else:
            source, held = prefix[fresh[owner[prefix]]], np.arange(len(self.word))
        by_word = held[np.argsort(self.word[held], kind="stable")]
        word_start = np.searchsorted(self.word[by_word], np.arange(size + 1))
        reach = self.word[source]
        x = np.repeat(owner[source], word_start[reach + 1] - word_start[reach])
        y = owner[by_word[sparse.expand(word_start, reach)]]
        opposite = self.positive[x] != self.positive[y]
        x, y = x[opposite], y[opposite]
        x, y = np.where(self.positive[x], x, y), np.where(self.positive[x], y, x)
        codes = sparse.distinct(x * len(lengths) + y)
        return codes // max(len(lengths), 1), codes % max(len(lengths), 1)

    def contradicting(self, x: np.ndarray, y: np.ndarray, claim_at: float, claims_of: Callable[[int], list],
                      contradiction: Callable) -> list[ClaimPair]:
        """The pairs (x[i], y[i]) that contradict (`contradiction`, the scan's `_contradiction`):
        those whose words are alike enough (Jaccard, computed as the scan computes it) are checked
        one by one."""
        lengths = np.diff(self.start)
        size = int(self.word.max(initial=0)) + 1
        owner = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        held = np.sort(owner * size + self.word)
        entries = sparse.expand(self.start, x)
        asked = np.repeat(y, lengths[x]) * size + self.word[entries]
        at = np.minimum(np.searchsorted(held, asked), max(len(held) - 1, 0))
        found = held[at] == asked if len(held) else np.zeros(0, dtype=bool)
        shared = np.bincount(np.repeat(np.arange(len(x)), lengths[x]), weights=found, minlength=len(x))
        alike = shared / (lengths[x] + lengths[y] - shared) >= claim_at - 1e-9
        out = []
        for i, j in zip(x[alike].tolist(), y[alike].tolist()):
            (u, k), (v, l) = sorted([(int(self.text[i]), int(self.pos[i])), (int(self.text[j]), int(self.pos[j]))])
            overlap = contradiction(claims_of(u)[k], claims_of(v)[l], claim_at)
            if overlap is not None:
                out.append((u, k, v, l, overlap))
        return out


def _need(claim_at: float, lengths: np.ndarray) -> np.ndarray:
    """How many of its n words a claim shares with one at least `claim_at` alike (Jaccard, less
    the 1e-9 `_contradiction` allows): s / (n + m - s) >= t' gives s >= t' x n."""
    return np.ceil((claim_at - 1e-9) * lengths - 1e-9).astype(np.int64)


# -- the search kept between cycles ----------------------------------------------------------------


class KeptClaims:
    """The claim search kept between cycles: a repeat reads and compares only the actions new since
    the last search, and finds exactly the claim pairs `_search` finds.

    A search keeps, for its actions (each by the digest the kept corpora know its text by,
    `shared.digest(WORDS, text)`; the state names the `rules` it was made by: this module's, the
    scan's and the words' rules): which actions it read, and their compared claims as numbers of
    their words (a claim itself, when a pair asks for it, is read again from its action's text: the
    state is kept under the rules that read it); the stems of each action it did not read (its
    *unread* actions); and every contradicting claim pair among them. Two invariants hold of what
    is kept:

    1. the kept pairs are all the contradicting claim pairs among the kept actions;
    2. an unread action holds no claim contradicting any claim of a kept action.

    Both hold of a full search: it compares every claim it read, and leaves unread only actions
    without a word that can refuse (all their claims are said) that meet no refused claim (`_meeting`:
    a claim contradicting a refused one shares at least ceil(claim_at x n) of its n words).

    A later search over the actions of now drops the kept actions no longer there with their pairs
    (both invariants hold of a subset), reads every new action, and reads the unread actions that
    meet a refused claim of a new one (*met*). Its pairs are the kept ones among the actions still
    there and the contradicting pairs with a new action's claim, found among all the claims read
    (`_Table.candidates` with the new claims fresh: each shares a word of the new claim's first
    n - need + 1 words, in any order). That is every contradicting pair: one of two kept actions
    is kept (1.); one of a met or an unread action and another kept action cannot be (2.: a met
    or unread action's claims are all said, and another such action's too); one with a new action
    is found. Every action of now is then kept, the met and the new ones read, and both
    invariants hold again. Whether a pair contradicts depends on its two claims and the claim
    threshold only (not on the other actions), and the pairs are checked by `_contradiction` as a
    full search checks them, so the search gives the full search's pairs with the same overlaps.
    The trigger similarity, which depends on all the triggers, is never kept.

    The state is stale, and a full search runs, when it is missing or unreadable, or was made by
    other rules or for another claim threshold. `state` in (bytes or None), `keep` out (the bytes
    to keep, or None when what is kept holds as it is); `fresh`: how many actions the last search
    read as new (None: a full search)."""

    def __init__(self, state: bytes | None = None):
        self.state = state
        self.keep: bytes | None = None
        self.fresh: int | None = None

    def search(self, actions: list[str], claim_at: float, scan: ModuleType, digests: bytes | None = None):
        """What `search(actions, claim_at, scan)` returns, from the kept state when it holds.
        `digests`: each action's `shared.digest(WORDS, action)`, joined, when the caller has them."""
        made_by = rules(scan)
        if digests is None:
            digests = b"".join(keyed_digests(WORDS, actions))
        digests = np.frombuffer(digests, dtype="S16")
        old = _State.decode(self.state, claim_at, made_by)
        if old is None:
            found = _Search(actions, claim_at, scan)
            self.fresh = None
            kept = np.zeros(len(actions), dtype=bool)
            kept[found.rest] = True
            kept[found.met] = False
            lengths = np.zeros(len(actions), dtype=np.int64)
            unread = np.flatnonzero(kept[found.rest])
            lengths[found.rest[unread]] = np.diff(found.rest_start)[unread]
            stems = sparse.starts(lengths)
            read = np.zeros(len(actions), dtype=bool)
            read[list(found.said)] = True
            self.keep = _State.made(claim_at, made_by, digests, found.ids, stems,
                                    found.rest_word[sparse.expand(found.rest_start, unread)], found.table,
                                    read, found.pairs).encode()
            return found.said.__getitem__, found.pairs
        was = sparse.digest_places(old.digests.tobytes(), digests.tobytes())  # each action's kept index, or -1
        now = np.full(len(old.digests), -1, dtype=np.int64)  # each kept action's index now, or -1
        now[was[was >= 0]] = np.flatnonzero(was >= 0)
        new = np.flatnonzero(was < 0).tolist()
        self.fresh = len(new)
        ids = {w: i for i, w in enumerate(old.vocab)}
        said = {u: scan._compared(actions[u]) for u in new}
        refused = [claim.about for u in new for claim in said[u] if not claim.positive]
        read = old.read
        met = _meeting(refused, ids, old.stem_start, old.stem_word, claim_at)
        met = met[(now[met] >= 0) & ~read[met]]
        for u in now[met].tolist():
            said[u] = scan._compared(actions[u])
        kept_read = np.flatnonzero(read & (now >= 0))
        kept = old.table.rows(sparse.expand(old.claim_start, kept_read))
        kept.text = now[kept.text]
        table = kept.joined(_Table.of(said, ids))
        fresh = np.zeros(len(table.text), dtype=bool)
        fresh[len(kept.text):] = np.isin(table.text[len(kept.text):], new)
        again: dict[int, list] = {}  # the claims of kept actions, read again from their text when asked for

        def claims_of(u: int) -> list:
            if u in said:
                return said[u]
            if u not in again:
                again[u] = scan._compared(actions[u])
            return again[u]

        pairs = old.pairs_among(now) + table.contradicting(*table.candidates(claim_at, fresh), claim_at, claims_of,
                                                           scan._contradiction)
        if not new and np.array_equal(was, np.arange(len(old.digests))):
            self.keep = None  # the same actions in the same order: what is kept holds
            return claims_of, pairs
        unread = np.flatnonzero(~read & (now >= 0))
        unread = unread[~np.isin(unread, met)]
        lengths = np.zeros(len(actions), dtype=np.int64)
        lengths[now[unread]] = np.diff(old.stem_start)[unread]
        stems = sparse.starts(lengths)
        by_now = unread[np.argsort(now[unread], kind="stable")]
        read_now = np.zeros(len(actions), dtype=bool)
        read_now[now[kept_read]] = True
        read_now[list(said)] = True
        self.keep = _State.made(claim_at, made_by, digests, ids, stems,
                                old.stem_word[sparse.expand(old.stem_start, by_now)], table, read_now, pairs).encode()
        return claims_of, pairs


@dataclass
class _State:
    """What `KeptClaims` keeps (see there), per action (`digests`): its stems when unread
    (stem_word[stem_start[t]:stem_start[t + 1]]), whether it was read (`read`: its claims are then
    those its text gives) and its compared claims (`table`, by action, and claim_start[t]: its
    first); the words by number (`vocab`); and the contradicting claim pairs (`pairs`, as
    `ClaimPair`s)."""

    claim_at: float
    rules: bytes
    digests: np.ndarray  # 16-byte strings ("S16")
    vocab: list[str]
    stem_start: np.ndarray
    stem_word: np.ndarray
    table: _Table
    claim_start: np.ndarray
    read: np.ndarray  # bool
    pairs: list[ClaimPair]

    @classmethod
    def made(cls, claim_at: float, made_by: bytes, digests: np.ndarray, ids: dict[str, int], stem_start: np.ndarray,
             stem_word: np.ndarray, table: _Table, read: np.ndarray, pairs: list[ClaimPair]) -> "_State":
        """The state of actions `digests` from their stems (unread ones), claims (`table`, any
        order), which were read, and pairs; the words no action holds any longer are dropped."""
        table = table.rows(np.lexsort((table.pos, table.text)))
        used = np.zeros(len(ids) + 1, dtype=bool)
        used[stem_word] = True
        used[table.word] = True
        number = np.cumsum(used) - 1
        vocab = [w for w, i in ids.items() if used[i]]
        table.word = number[table.word]
        return cls(claim_at, made_by, digests, vocab, stem_start, number[stem_word], table,
                   np.searchsorted(table.text, np.arange(len(digests) + 1)), read, sorted(pairs))

    def pairs_among(self, now: np.ndarray) -> list[ClaimPair]:
        """The kept pairs whose actions are both still there (`now`: each one's index now, or -1),
        in the indexes of now."""
        out = []
        for u, k, v, l, overlap in self.pairs:
            x, y = int(now[u]), int(now[v])
            if x >= 0 and y >= 0:
                out.append((x, k, y, l, overlap) if (x, k) < (y, l) else (y, l, x, k, overlap))
        return out

    # -- as bytes ------------------------------------------------------------------------------------

    def encode(self) -> bytes:
        quads = np.array([p[:4] for p in self.pairs], dtype=np.int64).reshape(-1, 4)
        number = _number(len(self.vocab))
        parts = [self.digests.tobytes(), "\n".join(self.vocab).encode("utf-8", "surrogatepass"),
                 self.stem_start.astype("<i8").tobytes(), self.stem_word.astype(number).tobytes(),
                 self.claim_start.astype("<i8").tobytes(), self.table.pos.astype("<i4").tobytes(),
                 self.table.positive.astype("u1").tobytes(), self.table.start.astype("<i8").tobytes(),
                 self.table.word.astype(number).tobytes(), self.read.astype("u1").tobytes(),
                 quads.astype("<i8").tobytes(), np.array([p[4] for p in self.pairs], dtype="<f8").tobytes()]
        return framed.frame({"format": FORMAT, "rules": self.rules.hex(), "claim_at": self.claim_at,
                             "texts": len(self.digests), "words": len(self.vocab), "claims": len(self.table.pos),
                             "pairs": len(self.pairs)}, parts)

    @classmethod
    def decode(cls, state: bytes | None, claim_at: float, made_by: bytes) -> "_State | None":
        """The state kept in `state`, or None when there is none, it is unreadable or damaged
        (`framed.unframe`), or it was made by other rules or for another claim threshold."""
        read = framed.unframe(state, 12)
        if read is None:
            return None
        header, parts = read
        if (header.get("format") != FORMAT or header.get("rules") != made_by.hex()
                or header.get("claim_at") != claim_at):
            return None
        try:
            (digests, vocab, stem_start, stem_word, claim_start, pos, positive, start, word, was_read,
             quads, overlaps) = parts
            n, claims, words = int(header["texts"]), int(header["claims"]), int(header["words"])

            def ints(part: bytes, dtype: str) -> np.ndarray:
                return np.frombuffer(part, dtype=dtype).astype(np.int64)

            claim_start_ = ints(claim_start, "<i8")
            pos_, start_ = ints(pos, "<i4"), ints(start, "<i8")
            number = _number(words)
            stem_start_, word_ = ints(stem_start, "<i8"), ints(word, number)
            stem_word_ = np.frombuffer(stem_word, dtype=number)  # the most numbers: as written, not widened
            read_ = np.frombuffer(was_read, dtype="u1")
            quads_ = ints(quads, "<i8").reshape(-1, 4)
            pairs = [(u, k, v, l, o)
                     for (u, k, v, l), o in zip(quads_.tolist(), np.frombuffer(overlaps, "<f8").tolist())]
            vocab_ = vocab.decode("utf-8", "surrogatepass").split("\n") if words else []
            ok = (len(digests) == 16 * n and len(vocab_) == words and len(stem_start_) == n + 1 == len(claim_start_)
                  and len(read_) == n and len(pos_) == claims == len(positive) and len(start_) == claims + 1
                  and len(pairs) == header["pairs"] == len(quads_)
                  and stem_start_[-1] == len(stem_word_) and claim_start_[-1] == claims and start_[-1] == len(word_)
                  and all(np.all(np.diff(a) >= 0) for a in (stem_start_, claim_start_, start_))
                  and all(np.all((a >= 0) & (a < words)) for a in (stem_word_, word_))
                  and np.all(read_ <= 1) and np.all(read_.astype(bool) | (np.diff(claim_start_) == 0))
                  and np.all((quads_ >= 0) & (quads_[:, [0, 2]] < n).repeat(2, axis=1)))
            if not ok:
                return None
            table = _Table(np.repeat(np.arange(n, dtype=np.int64), np.diff(claim_start_)), pos_,
                           np.frombuffer(positive, dtype="u1").astype(bool), start_, word_)
            return cls(claim_at, made_by, np.frombuffer(digests, dtype="S16"), vocab_, stem_start_,
                       stem_word_, table, claim_start_, read_.astype(bool), pairs)
        except (ValueError, KeyError, TypeError, IndexError, OverflowError, UnicodeDecodeError):
            return None


def _number(words: int) -> str:
    """How the numbers of `words` words are written: two bytes each when they fit."""
    return "<u2" if words <= 1 << 16 else "<i4"
