"""Exercise checks catch each usual mistake and say what it is; right answers pass."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only
from numba import cuda

import gpucourse
from gpucourse.checks import CheckFailed, array_problems, ch1, run_guarded
from gpucourse.device import DeviceInfo


@cuda.jit
def add_right(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def add_unguarded(out, x, y):
    i = cuda.grid(1)
    if i < x.size + 16:  # reads and writes past the end of the arrays
        out[i] = x[i % x.size] + y[i % x.size]


@cuda.jit
def add_wrong(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] - y[i]


#: Threads per block of the right answers: 256, as the exercise's reference (blocks of 64 threads that move one element
#: each run at about a third of the copy on an H200, and the check rightly calls that slow).
THREADS = 256


def launch(kernel, blocks=None):
    def run(out, x, y, threads_per_block=THREADS):
        n = out.shape[0]
        kernel[blocks or -(-n // threads_per_block), threads_per_block](out, x, y)

    return run


def test_right_answer_passes(capsys):
    ch1.check_add_arrays(launch(add_right))
    assert capsys.readouterr().out.startswith("\u2705 Exercise 1.1")


def test_too_few_blocks_is_named():
    with pytest.raises(CheckFailed, match="never written.*rounded up"):
        ch1.check_add_arrays(launch(add_right, blocks=1))


def test_missing_bounds_check_is_named():
    with pytest.raises(CheckFailed, match="outside"):
        ch1.check_add_arrays(launch(add_unguarded))


def test_wrong_values_are_named():
    with pytest.raises(CheckFailed, match="wrong values; at index 0 got"):
        ch1.check_add_arrays(launch(add_wrong))


def test_returning_nothing_and_wrong_dtype():
    expected = np.arange(4, dtype=np.float32)
    assert "is None" in array_problems(None, expected)[0]
    assert "should be an array" in array_problems(3, expected)[0]
    assert "shape" in array_problems(np.zeros(5, np.float32), expected)[0]
    assert any("dtype float64" in p for p in array_problems(expected.astype(np.float64), expected))
    assert array_problems(expected.copy(), expected) == []


def test_run_guarded_in_place():
    initial = np.arange(10, dtype=np.float32)
    got, problems = run_guarded(lambda out: None, (10,), np.float32, initial=initial, kernel_required=False)
    assert problems == [] and np.array_equal(got, initial)


@cuda.jit
def scale_rows_right(out, matrix, factors):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = matrix[row, col] * factors[row]


@cuda.jit
def scale_rows_swapped(out, matrix, factors):
    row, col = cuda.grid(2)  # x on rows, but the launch below covers x with the columns
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = matrix[row, col] * factors[row]


def launch_2d(kernel):
    def run(out, matrix, factors):
        rows, cols = out.shape
        kernel[(-(-cols // 16), -(-rows // 8)), (16, 8)](out, matrix, factors)

    return run


def test_scale_rows():
    ch1.check_scale_rows(launch_2d(scale_rows_right))
    with pytest.raises(CheckFailed, match="Exercise 1.2"):
        ch1.check_scale_rows(launch_2d(scale_rows_swapped))


@cuda.jit
def fill_stride(out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = 3 * i + 1


@cuda.jit
def fill_one_pass(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 3 * i + 1


def test_fill_grid_stride():
    ch1.check_fill_grid_stride(fill_stride)
    with pytest.raises(CheckFailed, match="cuda.gridsize"):
        ch1.check_fill_grid_stride(fill_one_pass)


def good_config(n: int, threads: int, device: DeviceInfo) -> tuple[int, int]:
    if not 0 < threads <= device.max_threads_per_block:
        raise ValueError(f"threads_per_block must be in 1..{device.max_threads_per_block}")
    return -(-n // threads), threads


def test_launch_config():
    ch1.check_launch_config(good_config)
    with pytest.raises(CheckFailed, match="round the blocks up"):
        ch1.check_launch_config(lambda n, t, d: (n // t, t) if 0 < t <= d.max_threads_per_block else good_config(n, t, d))
    with pytest.raises(CheckFailed, match="was accepted"):
        ch1.check_launch_config(lambda n, t, d: (-(-n // max(t, 1)), t))
    with pytest.raises(CheckFailed, match="raise ValueError instead"):
        ch1.check_launch_config(lambda n, t, d: good_config(n, t, d) if 0 < t <= d.max_threads_per_block else 1 / 0)


def test_check_sizes_come_from_the_table():
    assert gpucourse.problem_size("exercise_1d") % 64 != 0  # not a multiple of any block size


# --- What the values do not show: float64, coalescing, repeated work, speed ---------------------------


@cuda.jit
def add_float64(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        # a float64 literal: the product is computed in float64 and rounded back (to the same float32: the values stay right).
        # (A literal a float32 holds exactly, such as 2.0, the compiler may narrow back to float32: this one it cannot.)
        out[i] = (x[i] + y[i]) * 1.0000000001


@cuda.jit
def add_transposed_threads(out, x, y):
    i = cuda.threadIdx.x * cuda.gridDim.x + cuda.blockIdx.x  # neighbouring threads take elements gridDim.x apart
    if i < out.size:
        out[i] = x[i] + y[i]


def add_three_times(out, x, y, threads_per_block=THREADS):
    blocks = -(-out.shape[0] // threads_per_block)
    for _ in range(3):  # the right values, three times the work
        add_right[blocks, threads_per_block](out, x, y)


def test_add_arrays_float64_is_named():
    with pytest.raises(CheckFailed, match="float64.*float32"):
        ch1.check_add_arrays(launch(add_float64))


def test_add_arrays_uncoalesced_is_named():
    with pytest.raises(CheckFailed, match="reads of x are not coalesced.*cuda.grid"):
        ch1.check_add_arrays(launch(add_transposed_threads))


def test_add_arrays_extra_work_is_judged_by_its_speed(capsys):
    if gpucourse.is_simulator():  # a timing: the simulator says it judges it only on a GPU
        ch1.check_add_arrays(add_three_times)
        out = capsys.readouterr().out
        assert "\u2705 Exercise 1.1" in out and "\u23f1 Exercise 1.1: the speed of your add_arrays is judged only on a GPU" in out
        gpu_only("the speed verdict of an answer that adds three times (the simulator's note was checked)")
    with pytest.raises(CheckFailed, match=r"right but slow: \d+% of the reference's speed.*it reaches \d+% of the copy ceiling"):
        ch1.check_add_arrays(add_three_times)


def test_add_arrays_speed_is_reported_on_a_gpu(capsys):
    ch1.check_add_arrays(launch(add_right))
    out = capsys.readouterr().out
    if gpucourse.is_simulator():
        assert "judged only on a GPU" in out
        gpu_only("the bandwidth fractions of the success line (the simulator's note was checked)")
    fractions = [int(f) for f in __import__("re").findall(r"= (\d+)% of the measured device-to-device copy", out)]
    assert fractions and all(f <= 100 for f in fractions)


@cuda.jit
def scale_rows_x_on_rows(out, matrix, factors):
    row, col = cuda.grid(2)  # x walks the rows: a warp's reads are a whole row apart
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = matrix[row, col] * factors[row]


def scale_rows_uncoalesced(out, matrix, factors):
    rows, cols = out.shape
    scale_rows_x_on_rows[(-(-rows // 16), -(-cols // 8)), (16, 8)](out, matrix, factors)


@cuda.jit
def scale_rows_double(out, matrix, factors):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = (matrix[row, col] * factors[row]) * 1.0000000001  # float64 on the way, rounded back to the same float32


@cuda.jit
def scale_rows_unguarded(out, matrix, factors):
    col, row = cuda.grid(2)
    out[row, col] = matrix[row % matrix.shape[0], col % matrix.shape[1]] * factors[row % matrix.shape[0]]


def test_scale_rows_mistakes_are_named():
    with pytest.raises(CheckFailed, match="reads of matrix are not coalesced.*walk the columns"):
        ch1.check_scale_rows(scale_rows_uncoalesced)
    with pytest.raises(CheckFailed, match="float64"):
        ch1.check_scale_rows(launch_2d(scale_rows_double))
    with pytest.raises(CheckFailed, match="outside"):
        ch1.check_scale_rows(launch_2d(scale_rows_unguarded))


@cuda.jit
def fill_block_stride(out):
    for i in range(cuda.grid(1), out.size, cuda.blockDim.x):  # steps by one block: every element written gridDim.x times
        out[i] = 3 * i + 1


@cuda.jit
def fill_blocks_stride(out):
    for i in range(cuda.grid(1), out.size, cuda.gridDim.x):
        out[i] = 3 * i + 1


@cuda.jit
def fill_chunks(out):
    threads = cuda.gridsize(1)
    chunk = (out.size + threads - 1) // threads
    start = cuda.grid(1) * chunk  # each thread a contiguous chunk: a warp's writes are `chunk` elements apart
    for i in range(start, min(start + chunk, out.size)):
        out[i] = 3 * i + 1


def test_fill_grid_stride_mistakes_are_named():
    with pytest.raises(CheckFailed, match="written by several threads.*cuda.gridsize"):
        ch1.check_fill_grid_stride(fill_block_stride)
    with pytest.raises(CheckFailed, match="written by several threads"):
        ch1.check_fill_grid_stride(fill_blocks_stride)
    with pytest.raises(CheckFailed, match="writes to out are not coalesced"):
        ch1.check_fill_grid_stride(fill_chunks)


def test_speed_history_records_each_comparison():
    """speed.history(): one dict per comparison, with exactly the keys the GPU CI reads, copies that callers cannot change."""
    from gpucourse.checks import speed

    before = len(speed.history())
    assert speed.record("Exercise 9.9", 0.8, 0.7) is True
    assert speed.record("Exercise 9.9", 0.5, 0.7) is False
    entries = speed.history()[before:]
    assert entries == [{"exercise": "Exercise 9.9", "ratio": 0.8, "bar": 0.7, "passed": True},
                       {"exercise": "Exercise 9.9", "ratio": 0.5, "bar": 0.7, "passed": False}]
    entries[0]["ratio"] = 99
    assert speed.history()[before]["ratio"] == 0.8


def test_a_failed_check_names_at_most_three_problems():
    from gpucourse.checks import SHOWN_PROBLEMS, fail

    with pytest.raises(CheckFailed) as failed:
        fail([f"problem {k}" for k in range(10)] + ["problem 0"], "Exercise 9.9")
    lines = str(failed.value).splitlines()
    assert len(lines) == 1 + SHOWN_PROBLEMS + 1 and "7 more" in lines[-1]
