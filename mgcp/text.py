"""Pure text helpers shared by the REM operations (and by persistence for query matching).

Everything here is deterministic and stdlib-only: a tokenizer (lowercase words), a light suffix
stemmer (so "pools", "pooling" and "pooled" meet), stop-word lists, trigger keywords, n-gram phrases
that never cross a stop word or punctuation, and a normalizer for comparing todo and decision texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9_]+")
_CLAUSE = re.compile(r"[.,;:!?()\[\]{}\"\n\r\t]+|\s[-–—]+\s")

# English function words. Negations ("not", "no", "never") are kept out on purpose: "Always do X"
# and "Never do X" must not look alike to duplicate detection.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each either else even ever every few
for from further had has have having he her here hers herself him himself his how i if in into is
it its itself just let me might more most much my myself neither nor of off on once one only or
other others our ours ourselves out over own per same shall she should so some such than that the
their theirs them themselves then there these they this those though through thus to too under
until up upon us very via was we were what whatever when whenever where whether which while who
whom whose why will with within without would yet you your yours yourself yourselves
also etc eg ie e g vs
""".split())

# Words every coding instruction uses; they carry no topic. Used for keywords and themes, not for
# duplicate similarity (where their low IDF already mutes them).
CODING_STOP_WORDS = frozenset("""
always use uses used using make makes making sure need needs needed want wants try trying tried
get gets getting got instead like thing things something anything everything way ways time times
first new old good bad better best right wrong able via well really actually just lot lots
""".split())

# Words too generic to be a "theme" of session notes.
GENERIC_WORDS = frozenset("""
work works worked working session sessions today yesterday tomorrow now later next last fix fixes
fixed fixing add adds added adding update updates updated updating change changes changed changing
done start started starting continue continued continuing finish finished finishing still again
look looked looking check checked checking note notes todo todos task tasks issue issues problem
problems stuff bit step steps part parts progress plan planned planning good nice great quick
minor small big some more less day days week weeks run ran running test tests tested testing
code file files function functions implement implemented implementing wip went go going see saw
seen said say found find finding found moved move rename renamed cleanup clean cleaned refactor
refactored remove removed removing write wrote written read reviewed review started begin began
""".split())

_ALL_STOP = STOP_WORDS | CODING_STOP_WORDS


def tokenize(text: str | None) -> list[str]:
    """Lowercase word tokens (letters, digits, underscore); punctuation and hyphens split words."""
    return _WORD.findall((text or "").lower())


@lru_cache(maxsize=1 << 16)  # a pure function; the cache only saves time on large corpora
def stem(word: str) -> str:
    """A light, deterministic suffix stripper: plurals, -ing, -ed, -ly. Not Porter; good enough to
    make inflections of one word meet."""
    w = word
    if len(w) <= 3 or w.isdigit():
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("sses", "ches", "shes", "xes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]  # running -> run, stopped -> stop
            elif w.endswith(("at", "iz", "bl")):
                w += "e"    # validating -> validate, optimized -> optimize
            break
    if w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    return w


def content_tokens(text: str | None, stop: frozenset[str] = STOP_WORDS) -> list[str]:
    """Stemmed tokens without stop words, pure numbers and one-letter tokens, in text order."""
    return [stem(t) for t in tokenize(text) if len(t) > 1 and t not in stop and not t.isdigit()]


def keywords(text: str | None) -> list[str]:
    """The distinct stemmed keywords of a trigger (or a query), in first-seen order."""
    seen: dict[str, None] = {}
    for t in content_tokens(text, _ALL_STOP):
        if len(t) > 2:
            seen.setdefault(t, None)
    return list(seen)


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


_PIECE = re.compile(r"(" + _CLAUSE.pattern + r")|([a-z0-9_]+)")  # a clause break, or a word


@lru_cache(maxsize=16)
def _run_stop(extra_stop: frozenset[str]) -> frozenset[str]:
    return _ALL_STOP | extra_stop


def runs(text: str | None, extra_stop: frozenset[str] = frozenset()) -> list[list[str]]:
    """Runs of consecutive topical words (surface forms): clauses split at punctuation, runs split
    at stop words, generic words (`extra_stop`), numbers and one-letter tokens."""
    stop = _run_stop(extra_stop)
    out: list[list[str]] = []
    current: list[str] = []
    # One scan: a clause break and a non-topical word both end the current run.
    for brk, t in _PIECE.findall((text or "").lower()):
        if brk or t in stop or len(t) < 3 or t[0].isdigit():
            if current:
                out.append(current)
                current = []
        else:
            current.append(t)
    if current:
        out.append(current)
    return out


def phrases(text: str | None, max_n: int = 3,
            extra_stop: frozenset[str] = GENERIC_WORDS) -> dict[tuple[str, ...], str]:
    """The text's phrases of 1..max_n topical words: stemmed key -> surface form (first seen)."""
    found: dict[tuple[str, ...], str] = {}
    for run in runs(text, extra_stop):
        stems = [stem(w) for w in run]
        size = len(run)
        for n in range(1, max_n + 1):
            for i in range(size - n + 1):
                key = tuple(stems[i:i + n])
                if key not in found:
                    found[key] = " ".join(run[i:i + n])
    return found


class Memo(dict):
    """A per-run cache of a pure one-argument text function: `memo[text]` computes once per distinct
    text. Operations make one per run (so nothing outlives the run), e.g. `norm = Memo(normalize)`;
    histories repeat the same todos, decisions and notes in snapshot after snapshot."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __missing__(self, key):
        value = self[key] = self.fn(key)
        return value


def normalize(text: str | None) -> str:
    """Lowercase, words only, single spaces: the identity of a todo or a decision."""
    return " ".join(tokenize(text))


def slug(text: str, max_words: int = 6) -> str:
    words = [w for w in tokenize(text) if w not in STOP_WORDS][:max_words]
    return "-".join(words) or "lesson"


def sentences(text: str | None) -> list[str]:
    """Sentences (or lines) of a free-text note, stripped, empty ones out."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", text or "")
    return [p.strip() for p in parts if p.strip()]


def shorten(text: str | None, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def join_words(words: Iterable[str]) -> str:
    """ "a", "a and b", "a, b and c" """
    items = list(words)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
