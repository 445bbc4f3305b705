"""nvidia-smi's topology, NVLink and PCIe reports, read from recorded outputs."""

from __future__ import annotations

import pytest

from gpucourse import topology

NVLINK_PAIR = (
    "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\t0-31\t0\t\tN/A\n"
    "GPU1\tNV18\t X \t0-31\t0\t\tN/A\n\n"
    "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
)
PCIE_FOUR = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tPIX\tSYS\tSYS\tNODE\t0-15\t0\n"
    "GPU1\tPIX\t X \tSYS\tSYS\tNODE\t0-15\t0\n"
    "GPU2\tSYS\tSYS\t X \tPIX\tSYS\t16-31\t1\n"
    "GPU3\tSYS\tSYS\tPIX\t X \tSYS\t16-31\t1\n"
    "NIC0\tNODE\tNODE\tSYS\tSYS\t X \n"
)
NVLINK_STATUS = (
    "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n\t Link 2: <inactive>\n"
    "GPU 1: NVIDIA H200 (UUID: GPU-bbbb)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
)


def test_topology_matrix():
    matrix = topology.parse_topology_matrix(NVLINK_PAIR)
    assert matrix == {(0, 0): "X", (0, 1): "NV18", (1, 0): "NV18", (1, 1): "X"}
    four = topology.parse_topology_matrix(PCIE_FOUR)
    assert four[(0, 1)] == "PIX" and four[(1, 2)] == "SYS" and len(four) == 16  # the NIC column and row are not GPUs
    assert topology.parse_topology_matrix("No devices were found") == {}


def test_nvlink_and_pcie():
    assert topology.parse_nvlink_status(NVLINK_STATUS) == {0: [26.562, 26.562], 1: [26.562, 26.562]}
    assert topology.parse_pcie("0, 1, 16, 5, 16\n1, 5, 16, 5, 16\n") == {0: (1, 16, 5, 16), 1: (5, 16, 5, 16)}
    assert topology.pcie_gbs(3, 16) == pytest.approx(15.754, abs=1e-3)
    assert topology.pcie_gbs(4, 16) == pytest.approx(31.508, abs=1e-3)
    assert topology.pcie_gbs(5, 16) == pytest.approx(63.015, abs=1e-3)
    with pytest.raises(ValueError, match="unknown PCIe generation"):
        topology.pcie_gbs(9, 16)


def test_link_figures():
    nv = topology.Topology(topology.parse_topology_matrix(NVLINK_PAIR), topology.parse_nvlink_status(NVLINK_STATUS))
    figure = nv.link_figure(0, 1)
    assert figure.kind == "NV18" and figure.gbs == pytest.approx(18 * 26.562) and "18 NVLinks" in figure.description
    assert topology.Topology(nv.matrix).link_figure(0, 1).gbs is None  # no per-link rate reported
    pcie = topology.Topology(topology.parse_topology_matrix(PCIE_FOUR), pcie=topology.parse_pcie("0, 1, 16, 4, 16\n1, 4, 16, 4, 8\n"))
    figure = pcie.link_figure(0, 1)
    assert figure.kind == "PIX" and figure.gbs == pytest.approx(topology.pcie_gbs(4, 8)) and "one PCIe switch" in figure.description
    assert pcie.link_figure(0, 7).kind == "unknown"


def test_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(topology.shutil, "which", lambda name: None)
    report = topology.read_topology()
    assert not report.available and report.matrix == {} and report.link_figure(0, 1).gbs is None
