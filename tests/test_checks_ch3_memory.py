"""The chapter 3 memory checks: right answers pass, and each usual mistake fails with a message that names it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only
from numba import cuda, float32

import gpucourse
from gpucourse import mode
from gpucourse.checks import CheckFailed, ch3_memory
from gpucourse.checks.ch3_memory import Access
from gpucourse.kernels import transfers

# --- Exercise 3.1 ------------------------------------------------------------------------------


@cuda.jit
def scale_coalesced(out, a, factor):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[row, col] = a[row, col] * factor


@cuda.jit
def scale_strided(out, a, factor):
    row, col = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[row, col] = a[row, col] * factor


@cuda.jit
def scale_plus(out, a, factor):
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[row, col] = a[row, col] + factor


def coalesced(out, a, factor):
    rows, cols = a.shape
    scale_coalesced[((cols + 31) // 32, (rows + 7) // 8), (32, 8)](out, a, factor)


def strided(out, a, factor):
    rows, cols = a.shape
    scale_strided[((rows + 31) // 32, (cols + 7) // 8), (32, 8)](out, a, factor)


def rounded_down(out, a, factor):
    rows, cols = a.shape
    scale_coalesced[(cols // 32, rows // 8), (32, 8)](out, a, factor)


def plus(out, a, factor):
    rows, cols = a.shape
    scale_plus[((cols + 31) // 32, (rows + 7) // 8), (32, 8)](out, a, factor)


def test_scale_matrix_right_answer_passes(capsys):
    ch3_memory.check_scale_matrix(coalesced)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 3.1")


def test_scale_matrix_strided_answer_fails():
    with pytest.raises(CheckFailed, match="not coalesced.*elements apart"):
        ch3_memory.check_scale_matrix(strided)


def wide_blocks(out, a, factor):
    rows, cols = a.shape
    scale_coalesced[((cols + 7) // 8, (rows + 31) // 32), (8, 32)](out, a, factor)  # 8 x 32: a warp reads 4 rows of 8


def python_float_factor(out, a, factor):
    rows, cols = a.shape
    scale_coalesced[((cols + 31) // 32, (rows + 7) // 8), (32, 8)](out, a, float(factor))  # a Python float: float64 in the kernel


def test_scale_matrix_block_shape_and_float64_are_named():
    with pytest.raises(CheckFailed, match="blocks are 8 x 32.*Keep blocks of 32 x 8"):
        ch3_memory.check_scale_matrix(wide_blocks)
    with pytest.raises(CheckFailed, match="float64"):
        ch3_memory.check_scale_matrix(python_float_factor)


def test_scale_matrix_wrong_cover_and_values():
    with pytest.raises(CheckFailed, match="never written.*columns with x"):
        ch3_memory.check_scale_matrix(rounded_down)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_memory.check_scale_matrix(plus)


# --- Exercise 3.2 ------------------------------------------------------------------------------


def test_sectors_per_warp():
    ch3_memory.check_sectors_per_warp(lambda offset, stride, itemsize: len({((lane * stride + offset) * itemsize) // 32 for lane in range(32)}))
    with pytest.raises(CheckFailed, match="returned .*expected"):
        ch3_memory.check_sectors_per_warp(lambda offset, stride, itemsize: len({(lane * stride + offset) // 8 for lane in range(32)}))
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        ch3_memory.check_sectors_per_warp(lambda offset, stride, itemsize: 1 // 0)
    with pytest.raises(CheckFailed, match="count the distinct"):  # bytes spanned / 32, without the offset or the distinct sectors
        ch3_memory.check_sectors_per_warp(lambda offset, stride, itemsize: -(-32 * stride * itemsize // 32))


# --- Exercise 3.3 ------------------------------------------------------------------------------

WIDE = 64
PADDED = WIDE + 1


@cuda.jit
def wide_conflicted_kernel(out, x):
    tile = cuda.shared.array((32, WIDE), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE):
        total += tile[t, k]
    out[base + t] = total


@cuda.jit
def wide_padded_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE):
        total += tile[t, k]
    out[base + t] = total


@cuda.jit
def wide_half_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE // 2):  # forgets half the row
        total += tile[t, k]
    out[base + t] = total


PADDED_BY_TWO = WIDE + 2


@cuda.jit
def wide_padded_by_two_kernel(out, x):
    tile = cuda.shared.array((32, PADDED_BY_TWO), float32)  # 66 words a row: rows t and t + 16 share a bank
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE):
        total += tile[t, k]
    out[base + t] = total


@cuda.jit
def wide_no_barrier_kernel(out, x):
    tile = cuda.shared.array((32, PADDED), float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    total = tile[t, 0]  # no cuda.syncthreads(): row t was written by other threads
    for k in range(1, WIDE):
        total += tile[t, k]
    out[base + t] = total


def wide_computed_shape_kernel(out, x):
    tile = cuda.shared.array((32, WIDE + 1), float32)  # an expression: compiles in the simulator, not on a GPU
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 32
    for r in range(32):
        for c in range(t, WIDE, 32):
            tile[r, c] = x[base + r, c]
    cuda.syncthreads()
    total = tile[t, 0]
    for k in range(1, WIDE):
        total += tile[t, k]
    out[base + t] = total


wide_computed_shape = cuda.jit(wide_computed_shape_kernel)


def wide_padded_by_two(out, x):
    wide_padded_by_two_kernel[x.shape[0] // 32, 32](out, x)


def wide_no_barrier(out, x):
    wide_no_barrier_kernel[x.shape[0] // 32, 32](out, x)


def wide_shape_expression(out, x):
    wide_computed_shape[x.shape[0] // 32, 32](out, x)


def test_wide_row_sums_races_padding_and_shapes_are_named():
    with pytest.raises(CheckFailed, match="2.0 passes.*64 \\+ 1"):
        ch3_memory.check_wide_row_sums(wide_padded_by_two)
    with pytest.raises(CheckFailed, match="race on shared memory.*writes shared element.*A barrier is missing after line"):
        ch3_memory.check_wide_row_sums(wide_no_barrier)
    with pytest.raises(CheckFailed, match="computed inside the kernel.*TILE_SHAPE"):
        ch3_memory.check_wide_row_sums(wide_shape_expression)


def wide_padded(out, x):
    wide_padded_kernel[x.shape[0] // 32, 32](out, x)


def wide_conflicted(out, x):
    wide_conflicted_kernel[x.shape[0] // 32, 32](out, x)


def wide_half(out, x):
    wide_half_kernel[x.shape[0] // 32, 32](out, x)


def test_wide_row_sums(capsys):
    ch3_memory.check_wide_row_sums(wide_padded)
    out = capsys.readouterr().out
    assert "takes one pass (no bank conflict)" in out and "pass(es)" not in out
    if mode.on_gpu():
        assert "compute-sanitizer's racecheck and synccheck found no hazard" in out
    with pytest.raises(CheckFailed, match="passes per request"):
        ch3_memory.check_wide_row_sums(wide_conflicted)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_memory.check_wide_row_sums(wide_half)


# --- Exercise 3.4 ------------------------------------------------------------------------------


def overlapped_right(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)
        device_part.copy_to_host(host_part, stream=stream)


def overlapped_waiting(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)
        device_part.copy_to_host(host_part, stream=stream)
        stream.synchronize()  # waits for each chunk: nothing overlaps
        cuda.synchronize()


def overlapped_no_copy_back(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, stream)


def overlapped_default_stream(p):
    for index, host_part, device_part in p.chunks:
        device_part.copy_to_device(host_part)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block)
        device_part.copy_to_host(host_part)


def overlapped_one_stream(p):
    for index, host_part, device_part in p.chunks:
        device_part.copy_to_device(host_part, stream=p.streams[0])
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, p.streams[0])
        device_part.copy_to_host(host_part, stream=p.streams[0])


def overlapped_mixed_streams(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index * len(host_part), p.repeats, p.threads_per_block, p.streams[0])
        device_part.copy_to_host(host_part, stream=stream)


def overlapped_first_chunk_only(p):
    index, host_part, device_part = p.chunks[0]
    device_part.copy_to_device(host_part, stream=p.streams[0])
    transfers.unit_kernel_launch(device_part, 0, p.repeats, p.threads_per_block, p.streams[0])
    device_part.copy_to_host(host_part, stream=p.streams[0])


def overlapped_wrong_offset(p):
    for (index, host_part, device_part), stream in zip(p.chunks, p.streams):
        device_part.copy_to_device(host_part, stream=stream)
        transfers.unit_kernel_launch(device_part, index, p.repeats, p.threads_per_block, stream)  # the chunk's number, not its start
        device_part.copy_to_host(host_part, stream=stream)


def test_overlapped_wrong_offset_is_named():
    with pytest.raises(CheckFailed, match="chunk 1's kernel got offset 1"):
        ch3_memory.check_overlapped(overlapped_wrong_offset)


def test_overlapped(capsys):
    ch3_memory.check_overlapped(overlapped_right)
    out = capsys.readouterr().out
    assert "Exercise 3.4" in out and "its own stream" in out
    if mode.is_simulator():
        assert "\u23f1 Exercise 3.4" in out  # whether copies and kernels overlap is judged on a GPU only, and it says so
    with pytest.raises(CheckFailed, match="still all zeros"):
        ch3_memory.check_overlapped(overlapped_no_copy_back)
    with pytest.raises(CheckFailed, match="wrong values"):
        ch3_memory.check_overlapped(overlapped_first_chunk_only)


@pytest.mark.parametrize(("overlapped", "cause"), [
    (overlapped_waiting, r"waits for the GPU \(stream.synchronize\(\)\) after queueing 1 chunk"),
    (overlapped_default_stream, "runs on the default stream"),
    (overlapped_one_stream, "is on one stream"),
    (overlapped_mixed_streams, "on different streams, so nothing orders them"),
])
def test_overlapped_stream_mistakes_are_named_in_both_modes(overlapped, cause):
    with pytest.raises(CheckFailed, match=cause):
        ch3_memory.check_overlapped(overlapped)


# --- The access model the checks use ------------------------------------------------------------


def access(element: int, lane: int, array: str = "a", sequence: int = 0) -> Access:
    return Access(array, (0, 0, 0), (lane, 0, 0), (32, 1, 1), element, False, sequence)


def test_sector_and_bank_counts_by_hand():
    contiguous = [access(lane, lane) for lane in range(32)]
    assert ch3_memory.sectors_per_request(contiguous, "a", 4) == 4.0
    strided_accesses = [access(33 * lane, lane) for lane in range(32)]
    assert ch3_memory.sectors_per_request(strided_accesses, "a", 4) == 32.0
    column = [access(32 * lane, lane, "shared") for lane in range(32)]
    assert ch3_memory.shared_passes_per_request(column) == 32.0
    padded = [access(33 * lane, lane, "shared") for lane in range(32)]
    assert ch3_memory.shared_passes_per_request(padded) == 1.0
    broadcast = [access(5, lane, "shared") for lane in range(32)]
    assert ch3_memory.shared_passes_per_request(broadcast) == 1.0  # one word for every lane: no conflict
    assert ch3_memory.sectors_per_request([], "a", 4) == 0.0


def test_tracing_is_simulator_only():
    if mode.on_gpu():
        with pytest.raises(RuntimeError, match="simulator"):
            with ch3_memory.trace_accesses():
                pass
        return
    host = gpucourse.random_array((8, 40), np.float32, seed=1)
    out = ch3_memory.traced_device_array(np.zeros((8, 40), np.float32), "out")
    with ch3_memory.trace_accesses(shared=False) as log:
        coalesced(out, ch3_memory.traced_device_array(host, "a"), np.float32(2))
    accesses = log.accesses()
    reads = [a for a in accesses if a.array == "a" and not a.write]
    writes = [a for a in accesses if a.array == "out" and a.write]
    assert len(reads) == len(writes) == host.size  # every element read once and written once
    np.testing.assert_array_equal(out.copy_to_host(), host * np.float32(2))


def strided_and_racing(out, a, factor, sums, x):
    strided(out, a, factor)
    wide_no_barrier(sums, x)


def test_replay_in_a_simulator_process():
    """What the GPU checks rely on: the student's code, sent to a simulator process, traced there (one process for both)."""
    host = gpucourse.random_array((40, 40), np.float32, seed=2)
    arguments = [("traced", "out", np.zeros((40, 40), np.float32)), ("traced", "a", host), ("value", "factor", np.float32(2)),
                 ("traced", "sums", np.zeros(32, np.float32)), ("traced", "x", np.ones((32, WIDE), np.float32))]
    trace = ch3_memory.replayed_trace(strided_and_racing, arguments, shared=True)
    assert len(trace.of("a")) == host.size
    assert ch3_memory.sectors_per_request(trace.accesses, "a", 4) >= 16
    assert [launch.threads for launch in trace.launches] == [(32, 8, 1), (32, 1, 1)]
    race = ch3_memory.race_problem(trace)
    assert race is not None and "tile[r, c] = x[base + r, c]" in race and "total = tile[t, 0]" in race  # both lines, by their text


