"""Pure text helpers shared by the REM operations (and by persistence for query matching).

Everything here is deterministic: a tokenizer (lowercase words), the Snowball English stemmer (so
"pools", "pooling" and "pooled" meet), stop-word lists, trigger keywords, n-gram phrases that never
cross a stop word or punctuation, and a normalizer for comparing todo and decision texts.

What lesson similarity compares (`terms`, `join_compounds`, then `stems`) is read the way a
reviewer reads a rule, so that wording variants meet:

- Unicode compatibility forms and accents folded ("ﬁle" and "file", "café" and "cafe");
- code identifiers split into words: camelCase, PascalCase, snake_case, kebab-case, dotted names
  ("TailwindCSS" and "Tailwind CSS", "useEffect" and "use effect");
- "n't" read as "not" ("don't" and "do not");
- a small table of the verbs and phrases guidance uses most for one thing (SYNONYMS: "utilize",
  "employ" and "leverage" are "use"; "make sure" is "ensure");
- compounds written as one word or two meet when the corpus has both spellings (`join_compounds`:
  "next js" becomes "nextjs" where "nextjs" occurs).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"[a-z0-9_]+")
# The blocks of scripts that write vowels with marks inside a word (Indic scripts, Thai, Lao,
# Tibetan, Myanmar, Khmer; combining accents): `\w` alone splits "डेटाबेस" at its vowel signs.
# The Devanagari dandas (U+0964-0965) end sentences, not words.
_MARKED = "\u0300-\u036f\u0900-\u0963\u0966-\u0dff\u0e00-\u0eff\u0f00-\u109f\u1780-\u17ff"
_ANY_WORD = re.compile(rf"[\w{_MARKED}]+")  # _WORD in every script: for text that is not ASCII
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
also etc eg ie e g vs must
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
    """Lowercase word tokens (letters and digits of any script, underscore); punctuation and hyphens
    split words."""
    lower = (text or "").lower()
    return (_WORD if lower.isascii() else _ANY_WORD).findall(lower)


_STEMMER = Stemmer.Stemmer("english")
# Beside this module and the Unicode tables, what a text's stems depend on: kept readings of stems
# are kept under a digest of all three, so that another stemmer finds none of them.
STEMMER = f"snowball english, PyStemmer {Stemmer.version()}"


@lru_cache(maxsize=1 << 18)  # a pure function; the cache only saves time on large corpora
def stem(word: str) -> str:
    """The Snowball (Porter 2) English stem: "pooling", "pools" and "pooled" are "pool"."""
    return _STEMMER.stemWord(word)


# Words and phrases guidance uses for one thing, and the word they are compared as. Kept small and
# literal: each entry is a variant seen in real rule files, never a loose association.
SYNONYMS = {
    "utilize": "use", "utilise": "use", "utilizing": "use", "utilising": "use", "employ": "use",
    "leverage": "use", "leveraging": "use", "favor": "prefer", "favour": "prefer", "favoring": "prefer",
    "favouring": "prefer", "never": "not", "dont": "not", "eschew": "avoid", "guarantee": "ensure",
    "verify": "check", "validate": "check",
    "whenever": "when", "utilization": "use", "usage": "use",
}
PHRASES = {  # (first word, second word[, third]) -> the word they are compared as
    ("make", "sure"): "ensure", ("be", "sure"): "ensure", ("do", "not"): "not", ("refrain", "from"): "avoid",
    ("stay", "away"): "avoid", ("in", "order"): "", ("as", "well", "as"): "and", ("set", "up"): "setup",
}
_PHRASE_FIRST = {key[0] for key in PHRASES}
_VARIANTS: dict[str, tuple[str, ...]] = {}  # a word -> every single word the table reads as it
for _word, _same in SYNONYMS.items():
    _VARIANTS[_same] = (*_VARIANTS.get(_same, (_same,)), _word)
_IDENTIFIER = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_IDENTIFIER_SPLIT = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]")  # where _IDENTIFIER splits
_NOT = re.compile(r"\b(?:(can)['’]t|(wo)n['’]t|(cannot))\b|(?<=\w)n['’]t\b", re.IGNORECASE)
_FOLDED_WORD = re.compile(r"[a-z0-9]+")
ANY_FOLDED_WORD = re.compile(rf"(?:[^\W_]|[{_MARKED}])+")  # _FOLDED_WORD in every script


def fold(text: str | None) -> str:
    """Text as similarity reads it: compatibility forms and accents folded, identifiers split into
    words, "n't" as " not", lowercase (see the module docstring)."""
    text = text or ""
    text = _unaccented(text)
    # Each substitution runs only where it can change something (most text has neither): every
    # negation _NOT reads holds an apostrophe or "cannot"; an identifier splits only before a
    # capital that is not the text's first character, and _IDENTIFIER_SPLIT finds where _IDENTIFIER
    # would split faster than the split itself scans.
    lower = text.lower()
    if "'" in text or "’" in text or "nnot" in lower:
        text = _NOT.sub(_not, text)
        lower = text.lower()
    if text[1:] != lower[1:] and _IDENTIFIER_SPLIT.search(text):
        lower = _IDENTIFIER.sub(" ", text).lower()
    return lower


def _unaccented(text: str) -> str:
    """Compatibility forms and accents folded ("ﬁ" -> "fi", "é" -> "e")."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _not(match: re.Match) -> str:
    """ "can't" and "cannot" -> "can not", "won't" -> "will not", "doesn't" -> "does not"."""
    if match.group(1) or match.group(3):
        return "can not"
    return "will not" if match.group(2) else " not"


