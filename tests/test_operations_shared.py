from mgcp.operations.shared import cycle_cache, shared


def test_a_cycle_computes_each_key_once_and_keeps_nothing_afterwards():
    calls = []

    def compute():
        calls.append(1)
        return object()

    assert shared("k", compute) is not shared("k", compute)  # outside a cycle: always afresh
    with cycle_cache():
        first = shared("k", compute)
        assert shared("k", compute) is first
        assert shared("other", compute) is not first
    assert shared("k", compute) is not first
    assert len(calls) == 5
