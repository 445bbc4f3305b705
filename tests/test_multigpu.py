"""Devices, peer access and copies between devices: on every visible GPU, and on the simulator's one device."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_only

import gpucourse
from gpucourse import multigpu
from gpucourse.errors import ArrayArgumentError, DeviceOrdinalError, GPUOnlyFeature, PeerAccessError
from gpucourse.multigpu import gpus
from gpucourse.multigpu import peer as peer_module


def test_devices_and_ordinals():
    count = multigpu.device_count()
    assert count >= 1 and len(multigpu.device_table().rows) == count
    assert [info.ordinal for info in multigpu.devices()] == list(range(count))
    for bad in (count, -1, 1.0, True):
        with pytest.raises(DeviceOrdinalError, match="there is no device") as error:
            multigpu.check_ordinal(bad)
        assert "ordinal" in str(error.value) or "stand-in" in str(error.value)
    assert isinstance(error.value, IndexError)  # code that catches IndexError still works


def test_on_device_makes_each_device_current():
    for ordinal in range(multigpu.device_count()):
        with multigpu.on_device(ordinal) as info:
            assert info.ordinal == ordinal
            assert gpucourse.current_device().ordinal == ordinal
            if gpucourse.on_gpu():
                import cupy

                assert cupy.cuda.runtime.getDevice() == ordinal
                assert cupy.zeros(4).device.id == ordinal
    with pytest.raises(DeviceOrdinalError):
        with multigpu.on_device(multigpu.device_count()):
            pass


def test_peer_matrix_and_table():
    matrix = multigpu.peer_matrix()
    count = multigpu.device_count()
    assert matrix.shape == (count, count) and matrix.dtype == bool
    assert not matrix.diagonal().any()
    table = multigpu.peer_table(np.array([[False, True], [True, False]]))
    assert [row[1:] for row in table.rows] == [["-", "Y"], ["Y", "-"]]


def test_peer_access_refuses_what_cannot_be(monkeypatch):
    with pytest.raises(PeerAccessError, match="two different GPUs"):
        multigpu.set_peer_access(0, 0, True)
    monkeypatch.setattr(gpus, "device_count", lambda: 2)
    monkeypatch.setattr(peer_module, "can_access_peer", lambda a, b: False)
    with pytest.raises(PeerAccessError, match="cannot access each other's memory"):
        multigpu.set_peer_access(0, 1, True)


def test_peer_access_switches_and_restores():
    if multigpu.device_count() < 2 or not multigpu.peer_matrix()[0, 1]:
        with pytest.raises((PeerAccessError, DeviceOrdinalError)):
            with multigpu.peer_access(0, 1):
                pass
        gpu_only("two GPUs with peer access (refused here, checked)")
    before = multigpu.set_peer_access(0, 1, False)
    with multigpu.peer_access(0, 1, True):
        assert multigpu.set_peer_access(0, 1, True) == (True, True)  # already on inside the block
    assert multigpu.set_peer_access(0, 1, False) == (False, False)  # off again after it
    multigpu.set_peer_access(0, 1, any(before))


@pytest.mark.parametrize("itemsize", [4, 8])
def test_copy_2d_between_every_pair_of_devices(itemsize):
    dtype = np.dtype(f"f{itemsize}")
    host = gpucourse.random_array((13, 29), dtype, seed=1)
    for source in range(multigpu.device_count()):
        for target in range(multigpu.device_count()):
            src = multigpu.copy_to_device(host, source)
            dst = multigpu.copy_to_device(gpucourse.poisoned((20, 40), dtype), target)
            with multigpu.on_device(target):
                multigpu.copy_2d(dst[3:10, 5:22], src[2:9, 7:24])
            multigpu.synchronize_all()
            got = gpucourse.to_host(dst)
            expected = gpucourse.poisoned((20, 40), dtype)
            expected[3:10, 5:22] = host[2:9, 7:24]
            np.testing.assert_array_equal(got, expected)


def test_copy_argument_errors():
    a = multigpu.copy_to_device(np.zeros((4, 6), np.float32), 0)
    with pytest.raises(ArrayArgumentError, match="one shape and dtype"):
        multigpu.copy_2d(a[:, :3], a[:3, :3])
    with pytest.raises(ArrayArgumentError, match="contiguous rows"):
        multigpu.copy_2d(a[:, ::2], a[:, :3])
    with pytest.raises(ArrayArgumentError, match="one size and dtype"):
        multigpu.copy_peer(a[:2], a[:1])


def test_peer_bandwidth_measures_or_refuses_clearly():
    if multigpu.device_count() < 2:
        with pytest.raises((PeerAccessError, GPUOnlyFeature)):
            multigpu.peer_bandwidth(0, 0, 1 << 20)
        return
    for peer in (True, False) if multigpu.peer_matrix()[0, 1] else (False,):
        transfer = multigpu.peer_bandwidth(0, 1, 1 << 24, peer=peer, repeat=3)
        assert transfer.verified and transfer.gbs > 0 and transfer.nbytes == 1 << 24
        assert "GB/s" in str(transfer)


def test_wall_time():
    ms = multigpu.wall_time_ms(lambda: None, [0], repeat=2)
    assert 0 <= ms < 1000
    with pytest.raises(ValueError):
        multigpu.wall_time_ms(lambda: None, [0], repeat=0)


def test_wall_times_are_one_sample_per_call():
    calls = []
    samples = multigpu.wall_times_ms(lambda: calls.append(1), [0], repeat=3, warmup=0)
    assert len(samples) == 3 == len(calls) and all(0 <= ms < 1000 for ms in samples)


def test_the_peer_sum_kernel_adds_two_arrays():
    """The kernel of add_from_peer, on arrays of one device (what it computes does not depend on where they live)."""
    n = 1000
    local, remote = gpucourse.random_array(n, np.float32, seed=3), gpucourse.random_array(n, np.float32, seed=4)
    out = gpucourse.to_device(gpucourse.poisoned(n, np.float32))
    multigpu.peer_sum_kernel()[(n + 127) // 128, 128](out, gpucourse.to_device(local), gpucourse.to_device(remote))
    np.testing.assert_array_equal(gpucourse.to_host(out), local + remote)


def test_add_from_peer_reads_the_other_gpu():
    n = 1 << 16
    local, remote = gpucourse.random_array(n, np.float32, seed=5), gpucourse.random_array(n, np.float32, seed=6)
    on_zero = [multigpu.copy_to_device(a, 0) for a in (gpucourse.poisoned(n, np.float32), local, remote)]
    with pytest.raises(PeerAccessError, match="another GPU"):  # every array on one GPU: not a peer access
        multigpu.add_from_peer(*on_zero)
    with pytest.raises(ArrayArgumentError, match="shape"):
        multigpu.add_from_peer(on_zero[0], on_zero[1], on_zero[2][: n // 2])
    if multigpu.device_count() < 2 or not multigpu.peer_matrix()[0, 1]:
        gpu_only("two GPUs with peer access for the direct read (the refusals were checked)")
    before = multigpu.set_peer_access(0, 1, False)
    out, near = on_zero[0], on_zero[1]
    far = multigpu.copy_to_device(remote, 1)
    multigpu.add_from_peer(out, near, far)
    np.testing.assert_array_equal(gpucourse.to_host(out), local + remote)
    with pytest.raises(ArrayArgumentError, match="must live on out's GPU"):
        multigpu.add_from_peer(out, multigpu.copy_to_device(local, 1), far)
    assert multigpu.set_peer_access(0, 1, False) == (False, False)  # switched on for the call, and off again after it
    multigpu.restore_peer_access(0, 1, before)