def terms(text: str | None) -> list[str]:
    """The words of `text` as compared: folded, split at anything not a letter or digit (so
    snake_case and kebab-case split too), synonyms and set phrases replaced."""
    folded = fold(text)
    words = (_FOLDED_WORD if folded.isascii() else ANY_FOLDED_WORD).findall(folded)
    out: list[str] = []
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        if w in _PHRASE_FIRST:
            for size in (3, 2):
                key = tuple(words[i:i + size])
                if len(key) == size and key in PHRASES:
                    if PHRASES[key]:
                        out.append(PHRASES[key])
                    i += size
                    break
            else:
                out.append(SYNONYMS.get(w, w))
                i += 1
            continue
        out.append(SYNONYMS.get(w, w))
        i += 1
    return out


_UNSPACED = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")  # kana and CJK ideographs


def unspaced(word: str) -> bool:
    """Whether a word is of a script written without spaces between words (Chinese, Japanese)."""
    return bool(_UNSPACED.search(word))


def query_terms(query: str | None) -> list[str]:
    """What a lesson query searches for: its words as written and as folded (identifiers split),
    every word the synonym table treats as the same, and adjacent words joined (a compound written
    as two words meets one written as one). Stop words never search on their own."""
    plain = [w for w in tokenize(query) if w not in STOP_WORDS]
    folded = [w for w in terms(query) if w not in STOP_WORDS]
    joined = [a + b for a, b in zip(folded, folded[1:])]
    variants = [v for w in folded for v in _VARIANTS.get(w, ())]
    return list(dict.fromkeys(plain + folded + joined + variants))


def join_compounds(words: list[str], vocabulary: set[str] | frozenset[str]) -> list[str]:
    """Two adjacent words become one where the corpus also writes them as one ("type script" ->
    "typescript" when "typescript" is in `vocabulary`)."""
    out: list[str] = []
    i, n = 0, len(words)
    while i < n:
        if i + 1 < n and words[i] + words[i + 1] in vocabulary:
            out.append(words[i] + words[i + 1])
            i += 2
        else:
            out.append(words[i])
            i += 1
    return out


def stems(words: Iterable[str], stop: frozenset[str] = STOP_WORDS) -> list[str]:
    """Stemmed words without stop words, pure numbers and one-letter words, in order."""
    return [stem(t) for t in words if len(t) > 1 and t not in stop and not t.isdigit()]


def content_tokens(text: str | None, stop: frozenset[str] = STOP_WORDS) -> list[str]:
    """Stemmed tokens without stop words, pure numbers and one-letter tokens, in text order."""
    return stems(tokenize(text), stop)


def _keyed(text: str | None) -> Iterator[tuple[str, str]]:
    """(stem, word as written) of each of the text's keyword words, in order."""
    for word in tokenize(text):
        if len(word) > 1 and word not in _ALL_STOP and not word.isdigit():
            stemmed = stem(word)
            if len(stemmed) > 2:
                yield stemmed, word


def keywords(text: str | None) -> list[str]:
    """The distinct stemmed keywords of a trigger (or a query), in first-seen order."""
    return list(dict.fromkeys(stemmed for stemmed, _ in _keyed(text)))


def keyword_words(text: str | None) -> list[str]:
    """The words `keywords(text)` are the stems of, as written (lowercased): the first word of
    each keyword, in the same order. What a person reads as tags."""
    seen: dict[str, str] = {}
    for stemmed, word in _keyed(text):
        seen.setdefault(stemmed, word)
    return list(seen.values())


# Words that order what stands on their two sides: "A before B", "A, then B", "A over B".
ORDER_WORDS = frozenset({"before", "after", "then", "over", "than", "instead", "rather", "prior", "until"})


def swapped(a: str | None, b: str | None) -> bool:
    """Whether two texts put words on opposite sides of the same order word (ORDER_WORDS, the first
    each says, within its sentence; a word on both sides of it counts on neither): "Run the
    migrations before restarting the servers" / "Restart the servers before running the
    migrations", "Prefer tabs over spaces" / "Prefer spaces over tabs" are alike in words and
    opposite in meaning. "Before committing, run the tests" / "Run the tests before committing" are
    not: nothing stands before the first one's order word."""
    def sides(text: str | None):
        for sentence in sentences(text):
            words = tokenize(sentence)
            at = next((i for i, w in enumerate(words) if w in ORDER_WORDS), None)
            if at is not None:
                left, right = set(stems(words[:at])), set(stems(words[at + 1:]))
                return words[at], left - right, right - left
        return None

    first, second = sides(a), sides(b)
    if first is None or second is None or first[0] != second[0]:
        return False
    return bool(first[1] & second[2]) and bool(first[2] & second[1])


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


_PIECE = re.compile(r"(" + _CLAUSE.pattern + r")|([a-z0-9_]+)")  # a clause break, or a word
_ANY_PIECE = re.compile(r"(" + _CLAUSE.pattern + r")|(" + _ANY_WORD.pattern + ")")  # the same in every script


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
    lower = (text or "").lower()
    for brk, t in (_PIECE if lower.isascii() else _ANY_PIECE).findall(lower):
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
    """A lesson id made of the text's first words: ASCII (accents dropped, other scripts left out)."""
    words = [w for w in _WORD.findall(_unaccented(text).lower()) if w not in STOP_WORDS][:max_words]
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
