"""How the GPUs are linked, as nvidia-smi reports it: the topology matrix, NVLink lanes and PCIe links.

`nvidia-smi topo -m` prints, for each pair of GPUs, what a transfer between them crosses: `NV#` a
bond of # NVLinks, `PIX`/`PXB` one or more PCIe switches, `PHB` a PCIe host bridge (the CPU),
`NODE`/`SYS` the links between host bridges or CPU sockets. `nvidia-smi nvlink -s` gives each
NVLink's rate. From these, `link_figure(a, b)` states the figure a peer copy is measured against.
The parsers take the tools' text, so they are tested on recorded outputs.

nvidia-smi numbers the GPUs in PCI bus order and ignores `CUDA_VISIBLE_DEVICES`; CUDA numbers the
visible ones, fastest first unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`. `Topology` takes CUDA ordinals
(the numbers the course's other functions take) and finds each one's nvidia-smi row by PCI bus id.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

#: What each entry of the topology matrix means (nvidia-smi's legend, shortened).
LEGEND = {
    "X": "the GPU itself",
    "NV": "a bonded set of NVLinks (NV# = # links)",
    "PIX": "at most one PCIe switch",
    "PXB": "several PCIe switches, not the host bridge",
    "PHB": "PCIe and a PCIe host bridge (the CPU)",
    "NODE": "PCIe and the links between host bridges of one NUMA node",
    "SYS": "PCIe and the link between CPU sockets (NUMA nodes)",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _run(arguments: list[str]) -> str | None:
    """nvidia-smi's output for `arguments`, or None if it is not there or fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(["nvidia-smi", *arguments], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return _ANSI.sub("", result.stdout) if result.returncode == 0 else None


def parse_topology_matrix(text: str) -> dict[tuple[int, int], str]:
    """The GPU-to-GPU entries of `nvidia-smi topo -m`: {(i, j): 'NV18' | 'PIX' | ... | 'X'}."""
    lines = [line.rstrip() for line in _ANSI.sub("", text).splitlines() if line.strip()]
    header = next((line for line in lines if re.search(r"\tGPU0\b|^\s+GPU0\b", line)), None)
    if header is None:
        return {}
    columns = [cell.strip() for cell in header.split("\t")]
    gpu_columns = {index: int(name[3:]) for index, name in enumerate(columns) if re.fullmatch(r"GPU\d+", name)}
    matrix = {}
    for line in lines:
        cells = [cell.strip() for cell in line.split("\t")]
        if not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        row = int(cells[0][3:])
        for index, column in gpu_columns.items():
            if index < len(cells):
                matrix[(row, column)] = cells[index]
    return matrix


def parse_nvlink_status(text: str) -> dict[int, list[float]]:
    """The rate in GB/s of each active NVLink of each GPU, from `nvidia-smi nvlink -s` ({gpu: [GB/s, ...]})."""
    links: dict[int, list[float]] = {}
    gpu = None
    for line in _ANSI.sub("", text).splitlines():
        header = re.match(r"\s*GPU (\d+):", line)
        if header:
            gpu = int(header.group(1))
            links.setdefault(gpu, [])
            continue
        rate = re.match(r"\s*Link \d+:\s*([\d.]+)\s*GB/s", line)
        if rate and gpu is not None:
            links[gpu].append(float(rate.group(1)))
    return links


def bus_key(bus_id: str) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of a PCI bus id, written by nvidia-smi ('00000000:18:00.0') or CUDA ('0000:18:00.0')."""
    found = re.fullmatch(r"\s*([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])\s*", bus_id)
    return None if found is None else tuple(int(part, 16) for part in found.groups())


def parse_bus_ids(text: str) -> dict[int, tuple[int, int, int, int]]:
    """{nvidia-smi index: PCI bus key} from nvidia-smi's `index,pci.bus_id` CSV query (no header)."""
    result = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == 2 and cells[0].isdigit() and (key := bus_key(cells[1])) is not None:
            result[int(cells[0])] = key
    return result


def smi_indices(cuda_bus_ids: dict[int, str | None], smi_bus_ids: dict[int, tuple[int, int, int, int]]) -> dict[int, int]:
    """{CUDA ordinal: nvidia-smi index}, matched by PCI bus id; ordinals without a match are left out."""
    by_bus = {key: index for index, key in smi_bus_ids.items()}
    found = {}
    for ordinal, bus_id in cuda_bus_ids.items():
        key = bus_key(bus_id) if bus_id else None
        if key in by_bus:
            found[ordinal] = by_bus[key]
    return found