def test_what_cannot_travel_is_named():
    import threading

    lock = threading.Lock()

    def uses_a_lock(out, a, factor):  # a closure over a lock: a lock cannot be pickled
        with lock:
            coalesced(out, a, factor)

    with pytest.raises(ch3_memory.ReplayError, match="lock"):
        ch3_memory.replayed_trace(uses_a_lock, [("traced", "out", np.zeros((8, 8), np.float32))], shared=False)


# --- Exercise 3.7.1 ----------------------------------------------------------------------------


def rel_diff(x, y):
    return abs(x - y) / (abs(x) + abs(y) + float32(1))


def rel_diff_literal_one(x, y):
    return abs(x - y) / (abs(x) + abs(y) + 1)  # 1 is an int64 literal: float32 + int64 is float64 in a kernel


def rel_diff_no_one(x, y):
    return abs(x - y) / (abs(x) + abs(y))


def rel_diff_signed(x, y):
    return (x - y) / (abs(x) + abs(y) + float32(1))


def make_ufunc(element=rel_diff, signature="float32(float32, float32)", target="cuda"):
    def make():
        from numba import vectorize

        return vectorize([signature], target=target)(element)

    return make


def make_elementwise(output="float32 d", one="1.0f"):
    def make():
        cupy = gpucourse.require_cupy("cupy.ElementwiseKernel")
        return cupy.ElementwiseKernel("float32 x, float32 y", output, f"d = fabsf(x - y) / (fabsf(x) + fabsf(y) + {one})",
                                      "rel_diff_test")

    return make


