"""Which lessons hold which stemmed word: the index knowledge extraction (is a theme or a decision
captured?) and pattern reinforcement (which lesson holds a decision or a note?) both ask.

A lesson's words are `text.content_tokens` of its trigger, action and tags joined by spaces. The
index is one sorted numpy array of (word, lesson) numbers, a word's lessons one slice of it, so
that a cycle reads each of 100k lessons once for both operations (the engine builds it once per
cycle over the active lessons it shares).
"""

from __future__ import annotations

from mgcp import text


class LessonWords:
    """`lessons`: the lessons indexed, in the order their numbers refer to."""

    def __init__(self, lessons: list):
        from array import array

        import numpy as np

        from mgcp.operations.sparse import distinct

        self.lessons = lessons
        self.words: dict[str, int] = {}

        def word_number(token: str) -> int:  # -1: no content word
            word = next(iter(text.content_tokens(token)), None)
            return -1 if word is None else self.words.setdefault(word, len(self.words))

        number = text.Memo(word_number).__getitem__  # each distinct token stemmed once
        numbers = array("q")  # each token's word number, a machine integer each, never a str per token
        lengths = array("q")
        for lesson in lessons:
            found = text.tokenize(" ".join([lesson.trigger, lesson.action, *lesson.tags]))
            numbers.extend(map(number, found))
            lengths.append(len(found))
        ids = np.asarray(numbers, dtype=np.int64)
        owners = np.repeat(np.arange(len(lessons), dtype=np.int64), np.asarray(lengths, dtype=np.int64))
        kept = ids >= 0
        size = max(len(lessons), 1)
        pairs = distinct(ids[kept] * size + owners[kept])
        word_of, self._holders = np.divmod(pairs, size)
        self._bounds = np.searchsorted(word_of, np.arange(len(self.words) + 1))

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
