"""Seed 003 heat-equation kernels: one step against the host, and several steps per launch against repeated single steps."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import finite_difference as fd
from gpucourse.errors import ArrayArgumentError, LaunchConfigError
from gpucourse.kernels import heat

SHAPE = gpucourse.problem_size("ch6_heat_test")
TILE = gpucourse.problem_size("ch6_heat_tile")
STEPS = gpucourse.problem_size("ch6_heat_steps")
BLOCK = gpucourse.problem_size("ch6_heat_block")
D = 0.2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_step_matches_the_host(dtype):
    host = gpucourse.random_array(SHAPE, dtype, seed=8)
    expected = fd.heat_step_reference(host, D)
    for launch in (lambda u, v: heat.heat_step_global(u, v, D, BLOCK), lambda u, v: heat.heat_steps_shared(u, v, D, TILE, 1)):
        out = gpucourse.to_device(gpucourse.poisoned(SHAPE, dtype))
        launch(gpucourse.to_device(host), out)
        got = gpucourse.to_host(out)
        assert not np.isnan(got).any(), "points were never written"
        np.testing.assert_allclose(got, expected, rtol=0, atol=4 * np.finfo(dtype).eps)


def test_temporal_blocking_equals_repeated_single_steps():
    # the mesh is not a multiple of the tile: last blocks are partial and the boundary runs through tiles
    shape = (SHAPE[0] + 1, SHAPE[1] + 3)
    host = gpucourse.random_array(shape, np.float32, seed=9, low=0.0, high=1.0)
    chosen = [s for s in STEPS if s in (1, 2, 3, 8)]
    # repeated single steps, every state kept: the answer after 2, 4, ... steps
    states, u, v = [host], gpucourse.to_device(host), gpucourse.to_device(host)
    for _ in range(2 * max(chosen)):
        heat.heat_step_global(u, v, D, BLOCK)
        u, v = v, u
        states.append(gpucourse.to_host(u))
    for steps in chosen:
        blocked = heat.heat_run(host, 2 * steps, D, "shared", TILE, steps)  # two launches of `steps` steps
        # the same device function in the same order: the same bits, boundary and interior
        assert np.array_equal(blocked, states[2 * steps]), f"{steps} steps per launch differ from single steps"
    reference = host
    for _ in range(2 * max(chosen)):
        reference = fd.heat_step_reference(reference, D)
    np.testing.assert_allclose(states[-1], reference, atol=1e-6)
    assert np.array_equal(states[-1][0], host[0]) and np.array_equal(states[-1][:, -1], host[:, -1])


def test_bad_arguments():
    u = gpucourse.to_device(np.zeros(SHAPE, np.float32))
    with pytest.raises(LaunchConfigError, match="at most"):
        heat.heat_steps_shared(u, u, D, tile=8, steps=4)
    with pytest.raises(LaunchConfigError, match="at least 1"):
        heat.heat_steps_shared(u, u, D, tile=8, steps=0)
    with pytest.raises(LaunchConfigError, match="limit"):
        heat.heat_steps_shared(u, u, D, tile=33, steps=1)
    with pytest.raises(ValueError, match="stable"):
        heat.heat_step_global(u, u, 0.3)
    with pytest.raises(ArrayArgumentError, match="float64"):
        heat.heat_step_global(u, gpucourse.to_device(np.zeros(SHAPE, np.float64)), D)
    with pytest.raises(ValueError, match="multiple"):
        heat.heat_run(np.zeros(SHAPE, np.float32), 5, D, "shared", TILE, 2)
    with pytest.raises(ValueError, match="unknown method"):
        heat.stepper(u, u, D, "magic")
    assert heat.bytes_per_step((10, 20), 4) == 1600
