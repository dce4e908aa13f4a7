import pytest

from mgcp import text


def test_tokenize_lowercases_and_splits_punctuation():
    assert text.tokenize("Use WAL-mode, then re-try!") == ["use", "wal", "mode", "then", "re", "try"]


def test_words_of_every_script_are_read_and_a_slug_stays_ascii():
    """Cyrillic, Greek or Chinese text had no words at all: every such todo normalised to one
    empty text, and a lesson in it could never be found."""
    assert text.tokenize("Проверьте журналы, затем deploy!") == ["проверьте", "журналы", "затем", "deploy"]
    assert text.terms("Ελέγξτε τα αρχεία") == ["ελεγξτε", "τα", "αρχεια"]
    assert text.normalize("Исправить тест") != text.normalize("Обновить зависимости")
    assert text.slug("Déployer le café Проверьте") == "deployer-le-cafe" and text.slug("Проверьте") == "lesson"
    assert text.unspaced("部署服务") and not text.unspaced("журналы")
    assert text.tokenize("डेटाबेस माइग्रेशन चलाएँ") == ["डेटाबेस", "माइग्रेशन", "चलाएँ"]  # not split at vowel signs
    assert len(text.terms("ฐานข้อมูล")) == 1


def test_stem_joins_inflections():
    assert text.stem("pools") == text.stem("pooling") == text.stem("pooled") == "pool"


def test_stem_leaves_short_words():
    assert text.stem("was") == "was"


def test_keywords_drop_stop_and_coding_words():
    assert text.keywords("When you always use the connection pools") == ["connect", "pool"]


def test_content_tokens_keep_negations():
    assert "never" in text.content_tokens("never commit secrets")


def test_phrases_never_cross_stop_words():
    found = text.phrases("connection pooling for the webhook retries")
    assert ("connect", "pool") in found
    assert not any("webhook" in key and "pool" in key for key in found)


def test_phrases_keep_the_first_surface_form():
    assert text.phrases("Connection pooling")[("connect", "pool")] == "connection pooling"


def test_normalize_ignores_case_and_punctuation():
    assert text.normalize("  Fix the  Login bug! ") == text.normalize("fix the login bug")


def test_ngrams():
    assert text.ngrams(["a", "b", "c"], 2) == [("a", "b"), ("b", "c")]


def test_join_words():
    assert text.join_words(["a", "b", "c"]) == "a, b and c"


def test_terms_fold_unicode_and_split_identifiers():
    assert text.terms("Café ﬁle TailwindCSS useEffect snake_case kebab-case JSONParser") == [
        "cafe", "file", "tailwind", "css", "use", "effect", "snake", "case", "kebab", "case", "json", "parser"]


def test_terms_read_synonyms_and_negations_alike():
    assert text.terms("Utilize it") == text.terms("use it") == text.terms("leverage it")
    assert text.terms("Make sure it works") == text.terms("ensure it works")
    assert text.terms("Don't mock it") == text.terms("do not mock it") == text.terms("never mock it")
    assert text.terms("You can't") == text.terms("you cannot") == ["you", "can", "not"]
    assert text.terms("It won't, it doesn't") == ["it", "will", "not", "it", "does", "not"]


def test_compounds_meet_only_where_the_corpus_writes_both():
    assert text.join_compounds(["next", "js", "app"], {"nextjs"}) == ["nextjs", "app"]
    assert text.join_compounds(["next", "js", "app"], set()) == ["next", "js", "app"]


@pytest.mark.parametrize("raw", ["HTTPServer", "getHTTPResponse", "camelCase", "ABCd", "aB", "XMLHttpRequest",
                                 "iOS and U2F keys", "HTTP2Server", "Don't", "CANNOT wait", "won’t", "can't stop",
                                 "plain text only", "Use WAL mode", "naïve Café"])
def test_fold_is_the_two_substitutions_whatever_it_skips(raw):
    """fold skips a substitution only where it would change nothing."""
    import unicodedata

    plain = "".join(c for c in unicodedata.normalize("NFKD", raw) if not unicodedata.combining(c))
    expected = text._IDENTIFIER.sub(" ", text._NOT.sub(text._not, plain)).lower()
    assert text.fold(raw) == expected


@pytest.mark.parametrize("a, b, opposite", [
    ("Run the database migrations before restarting the app servers",
     "Restart the app servers before running the database migrations", True),
    ("Clear the cache, then rerun the failing test", "Rerun the failing test, then clear the cache", True),
    ("Prefer spaces over tabs for indentation", "Prefer tabs over spaces for indentation", True),
    ("Run the tests before committing", "Before committing, run the tests", False),  # the same order
    ("Run the tests before committing", "Run the tests prior to committing", False),  # another order word
    ("Use TypeScript. Prefer interfaces over types. Use maps instead.",
     "Prefer interfaces over types. Use TypeScript; use maps instead.", False),  # a word on both sides
    ("Pin dependencies with uv", "Use uv to pin dependencies", False),  # no order word
])
def test_swapped_finds_the_same_words_ordered_the_other_way_round(a, b, opposite):
    assert text.swapped(a, b) is opposite and text.swapped(b, a) is opposite
