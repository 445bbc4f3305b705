"""gpucourse.checks.properties: edge sizes, and the smallest failing case found the same way on every run."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from gpucourse.checks.properties import changed_input_problems, edge_sizes, no_kernel_problem, shares_near, sizes_from, smallest_failure


def test_edge_sizes_hold_every_multiple_and_its_neighbours():
    sizes = edge_sizes((32, 96), 200)
    for multiple in (32, 64, 96, 128, 160, 192):
        assert {multiple - 1, multiple, multiple + 1} <= set(sizes)
    assert sizes == sorted(set(sizes)) and sizes[0] == 1 and max(sizes) <= 200
    assert edge_sizes((8,), 20, low=0)[0] == 0 and 7 in edge_sizes((8,), 20, extra=(7,))


def test_the_smallest_failing_case_is_reported_and_the_same_every_time():
    sizes = sizes_from(edge_sizes((32, 100), 600))
    found = smallest_failure(lambda n: f"n = {n} fails" if n >= 300 else None, sizes, max_examples=30)
    assert found == (300, "n = 300 fails")  # a failure that grows with n shrinks to its edge
    first = smallest_failure(lambda n: "a multiple of 32" if n % 32 == 0 else None, sizes, max_examples=30)
    assert first is not None and first[0] % 32 == 0
    assert smallest_failure(lambda n: "a multiple of 32" if n % 32 == 0 else None, sizes, max_examples=30) == first  # seeded


def test_explicit_examples_come_first_and_are_reported_as_they_are():
    assert smallest_failure(lambda n: "big" if n > 10 else None, sizes_from([1, 2, 3]), examples=(5, 700, 11)) == (700, "big")
    assert smallest_failure(lambda n: None, sizes_from([1, 2, 3]), examples=(5,)) is None


def test_shrinking_stops_after_its_budget():
    calls = []

    def problem(case):
        calls.append(case)
        return "fails" if case[0] > 0.6 else None

    found = smallest_failure(problem, st.tuples(shares_near(0.6), st.integers(0, 10**6)), max_examples=10, shrink_calls=5)
    assert found is not None and found[0][0] > 0.6
    assert len(set(map(repr, calls))) <= 10 + 5 + 1


def test_an_unfinished_answer_stops_the_search_with_its_hint():
    def stub(n):
        raise NotImplementedError("write it")

    with pytest.raises(NotImplementedError, match="write it"):
        smallest_failure(stub, sizes_from([1, 2, 3]))
    with pytest.raises(NotImplementedError, match="write it"):
        smallest_failure(stub, sizes_from([1, 2, 3]), examples=(4,))


def test_invariant_words():
    import numpy as np

    from gpucourse.arrays import to_device

    assert "no kernel was launched" in no_kernel_problem([], "f")
    before = np.arange(5, dtype=np.float32)
    changed = before.copy()
    changed[3] = -1
    problems = changed_input_problems({"x": (to_device(changed), before), "y": (to_device(before), before.copy())}, "f")
    assert len(problems) == 1 and "changed x in place at 1 of 5 element(s)" in problems[0]
