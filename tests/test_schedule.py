import math

from hypothesis import given, strategies as st

from mgcp.schedule import next_due, plan, runs_owed

LINEAR = ("linear", {"interval": 5})
FIB = ("fibonacci", {"intervals": [5, 8, 13, 21, 34]})
LOG = ("logarithmic", {"base_interval": 10, "scale": 2.0})


def sequence(strategy, params, n):
    out, last = [], 0
    for _ in range(n):
        last = next_due(strategy, params, last)
        out.append(last)
    return out


def test_linear_sequence():
    assert sequence(*LINEAR, 3) == [5, 10, 15]


def test_fibonacci_sequence_extends_itself():
    assert sequence(*FIB, 13) == [5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597]


def test_logarithmic_sequence():
    assert sequence(*LOG, 8) == [10, 17, 28, 45, 74, 122, 201, 332]


def test_missed_runs_do_not_pile_up():
    # Never ran; at session 13 linear-5 is due once; after running, next due is 18.
    assert 13 >= next_due(*LINEAR, 0)
    assert next_due(*LINEAR, 13) == 18


@given(st.sampled_from([LINEAR, FIB, LOG]), st.integers(min_value=0, max_value=100_000))
def test_next_due_is_strictly_after_last(schedule, last):
    assert next_due(*schedule, last) > last


@given(st.integers(min_value=1, max_value=50), st.floats(min_value=0.2, max_value=5),
       st.integers(min_value=0, max_value=5_000))
def test_logarithmic_next_due_is_the_first_session_owing_another_run(base, scale, last):
    params = {"base_interval": base, "scale": scale}
    due = next_due("logarithmic", params, last)
    assert runs_owed(due, base, scale) > runs_owed(last, base, scale)
    assert all(runs_owed(s, base, scale) == runs_owed(last, base, scale) for s in range(last, due))


@given(st.integers(min_value=1, max_value=100), st.floats(min_value=0.5, max_value=4))
def test_logarithmic_run_points_match_closed_form(base, scale):
    points = sequence("logarithmic", {"base_interval": base, "scale": scale}, 6)
    for k, point in enumerate(points):
        assert point >= base * math.exp(k / scale) - 1e-9


def test_plan_reports_due_operations():
    settings = {"a": {"strategy": "linear", "interval": 5}, "b": {"strategy": "fibonacci", "intervals": [5, 8]}}
    rows = plan(settings, {"a": 5}, 8)
    assert [(r[0], r[4], r[5]) for r in rows] == [("a", 10, False), ("b", 5, True)]
