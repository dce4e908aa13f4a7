"""Which lessons hold which stemmed word: the index knowledge extraction (is a theme or a decision
captured?) and pattern reinforcement (which lesson holds a decision or a note?) both ask.

A lesson's words are `text.content_tokens` of its trigger, action and tags joined by spaces. The
index is one numpy array of lesson numbers sorted by (word, lesson), a word's lessons one slice of
it, so that a cycle reads each of 100k lessons once for both operations (the engine builds it once
per cycle over the active lessons it shares).

The index is kept between cycles (`state`, read back by `LessonWords(lessons, kept)`): each lesson
is known by a digest of its id, creation time and words' source text (`lesson_digest`), so a cycle
reads only the lessons added or changed since, and drops the gone ones' entries. A kept state made
by other rules (other code of this module or of `mgcp.text`), or damaged (`mgcp.operations.framed`:
cut short, grown, or a byte changed anywhere in it), is ignored; it is a cache, and the index
made from it is exactly the one made from nothing (a word's lessons ascending, whatever the word
numbers).
"""

from __future__ import annotations

import hashlib
import json
from itertools import repeat
from operator import attrgetter
from pathlib import Path

from mgcp import text
from mgcp.operations import framed
from mgcp.operations.shared import WORDS

# What a kept index is valid under: these rules and the rules words are read by (`shared.WORDS`).
RULES = hashlib.blake2b(b"lesson words\0" + WORDS + Path(__file__).read_bytes(), digest_size=16).hexdigest()


def source(lesson) -> str:
    """The text a lesson's words are read from."""
    return " ".join([lesson.trigger, lesson.action, *lesson.tags])


def lesson_digest(lesson) -> bytes:
    """What a lesson's entries are kept under: a digest of its id, its creation time, its trigger,
    its action and its tags (strings all), each followed by a NUL, so that no two lessons read
    alike; a lesson with a NUL inside one of them is digested from its fields as JSON instead, by
    another hash (`_ESCAPED`), so that it reads alike with no other lesson either."""
    return lesson_digests([lesson])[0]


_ESCAPED = b"mgcp nul in text"  # the personalisation of a lesson's digest made from JSON


def lesson_digests(lessons: list) -> list[bytes]:
    """`lesson_digest` of each lesson, in one loop (100k lessons). Each one's NUL-separated fields
    hold four NULs and one per tag exactly when no field holds one: when the NULs of all of them
    are more than that, the lessons holding the others are digested again from JSON."""
    blake2b, nul = hashlib.blake2b, "\0"
    read = [f"{lesson.id}\0{lesson.created_at}\0{lesson.trigger}\0{lesson.action}\0{nul.join(lesson.tags)}"
            f"{nul if lesson.tags else ''}".encode("utf-8", "surrogatepass") for lesson in lessons]
    digests = [blake2b(said, digest_size=16).digest() for said in read]
    tags = list(map(len, map(attrgetter("tags"), lessons)))
    if sum(map(bytes.count, read, repeat(b"\0"))) != 4 * len(read) + sum(tags):
        for number, (said, count) in enumerate(zip(read, tags)):
            if said.count(b"\0") != 4 + count:
                lesson = lessons[number]
                fields = [lesson.id, lesson.created_at, lesson.trigger, lesson.action, list(lesson.tags)]
                escaped = json.dumps(fields, ensure_ascii=False).encode("utf-8", "surrogatepass")
                digests[number] = blake2b(escaped, digest_size=16, person=_ESCAPED).digest()
    return digests


