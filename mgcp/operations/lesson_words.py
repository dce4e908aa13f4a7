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
    """What a lesson's entries are kept under: its id, its creation time, its trigger, its action
    and its tags (each part's length first, so that no two lessons read alike)."""
    return lesson_digests([lesson])[0]


def lesson_digests(lessons: list) -> list[bytes]:
    """`lesson_digest` of each lesson, in one loop (100k lessons)."""
    blake2b, nul = hashlib.blake2b, chr(0)
    fields = attrgetter("id", "created_at", "trigger", "action", "tags")
    return [blake2b(f"{len(i)}:{len(c or '')}:{len(t)}:{len(a)}:{len(g)}:{i}{c or ''}{t}{a}{nul.join(g)}"
                    .encode("utf-8", "surrogatepass"), digest_size=16).digest()
            for i, c, t, a, g in map(fields, lessons)]


class LessonWords:
    """`lessons`: the lessons indexed, in the order their numbers refer to. `kept`: the `state` of
    an earlier index, whose entries of lessons unchanged since are taken as they are."""

    def __init__(self, lessons: list, kept: bytes | None = None, digests: list[bytes] | None = None):
        import numpy as np

        self.lessons = lessons
        self.digests = digests if digests is not None else lesson_digests(lessons)
        n = len(lessons)
        old = _unpack(kept)
        if old is None:
            self.words: dict[str, int] = {}
            word_of = holders = np.zeros(0, dtype=np.int64)
            fresh = range(n)
            self.gone = 0
        else:
            vocabulary, old_digests, word_of, holders = old
            self.words = {word: number for number, word in enumerate(vocabulary)}
            # each lesson's kept number, found among the kept digests sorted (16-byte strings: equal
            # as numpy compares them exactly when their bytes are)
            now = np.frombuffer(b"".join(self.digests), dtype="S16")
            order = np.argsort(old_digests, kind="stable")
            place = np.minimum(np.searchsorted(old_digests[order], now), max(len(old_digests) - 1, 0))
            found = old_digests[order][place] == now if len(old_digests) else np.zeros(n, dtype=bool)
            moved = np.full(len(old_digests) + 1, -1, dtype=np.int64)  # kept lesson number -> now
            moved[order[place[found]]] = np.flatnonzero(found)
            fresh = np.flatnonzero(~found).tolist()
            numbered = moved[:-1][moved[:-1] >= 0]
            if len(numbered) > 1 and not bool(np.all(numbered[1:] > numbered[:-1])):
                # the kept lessons come in another order: their words are read anew
                self.__init__(lessons, None, self.digests)
                return
            self.gone = len(old_digests) - len(numbered)
            # Lessons kept their order, so each word's lessons stay ascending.
            holders = moved[holders]
            kept_ = holders >= 0
            word_of, holders = word_of[kept_], holders[kept_]
        self.read = len(fresh)  # lessons whose words were read anew (`gone`: kept ones no longer here)
        add_words, add_holders = self._read([lessons[number] for number in fresh], np.asarray(fresh, dtype=np.int64))
        if len(add_words):  # each new pair where it sorts among the kept ones, by (word, lesson)
            size = max(n, 1)
            at = np.searchsorted(word_of * size + holders, add_words * size + add_holders)
            word_of, holders = np.insert(word_of, at, add_words), np.insert(holders, at, add_holders)
        self._holders = holders
        self._bounds = np.searchsorted(word_of, np.arange(len(self.words) + 1))

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


def _unpack(state: bytes | None):
    """(vocabulary, digests, word numbers, lesson numbers) of a kept state made by these rules, else
    None: also when it is damaged (`framed.unframe`), or its parts disagree with each other (a count
    that is not positive, a lesson number out of range, or a word's lessons not ascending)."""
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
        holders_ = np.frombuffer(holders, dtype="<i4").astype(np.int64)
        if len(counts_) and (counts_.min() <= 0 or counts_.sum() != len(holders_)):
            return None
        if not len(counts_) and len(holders_):
            return None
        word_of = np.repeat(np.arange(len(words), dtype=np.int64), counts_)
        if len(holders_):
            rising = np.diff(holders_) > 0
            if holders_.min() < 0 or holders_.max() >= n or not np.all(rising | (np.diff(word_of) > 0)):
                return None
        return words, np.frombuffer(digests, dtype="S16"), word_of, holders_
    except (ValueError, KeyError, TypeError):
        return None
