"""nvidia-smi's topology, NVLink and PCIe reports, read from recorded outputs."""

from __future__ import annotations

import pytest

from gpucourse.multigpu import links as topology

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


def test_cuda_ordinals_are_found_by_pci_bus_id():
    """CUDA_VISIBLE_DEVICES=2,0 makes CUDA's 0 and 1 nvidia-smi's GPU2 and GPU0: the links are theirs."""
    assert topology.bus_key("00000000:18:00.0") == topology.bus_key("0000:18:00.0") == (0, 0x18, 0, 0)
    assert topology.bus_key("not a bus") is None
    smi = topology.parse_bus_ids("0, 00000000:18:00.0\n1, 00000000:2A:00.0\n2, 00000000:9A:00.0\n3, 00000000:AB:00.0\n")
    assert smi[2] == (0, 0x9A, 0, 0) and len(smi) == 4
    order = topology.smi_indices({0: "0000:9a:00.0", 1: "0000:18:00.0", 2: None}, smi)
    assert order == {0: 2, 1: 0}  # an ordinal without a bus id keeps its own number
    pcie = topology.parse_pcie("0, 4, 16, 4, 16\n1, 4, 16, 4, 16\n2, 3, 8, 3, 8\n3, 4, 16, 4, 16\n")
    links = topology.Topology(topology.parse_topology_matrix(PCIE_FOUR), pcie=pcie, smi_index=order)
    assert links.link(0, 1) == "SYS" and topology.Topology(links.matrix).link(0, 1) == "PIX"
    assert links.link_figure(0, 1).gbs == pytest.approx(topology.pcie_gbs(3, 8))  # GPU2's gen-3 x8 end sets the figure


def test_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(topology.shutil, "which", lambda name: None)
    report = topology.read_topology()
    assert not report.available and report.matrix == {} and report.link_figure(0, 1).gbs is None