def parse_pcie(text: str) -> dict[int, tuple[int, int, int, int]]:
    """{gpu: (current gen, current width, max gen, max width)} from nvidia-smi's pcie.link CSV query (no header, no units)."""
    result = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == 5 and all(cell.isdigit() for cell in cells):
            index, *numbers = (int(cell) for cell in cells)
            result[index] = tuple(numbers)
    return result


def pcie_gbs(generation: int, lanes: int) -> float:
    """Per-direction PCIe bandwidth in GB/s of a link: transfer rate x lanes x encoding efficiency / 8 bits."""
    rates = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}
    if generation not in rates:
        raise ValueError(f"unknown PCIe generation {generation}; known: {sorted(rates)}")
    gigatransfers, efficiency = rates[generation]
    return gigatransfers * lanes * efficiency / 8


@dataclass(frozen=True)
class LinkFigure:
    """What connects two GPUs and the per-direction bandwidth it is rated for (None where it cannot be told)."""

    kind: str
    gbs: float | None
    description: str


@dataclass
class Topology:
    """nvidia-smi's view of the links: the raw texts and what was read from them."""

    matrix: dict[tuple[int, int], str] = field(default_factory=dict)
    nvlink: dict[int, list[float]] = field(default_factory=dict)
    pcie: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    topo_text: str = ""
    nvlink_text: str = ""
    available: bool = True
    #: CUDA ordinal -> nvidia-smi index; an ordinal not listed is taken as its own index
    smi_index: dict[int, int] = field(default_factory=dict)

    def _row(self, ordinal: int) -> int:
        return self.smi_index.get(ordinal, ordinal)

    def link(self, a: int, b: int) -> str | None:
        """The topology matrix's entry for CUDA devices a and b ('NV18', 'PIX', 'SYS', ...), or None if not reported."""
        return self.matrix.get((self._row(a), self._row(b)))

    def link_figure(self, a: int, b: int) -> LinkFigure:
        """The rated per-direction bandwidth in GB/s between CUDA devices a and b, and where the figure comes from."""
        kind = self.link(a, b)
        a, b = self._row(a), self._row(b)  # nvidia-smi's numbering from here on
        if kind is None:
            return LinkFigure("unknown", None, "nvidia-smi did not report the link between these GPUs")
        bond = re.fullmatch(r"NV(\d+)", kind)
        if bond:
            count = int(bond.group(1))
            rates = self.nvlink.get(a) or self.nvlink.get(b) or []
            if not rates:
                return LinkFigure(kind, None, f"{count} NVLinks (nvidia-smi nvlink -s gave no per-link rate)")
            rate = sorted(rates)[len(rates) // 2]
            return LinkFigure(kind, count * rate, f"{count} NVLinks x {rate:g} GB/s (nvidia-smi nvlink -s, per link and direction)")
        ends = [self.pcie.get(g) for g in (a, b)]
        if all(ends):
            generation = min(e[2] for e in ends)
            lanes = min(e[3] for e in ends)
            rated = pcie_gbs(generation, lanes)
            meaning = LEGEND.get(kind, "PCIe")
            return LinkFigure(kind, rated, f"PCIe gen {generation} x{lanes}: {rated:.1f} GB/s per direction; path: {meaning}")
        return LinkFigure(kind, None, f"{kind}: {LEGEND.get(kind, 'PCIe')} (PCIe generation not reported)")


def read_topology() -> Topology:
    """Ask nvidia-smi for the topology matrix, the NVLink rates and the PCIe links (empty where it is absent)."""
    topo = _run(["topo", "-m"])
    if topo is None:
        return Topology(available=False)
    nvlink = _run(["nvlink", "-s"]) or ""
    pcie = _run(["--query-gpu=index,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max",
                 "--format=csv,noheader,nounits"]) or ""
    buses = parse_bus_ids(_run(["--query-gpu=index,pci.bus_id", "--format=csv,noheader"]) or "")
    from ..device import all_devices

    cuda = {info.ordinal: info.pci_bus_id for info in all_devices()}
    return Topology(parse_topology_matrix(topo), parse_nvlink_status(nvlink), parse_pcie(pcie), topo, nvlink,
                    smi_index=smi_indices(cuda, buses))
