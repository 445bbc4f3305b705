"""Seed 003 heat-equation kernels: one step against the host, the tuned kernels and several steps per launch against single steps."""

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


def one_launch(launch, host: np.ndarray) -> np.ndarray:
    out = gpucourse.to_device(gpucourse.poisoned(host.shape, host.dtype))
    launch(gpucourse.to_device(host), out)
    return gpucourse.to_host(out)


def single_steps(host: np.ndarray, count: int) -> list[np.ndarray]:
    """The article's one-step kernel applied `count` times: every state, from the initial one."""
    states = [host]
    for _ in range(count):
        states.append(one_launch(lambda u, v: heat.heat_step_global_article(u, v, D, BLOCK), states[-1]))
    return states


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_step_matches_the_host(dtype):
    host = gpucourse.random_array(SHAPE, dtype, seed=8)
    expected = fd.heat_step_reference(host, D)
    for launch in (lambda u, v: heat.heat_step_global_article(u, v, D, BLOCK), lambda u, v: heat.heat_steps_shared(u, v, D, TILE, 1),
                   lambda u, v: heat.heat_step_global(u, v, D)):
        got = one_launch(launch, host)
        assert not np.isnan(got).any(), "points were never written"
        np.testing.assert_allclose(got, expected, rtol=0, atol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("options", [dict(), dict(block=(32, 2), rows=3), dict(block=(64, 1), rows=5),
                                     dict(block=(8, 3), rows=4, shuffles=False), dict(block=(32, 4), rows=1, shuffles=False)])
def test_tuned_step_gives_the_articles_bits(options):
    """A column of points per thread, x-neighbours by shuffles or by loads: the same update, the same bits, boundary copied."""
    shape = (SHAPE[0] + 1, SHAPE[1] + 3)
    host = gpucourse.random_array(shape, np.float32, seed=10, low=0.0, high=1.0)
    want = single_steps(host, 1)[1]
    assert np.array_equal(one_launch(lambda u, v: heat.heat_step_global(u, v, D, **options), host), want)


def test_temporal_blocking_equals_repeated_single_steps():
    # the mesh is not a multiple of the tile: last blocks are partial and the boundary runs through tiles
    shape = (SHAPE[0] + 1, SHAPE[1] + 3)
    host = gpucourse.random_array(shape, np.float32, seed=9, low=0.0, high=1.0)
    chosen = [s for s in STEPS if s in (1, 2, 3, 8)]
    states = single_steps(host, 2 * max(chosen))
    for steps in chosen:
        for method in ("shared", "blocked"):
            blocked = heat.heat_run(host, 2 * steps, D, method, TILE, steps)  # two launches of `steps` steps
            # the same device function in the same order: the same bits, boundary and interior
            assert np.array_equal(blocked, states[2 * steps]), f"{method}: {steps} steps per launch differ from single steps"
    reference = host
    for _ in range(2 * max(chosen)):
        reference = fd.heat_step_reference(reference, D)
    np.testing.assert_allclose(states[-1], reference, atol=1e-6)
    assert np.array_equal(states[-1][0], host[0]) and np.array_equal(states[-1][:, -1], host[:, -1])


@pytest.mark.parametrize("steps, columns, height, warps", [(1, 1, 3, 1), (2, 2, 5, 2), (3, 4, 4, 1), (5, 2, 2, 1)])
def test_register_tiles_of_every_shape_take_the_same_steps(steps, columns, height, warps):
    """Columns per lane, rows per warp and warps per block change who computes what, never the result."""
    shape = (SHAPE[0] + 2, SHAPE[1] + 1)
    host = gpucourse.random_array(shape, np.float32, seed=11, low=0.0, high=1.0)
    want = single_steps(host, steps)[steps]
    got = one_launch(lambda u, v: heat.heat_steps(u, v, D, steps, columns, height, warps), host)
    assert np.array_equal(got, want)


def test_blocked_tile_arithmetic():
    """Bytes a launch moves and updates per useful update, for the article's tile and the tuned one."""
    assert heat.blocked_redundancy(1, 1, 10) == pytest.approx(32 / 30 * 12 / 10)
    assert heat.blocked_redundancy(4, 2, 56) == pytest.approx(64 / 56 * 64 / 56)
    reads, writes = heat.blocked_traffic((1000, 1200), 4, 2, 56, 4)
    assert writes == 1000 * 1200 * 4 and reads == pytest.approx(writes * heat.blocked_redundancy(4, 2, 56))
    # as s grows, the accesses per useful update fall, then rise again when the halo eats the strip
    accesses = heat.blocked_accesses_per_point_step(np.arange(1, 16), 1, 56)
    assert accesses[0] > accesses[3] and accesses[-1] > accesses.min()


def test_a_run_is_timed_five_ways():
    """GPU time, and wall times on device data (graph, a call per launch) and from host data (graph, a call per launch)."""
    host = gpucourse.random_array((40, 40), np.float32, seed=2, low=0.0, high=1.0)
    run = heat.run_times(host, 2, 0.2, "global", 32, 1, repeat=1)
    walls = (run.device_wall_ms, run.device_plain_wall_ms, run.graph_wall_ms, run.plain_wall_ms)
    assert run.steps == 2 and run.gpu_ms > 0 and all(w is not None and w > 0 for w in walls)
    assert run.device_plain_ratio == pytest.approx(run.device_plain_wall_ms / run.gpu_ms)


def test_bad_arguments():
    u = gpucourse.to_device(np.zeros(SHAPE, np.float32))
    with pytest.raises(LaunchConfigError, match="at most"):
        heat.heat_steps_shared(u, u, D, tile=8, steps=4)
    with pytest.raises(LaunchConfigError, match="at least 1"):
        heat.heat_steps_shared(u, u, D, tile=8, steps=0)
    with pytest.raises(LaunchConfigError, match="limit"):
        heat.heat_steps_shared(u, u, D, tile=33, steps=1)
    with pytest.raises(LaunchConfigError, match="at most"):
        heat.heat_steps(u, u, D, steps=16, columns=1)
    with pytest.raises(LaunchConfigError, match="columns per lane"):
        heat.heat_steps(u, u, D, steps=2, columns=3)
    with pytest.raises(LaunchConfigError, match="multiple of 32"):
        heat.heat_step_global(u, u, D, (16, 4), 8, True)
    with pytest.raises(ValueError, match="stable"):
        heat.heat_step_global(u, u, 0.3)
    with pytest.raises(ArrayArgumentError, match="float64"):
        heat.heat_step_global(u, gpucourse.to_device(np.zeros(SHAPE, np.float64)), D)
    with pytest.raises(ValueError, match="multiple"):
        heat.heat_run(np.zeros(SHAPE, np.float32), 5, D, "shared", TILE, 2)
    with pytest.raises(ValueError, match="unknown method"):
        heat.stepper(u, u, D, "magic")
    assert heat.bytes_per_step((10, 20), 4) == 1600