class LessonWords:
    """`lessons`: the lessons indexed, in the order their numbers refer to. `kept`: the `state` of
    an earlier index, whose entries of lessons unchanged since are taken as they are."""

    def __init__(self, lessons: list, kept: bytes | None = None, digests: list[bytes] | None = None):
        import numpy as np

        from mgcp.operations.sparse import starts

        self.lessons = lessons
        self.digests = digests if digests is not None else lesson_digests(lessons)
        n = len(lessons)
        old = _unpack(kept)
        if old is None:
            self.words: dict[str, int] = {}
            counts = holders = np.zeros(0, dtype=np.int64)
            fresh = range(n)
            self.gone = 0
        else:
            vocabulary, old_digests, counts, holders = old
            self.words = {word: number for number, word in enumerate(vocabulary)}
            was = _places(old_digests, b"".join(self.digests))  # each lesson's kept number, or -1
            found = np.flatnonzero(was >= 0)
            if len(found) > 1 and not bool(np.all(was[found[1:]] > was[found[:-1]])):
                # the kept lessons come in another order: their words are read anew
                self.__init__(lessons, None, self.digests)
                return
            fresh = np.flatnonzero(was < 0).tolist()
            moved = np.full(len(old_digests) // 16, -1, dtype=np.int64)  # kept lesson number -> now
            moved[was[found]] = found
            self.gone = len(moved) - len(found)
            # Lessons kept their order, so each word's lessons stay ascending.
            holders = moved[holders]
            lost = np.flatnonzero(holders < 0)  # the entries of the lessons gone
            counts = counts - np.bincount(np.searchsorted(starts(counts), lost, "right") - 1, minlength=len(counts))
            holders = np.delete(holders, lost)
        self.read = len(fresh)  # lessons whose words were read anew (`gone`: kept ones no longer here)
        add_words, add_holders = self._read([lessons[number] for number in fresh], np.asarray(fresh, dtype=np.int64))
        if len(add_words):  # each new pair where it sorts among the kept ones, by (word, lesson)
            size = max(n, 1)
            word_of = np.repeat(np.arange(len(counts), dtype=np.int64) * size, counts)
            holders = np.insert(holders, np.searchsorted(word_of + holders, add_words * size + add_holders),
                                add_holders)
        total = np.bincount(add_words, minlength=len(self.words))
        total[:len(counts)] += counts
        self._holders = holders
        self._bounds = starts(total)

    def _read(self, lessons: list, numbers):
        """The (word, lesson number) pairs of `lessons` (numbered `numbers`), sorted, each once."""
        from array import array

        import numpy as np

        from mgcp.operations.sparse import distinct

        def word_number(token: str) -> int:  # -1: no content word
            word = next(iter(text.content_tokens(token)), None)
            return -1 if word is None else self.words.setdefault(word, len(self.words))

        number = text.Memo(word_number).__getitem__  # each distinct token stemmed once
        found_numbers = array("q")  # each token's word number, a machine integer each, never a str per token
        lengths = array("q")
        for lesson in lessons:
            found = text.tokenize(source(lesson))
            found_numbers.extend(map(number, found))
            lengths.append(len(found))
        ids = np.asarray(found_numbers, dtype=np.int64)
        owners = np.repeat(numbers, np.asarray(lengths, dtype=np.int64))
        present = ids >= 0
        size = max(len(self.lessons), 1)
        pairs = distinct(ids[present] * size + owners[present])
        return np.divmod(pairs, size)

    def state(self) -> bytes:
        """What the next cycles read this index back from (see `LessonWords(lessons, kept)`): the
        lessons' digests, each kept word's count of lessons and the lessons of each word in turn
        (`framed`)."""
        import numpy as np

        counts = np.diff(self._bounds)
        held = counts > 0  # a word no lesson holds any more is not kept
        vocabulary = [word for word, h in zip(sorted(self.words, key=self.words.__getitem__), held.tolist()) if h]
        return framed.frame({"rules": RULES, "lessons": len(self.digests), "words": vocabulary},
                            [b"".join(self.digests), counts[held].astype("<i4").tobytes(),
                             self._holders.astype("<i4").tobytes()])

    @classmethod
    def over(cls, lessons: list, index: "LessonWords | None" = None) -> "LessonWords":
        """`index` when it is the index of these lessons (the cycle's), else one built for them."""
        return index if index is not None and index.lessons == lessons else cls(lessons)

    def of(self, word: str):
        """The numbers of the lessons holding `word`, ascending, as a numpy array."""
        number = self.words.get(word)
        if number is None:
            return self._holders[:0]
        return self._holders[self._bounds[number]:self._bounds[number + 1]]


def _places(kept: bytes, now: bytes):
    """For each 16-byte digest of `now` (joined), its place among those of `kept` (joined), or -1:
    found by their first 8 bytes (both sides sorted by them, which makes the search a merge) and
    checked on all 16. Should two kept digests share their first 8 bytes, a digest may be taken as
    not kept (its lesson is read again), never as another."""
    import numpy as np

    held = np.frombuffer(kept, dtype=np.uint64).reshape(-1, 2)
    asked = np.frombuffer(now, dtype=np.uint64).reshape(-1, 2)
    if not len(held):
        return np.full(len(asked), -1, dtype=np.int64)
    key, wanted = held[:, 0].copy(), asked[:, 0].copy()
    order, asked_order = np.argsort(key), np.argsort(wanted)
    at = np.empty(len(asked), dtype=np.int64)
    at[asked_order] = order[np.minimum(np.searchsorted(key[order], wanted[asked_order]), len(order) - 1)]
    return np.where((held[at] == asked).all(axis=1), at, -1)


def _unpack(state: bytes | None):
    """(vocabulary, digests (joined), each word's count of lessons, their lesson numbers) of a kept
    state made by these rules, else None: also when it is damaged (`framed.unframe`), or its parts
    disagree with each other (a count that is not positive, a lesson number out of range, or a
    word's lessons not ascending)."""
    import numpy as np

    read = framed.unframe(state, 3)
    if read is None:
        return None
    header, (digests, counts, holders) = read
    try:
        if header.get("rules") != RULES:
            return None
        n, words = int(header["lessons"]), header["words"]
        if (not isinstance(words, list) or not all(isinstance(word, str) for word in words)
                or len(digests) != 16 * n or len(counts) != 4 * len(words) or len(holders) % 4):
            return None
        counts_ = np.frombuffer(counts, dtype="<i4").astype(np.int64)
        holders_ = np.frombuffer(holders, dtype="<i4")
        if len(counts_) and (counts_.min() <= 0 or counts_.sum() != len(holders_)):
            return None
        if not len(counts_) and len(holders_):
            return None
        if len(holders_):
            # a lesson number no higher than the one before it opens a word (counts are positive,
            # so no two words open at one place)
            falls = np.flatnonzero(holders_[1:] <= holders_[:-1]) + 1
            if (holders_.min() < 0 or holders_.max() >= n
                    or not np.all(np.isin(falls, np.cumsum(counts_)[:-1], assume_unique=True))):
                return None
        return words, digests, counts_, holders_
    except (ValueError, KeyError, TypeError):
        return None
