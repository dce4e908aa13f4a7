from mgcp.operations.shared import CycleCache, shared


def test_a_cache_computes_each_key_once_and_no_cache_computes_afresh():
    calls = []

    def compute():
        calls.append(1)
        return object()

    assert shared(None, "k", compute) is not shared(None, "k", compute)
    cache = CycleCache()
    first = shared(cache, "k", compute)
    assert shared(cache, "k", compute) is first
    assert shared(cache, "other", compute) is not first
    assert shared(CycleCache(), "k", compute) is not first
    assert len(calls) == 5


def test_joined_terms_read_like_the_joined_text():
    import random

    from mgcp import text
    from mgcp.operations.shared import CycleCache, joined_terms

    # set phrases split over two parts ("make | sure", "as well | as", "in | order"), negations,
    # identifiers and synonyms at the edges of the parts
    words = ("make sure be do not refrain from stay away in order as well set up utilize "
             "don't can't useEffect snake_case TailwindCSS cache the retry webhooks").split()
    rng = random.Random(11)
    cache = CycleCache()
    for _ in range(3000):
        parts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 4))) for _ in range(3)]
        assert list(joined_terms(cache, parts)) == text.terms(" ".join(parts)), parts


def test_joined_terms_keep_only_the_parts_words():
    from mgcp import text
    from mgcp.operations.shared import CycleCache, joined_terms, terms

    parts = ["When the webhook fails", "Retry it later", "webhooks"]
    cache = CycleCache()
    assert list(joined_terms(cache, parts)) == text.terms(" ".join(parts))
    assert ("terms", " ".join(parts)) not in cache._values
    assert all(("terms", part) in cache._values for part in parts)
    assert terms(cache, parts[0]) == terms(CycleCache(), parts[0])


def test_progress_never_goes_back_and_each_stage_covers_its_share():
    from mgcp.operations.shared import stage

    heard = []
    cache = CycleCache(progress=heard.append)
    with stage(cache, 0.0, 0.5):
        for i in range(1000):
            cache.tick(i, 1000)
    with stage(cache, 0.5, 1.0):
        for done in (0, 300, 300, 999, 1000):  # a loop of blocks jumps
            cache.tick(done, 1000)
        cache.tick(5, 1000)  # a stage run again from its start is not heard going back
    assert heard == [p / 100 for p in range(100)]  # each percent once, the jumps filled in
    cache.progress = heard.append  # the next operation starts from 0 again
    cache.tick(0, 10)
    assert heard[-1] == 0.0
