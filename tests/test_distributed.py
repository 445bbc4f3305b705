"""The distributed (peer-to-peer) transpose: decomposition, schedule, and results on every split of the devices."""

from __future__ import annotations

import numpy as np
import pytest

import gpucourse
from gpucourse import multigpu
from gpucourse.errors import DecompositionError
from gpucourse.multigpu import peer
from gpucourse.multigpu import transpose as D

TILE = gpucourse.problem_size("ch4_tile")


def test_split_rows():
    split = D.split_rows((12, 20), 4)
    assert (split.rows_per_part, split.cols_per_part) == (3, 5)
    with pytest.raises(DecompositionError, match=r"13 rows are not a multiple of 2"):
        D.split_rows((13, 20), 2)
    with pytest.raises(DecompositionError, match=r"12 rows and 20 columns"):
        D.split_rows((12, 20), 7)
    for bad in (0, -1, 1.5):
        with pytest.raises(DecompositionError, match="positive int"):
            D.split_rows((12, 20), bad)


@pytest.mark.parametrize("parts", range(1, 10))
def test_the_book_schedule_is_valid(parts):
    stages = D.transpose_schedule(parts)
    assert D.schedule_problems(stages, parts) == []
    assert stages[0] == [(p, p) for p in range(parts)]
    for stage in stages[1:]:
        assert sorted(s for s, _ in stage) == list(range(parts)) and all(s != r for s, r in stage)


def test_schedule_problems_are_named():
    assert any("never move" in p and "diagonal" in p for p in D.schedule_problems(D.transpose_schedule(3)[1:], 3))
    assert any("comes twice" in p for p in D.schedule_problems(D.transpose_schedule(2) + [[(0, 1)]], 2))
    assert any("receives 2 blocks" in p for p in D.schedule_problems([[(0, 0), (1, 1)], [(0, 1), (1, 1)], [(1, 0)]], 2))
    assert any("numbered 0 to 1" in p for p in D.schedule_problems([[(0, 0), (1, 2)]], 2))
    assert D.schedule_problems("nonsense", 2)


def layouts():
    count = multigpu.device_count()
    return [list(range(count)), [0, 0], [0] * 3, list(range(count)) * 2][: 4 if count > 1 else 3]


@pytest.mark.parametrize("overlap", [True, False])
def test_transpose_on_every_layout(overlap):
    h, w = gpucourse.problem_size("ch4_test_slice")
    for devices in layouts():
        parts = len(devices)
        inp = D.DistributedMatrix.filled((parts * h, parts * w), devices, seed=parts)
        transpose = D.DistributedTranspose(inp, tile=TILE[0], block_rows=TILE[1])
        assert transpose.mismatches() == parts * h * parts * w  # poisoned before the run: every element counts
        transpose.run(overlap)
        assert transpose.mismatches() == 0, devices
        np.testing.assert_array_equal(transpose.out.gather(), inp.gather().T)
        assert transpose.bytes_moved == 2 * inp.nbytes


def test_cupy_kernel_and_a_custom_schedule():
    h, w = gpucourse.problem_size("ch4_test_slice")
    devices = [0, 0, 0]
    inp = D.DistributedMatrix.filled((3 * h, 3 * w), devices, seed=7)
    reversed_stages = [D.transpose_schedule(3)[0], *D.transpose_schedule(3)[:0:-1]]
    for kernel in D.KERNELS:
        transpose = D.DistributedTranspose(inp, schedule=reversed_stages, kernel=kernel, tile=TILE[0], block_rows=TILE[1])
        assert transpose.schedule_problems == []
        transpose.run()
        assert transpose.mismatches() == 0
    with pytest.raises(ValueError, match="kernel must be one of"):
        D.DistributedTranspose(inp, kernel="fortran")


def test_a_schedule_that_skips_blocks_leaves_them_unwritten():
    h, w = gpucourse.problem_size("ch4_test_slice")
    inp = D.DistributedMatrix.filled((2 * h, 2 * w), [0, 0], seed=8)
    transpose = D.DistributedTranspose(inp, schedule=D.transpose_schedule(2)[1:], tile=TILE[0], block_rows=TILE[1])
    assert transpose.schedule_problems
    transpose.run()
    assert transpose.mismatches() == 2 * h * w  # the two diagonal blocks


def test_time_ms():
    h, w = gpucourse.problem_size("ch4_test_slice")
    inp = D.DistributedMatrix.filled((2 * h, 2 * w), [0, 0], seed=9)
    assert D.DistributedTranspose(inp, tile=TILE[0], block_rows=TILE[1]).time_ms(repeat=1) > 0