def make_reduction(reduce="max(a, b)", output="float32 m"):
    def make():
        cupy = gpucourse.require_cupy("cupy.ReductionKernel")
        return cupy.ReductionKernel("float32 d", output, "d", reduce, "m = a", "0", "largest_test")

    return make


def test_ufunc_kernels(capsys):
    ch3_memory.check_ufunc_kernels(rel_diff, make_ufunc(), make_elementwise(), make_reduction())
    out = capsys.readouterr().out
    assert "\u2705 Exercise 3.7.1" in out
    if mode.is_simulator():  # what the simulator cannot run, it says in one line
        assert "\u23f1 Exercise 3.7.1" in out and "ReductionKernel" in out
    else:
        assert "of the measured device-to-device copy" in out


@pytest.mark.parametrize(("element", "cause"), [
    (rel_diff_literal_one, r"computes in float64 at line \d+ \(`return abs\(x - y\) / \(abs\(x\) \+ abs\(y\) \+ 1\)"),
    (rel_diff_no_one, r"the \+ 1 in the denominator is missing"),
    (rel_diff_signed, r"the numerator is \|x - y\|"),
])
def test_ufunc_element_mistakes_are_named(element, cause):
    with pytest.raises(CheckFailed, match=cause):
        ch3_memory.check_ufunc_kernels(element, make_ufunc(element), make_elementwise(), make_reduction())


