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
