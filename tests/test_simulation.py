"""The simulator helpers change how fast the simulator runs, never what a kernel computes."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
from numba import cuda

import gpucourse
from gpucourse import mode
from gpucourse.simulation import SIMULATOR_SWITCH_INTERVAL, device_function, paced, serialize_shared_arrays


def triple(x):
    return 3 * x


fast_triple = device_function(triple)


@cuda.jit
def reverse_blocks(out, values):
    tile = cuda.shared.array(128, np.float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 128 + t
    tile[t] = values[i]
    cuda.syncthreads()
    out[i] = tile[127 - t]


@cuda.jit
def apply_triple(out, values):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = fast_triple(values[i])


def test_device_function_computes_the_same():
    values = gpucourse.random_array(100, np.float32, seed=1)
    out = gpucourse.to_device(gpucourse.poisoned(100, np.float32))
    apply_triple[2, 64](out, gpucourse.to_device(values))
    np.testing.assert_allclose(gpucourse.to_host(out), 3 * values, rtol=1e-7)
    assert (fast_triple is triple) == mode.is_simulator()


def test_paced_sets_and_restores_the_switch_interval():
    seen = []
    before = sys.getswitchinterval()
    wrapped = paced(lambda: seen.append(sys.getswitchinterval()) or "done")
    assert wrapped() == "done"
    assert abs(sys.getswitchinterval() - before) < 1e-9
    expected = min(before, SIMULATOR_SWITCH_INTERVAL) if mode.is_simulator() else before
    assert len(seen) == 1 and abs(seen[0] - expected) < 1e-9  # the interpreter rounds the interval to its clock


def test_threads_of_a_block_share_one_tile():
    """Every block reversed through its shared tile, many times: one wrong value means a thread had its own tile."""
    blocks = 4
    values = gpucourse.random_array(128 * blocks, np.float32, seed=2)
    want = values.reshape(blocks, 128)[:, ::-1].ravel()
    device_values = gpucourse.to_device(values)
    launch = paced(lambda out: reverse_blocks[blocks, 128](out, device_values))
    for _ in range(10):
        out = gpucourse.to_device(gpucourse.poisoned(128 * blocks, np.float32))
        launch(out)
        np.testing.assert_array_equal(gpucourse.to_host(out), want)


def test_first_allocation_of_a_shared_array_is_made_once(monkeypatch):
    """Threads that reach `cuda.shared.array` together get one array (the simulator's own code could give each its own)."""
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    serialize_shared_arrays()
    shared = FakeCUDAShared(0)
    start = threading.Barrier(16)
    got = []
    empty = np.empty

    def slow_empty(*args, **kwargs):  # widen the window between "no array yet" and "store it" that the race needs
        time.sleep(0.01)
        return empty(*args, **kwargs)

    def thread():
        start.wait()
        got.append(shared.array((8, 8), np.float32))

    monkeypatch.setattr(np, "empty", slow_empty)
    threads = [threading.Thread(target=thread) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.undo()
    assert len(got) == 16 and len({id(a) for a in got}) == 1, "threads of one block were given different shared arrays"
    other = shared.array((4,), np.int32)  # another line: another array
    assert other is not got[0] and other.shape == (4,) and other.dtype == np.int32


@cuda.jit
def add_block_sums(total, values, atomic):
    tile = cuda.shared.array(0, np.float32)  # dynamic: one buffer per block, also when blocks run at once
    t = cuda.threadIdx.x
    tile[t] = values[cuda.grid(1)]
    cuda.syncthreads()
    if t == 0:
        s = np.float32(0)
        for k in range(cuda.blockDim.x):
            s += tile[k]
        if atomic:
            cuda.atomic.add(total, 0, s)
        else:
            total[0] += s  # a race between blocks


def test_interleaved_blocks_run_a_grid_at_once():
    """Blocks that run at the same time keep their own shared memory, and a plain += into one total loses updates."""
    from gpucourse.simulation import interleaved_blocks

    blocks, threads = 12, 32
    values = gpucourse.to_device(np.ones(blocks * threads, np.float32))
    totals = {}
    for atomic in (True, False):
        got = []
        for _ in range(3):
            total = gpucourse.to_device(np.zeros(1, np.float32))
            with interleaved_blocks():
                add_block_sums[blocks, threads, 0, 4 * threads](total, values, atomic)
            got.append(float(gpucourse.to_host(total)[0]))
        totals[atomic] = got
    assert totals[True] == [blocks * threads] * 3, "an atomic total must be exact, whatever the order of the blocks"
    if mode.is_simulator():
        assert min(totals[False]) < blocks * threads, "blocks run at once: a plain += must lose some block's sum"
    with interleaved_blocks():  # a no-op on a GPU, and nothing is left patched in the simulator
        pass
    out = gpucourse.to_device(gpucourse.poisoned(128 * 4, np.float32))
    reverse_blocks[4, 128](out, gpucourse.to_device(np.arange(512, dtype=np.float32)))
    np.testing.assert_array_equal(gpucourse.to_host(out), np.arange(512, dtype=np.float32).reshape(4, 128)[:, ::-1].ravel())