def test_ufunc_stubs_are_not_passed_over():
    def stub():
        raise NotImplementedError("write it")

    with pytest.raises(CheckFailed, match="NotImplementedError.*write it"):
        ch3_memory.check_ufunc_kernels(rel_diff, make_ufunc(), stub, make_reduction())


@pytest.mark.parametrize(("makers", "cause"), [
    ((make_ufunc(signature="float64(float64, float64)"), make_elementwise(), make_reduction()), r"signature is float64\(float64"),
    ((make_ufunc(), make_elementwise(output="float64 d"), make_reduction()), r"ElementwiseKernel declares out_params \"float64 d\""),
    ((make_ufunc(), make_elementwise(one="1.0"), make_reduction()), r"holds the literal 1\.0, a double.*1\.0f"),
    ((make_ufunc(), make_elementwise(), make_reduction(output="float64 m")), r"ReductionKernel declares out_params \"float64 m\""),
])
def test_ufunc_kernel_float64_declarations_are_named_in_both_modes(makers, cause):
    """What the answer declares (a ufunc's signature, a CuPy kernel's types and C code) is read in both modes, before anything runs."""
    with pytest.raises(CheckFailed, match=cause):
        ch3_memory.check_ufunc_kernels(rel_diff, *makers)


@pytest.mark.parametrize(("makers", "cause"), [
    ((make_ufunc(target="cpu"), make_elementwise(), make_reduction()), "(ran on the CPU|raised)"),
    ((make_ufunc(), make_elementwise(), make_reduction(reduce="a + b")), "reduce with max"),
])
def test_ufunc_kernel_mistakes_are_named_on_a_gpu(makers, cause, capsys):
    """On a GPU each ufunc-style kernel is run and judged; in the simulator they cannot run, and the check says so instead of passing them."""
    if mode.is_simulator():
        ch3_memory.check_ufunc_kernels(rel_diff, *makers)
        assert "judged only on a GPU" in capsys.readouterr().out
        gpu_only("the ufunc-style kernels run and are judged only there (the simulator's note was checked)")
    with pytest.raises(CheckFailed, match=cause):
        ch3_memory.check_ufunc_kernels(rel_diff, *makers)


def test_racecheck_names_a_missing_barrier_on_a_gpu():
    """compute-sanitizer's racecheck through gpucourse: the helper every shared-memory check uses on a GPU."""
    from gpucourse.checks import sanitizer

    arguments = [("traced", "out", np.zeros(64, np.float32)), ("traced", "x", np.ones((64, WIDE), np.float32))]
    if mode.is_simulator():
        with pytest.raises(RuntimeError, match="needs a GPU"):
            sanitizer.racecheck(wide_no_barrier, arguments)
        assert not sanitizer.racecheck_available()
        gpu_only("compute-sanitizer's racecheck (refused in the simulator, checked)")
    assert sanitizer.racecheck_available(), "put the CUDA toolkit's bin folder (compute-sanitizer) on the PATH"
    report = sanitizer.racecheck(wide_no_barrier, arguments)
    assert report.errors > 0, report.output[-2000:]
    assert "syncthreads" in report.describe()
    assert sanitizer.racecheck(wide_padded, arguments).errors == 0