def test_peer_access_is_switched_as_asked():
    """Every pair of the machine's GPUs that allows peer access is switched as asked, then put back: on any number of GPUs."""
    h, w = gpucourse.problem_size("ch4_test_slice")
    count = multigpu.device_count()
    devices = list(range(count)) if count > 1 else [0, 0]
    inp = D.DistributedMatrix.filled((len(devices) * h, len(devices) * w), devices, seed=10)
    matrix = multigpu.peer_matrix() if count > 1 else None
    capable = [(a, b) for a in range(count) for b in range(a + 1, count) if matrix[a, b] and matrix[b, a]] if count > 1 else []
    for enabled in (False, True):
        for a, b in capable:
            multigpu.set_peer_access(a, b, not enabled)  # the state before: the other one
        with D.DistributedTranspose(inp, tile=TILE[0], block_rows=TILE[1], peer_access=enabled) as transpose:
            assert transpose.peer_pairs == capable
            for a, b in capable:
                assert multigpu.set_peer_access(a, b, enabled) == (enabled, enabled)  # the state the transpose set
            transpose.run()
            assert transpose.mismatches() == 0
        for a, b in capable:
            assert multigpu.set_peer_access(a, b, enabled) == (not enabled, not enabled)  # put back as it was


def test_closing_a_transpose_puts_peer_access_back(monkeypatch):
    """What close() undoes, with the driver calls recorded (a pair of GPUs is not needed to follow the bookkeeping)."""
    calls = []
    monkeypatch.setattr(peer, "_set_one_way", lambda device, peer, enabled: calls.append((device, peer, enabled)))
    multigpu.restore_peer_access(0, 1, (True, False))
    assert calls == [(0, 1, True), (1, 0, False)]
    h, w = gpucourse.problem_size("ch4_test_slice")
    transpose = D.DistributedTranspose(D.DistributedMatrix.filled((2 * h, 2 * w), [0, 0], seed=11), tile=TILE[0], block_rows=TILE[1])
    transpose._peer_before = {(0, 1): (False, True)}  # as if it had switched a pair that was on one way only
    calls.clear()
    transpose.close()
    transpose.close()  # a second close has nothing left to undo
    assert calls == [(0, 1, False), (1, 0, True)]


def test_blocking_copies_take_turns_and_overlapped_ones_do_not(monkeypatch):
    """The premise of StageModel: overlap=False waits for each receiver's copy before the next; overlap=True never waits."""
    events = []

    class Recorder:  # stands in for a stream (the simulator has none)
        def __init__(self, name):
            self.name = name

        def synchronize(self):
            events.append(("wait", self.name))

    monkeypatch.setattr(D, "copy_2d", lambda dst, src, stream=None: events.append(("copy", stream.name)))
    h, w = gpucourse.problem_size("ch4_test_slice")
    transpose = D.DistributedTranspose(D.DistributedMatrix.filled((3 * h, 3 * w), [0, 0, 0], seed=12), tile=TILE[0], block_rows=TILE[1])
    for overlap in (False, True):
        for number, stage in enumerate(transpose._steps[overlap]):
            for step in stage:
                step.stream = Recorder((step.receiver, number if overlap else 0))
        events.clear()
        transpose.run(overlap)
        copies = [name for kind, name in events if kind == "copy"]
        assert len(copies) == 3 * 2  # two stages of three copies
        if overlap:
            assert all(kind == "copy" for kind, _ in events) and len(set(copies)) == 6  # a stream each, no waits
        else:
            assert events == [event for name in copies for event in (("copy", name), ("wait", name))]


def test_stage_model():
    model = D.StageModel(parts=2, transpose_ms=0.1, copy_ms=1.0)
    assert model.overlapped_ms == pytest.approx(1.1)  # one copy time per stage, then the last transpose
    assert model.blocking_ms == pytest.approx(2.2)  # the two copies of the stage in turn, a transpose at each end
    for parts in (2, 4, 8):  # copies much longer than transposes: blocking is slower by about the number of GPUs
        slow_link = D.StageModel(parts, transpose_ms=1e-6, copy_ms=1.0)
        assert slow_link.blocking_ms / slow_link.overlapped_ms == pytest.approx(parts, rel=1e-4)
    fast_link = D.StageModel(parts=4, transpose_ms=1.0, copy_ms=0.1)  # transposes longer: the P transposes set the time
    assert fast_link.overlapped_ms == pytest.approx(4.0)
    book_like = D.StageModel.from_rates(2048 * 2048 * 4, 2, transpose_gbs=96.1, copy_gbs=5.3)
    assert book_like.transpose_ms == pytest.approx(2 * 2**22 / 96.1e9 * 1e3)  # a 1024 x 1024 block read and written
    assert book_like.copy_ms == pytest.approx(2**22 / 5.3e9 * 1e3)
    with pytest.raises(ValueError, match="two or more GPUs"):
        D.StageModel.from_rates(1e6, 1, 100.0, 10.0)
