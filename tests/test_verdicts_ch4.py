"""The verdicts notebooks 4.5 and 4.6 print are drawn from every row they speak of: change any row, and the sentence changes.

Each verdict cell runs here on made-up rows (as on a machine of four GPUs), then once more with one
value of one row changed; a sentence that did not change ignored that row.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "chapters" / "04_multi_gpu"


def cell_starting(notebook: str, start: str) -> str:
    """The source of the one code cell of `notebook` that starts with `start`."""
    cells = [c for c in json.loads((CHAPTER / notebook).read_text())["cells"] if c["cell_type"] == "code"]
    found = [''.join(c["source"]) for c in cells if ''.join(c["source"]).startswith(start)]
    assert len(found) == 1, f"{notebook}: {len(found)} cells start with {start!r}"
    return found[0]


def printed(source: str, names: dict) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(source, {"display": print, **names})  # noqa: S102 - the notebook's own cell, on made-up values
    return out.getvalue()


def test_the_host_verdict_of_4_5_reads_every_way():
    source = cell_starting("05_domain_decomposition.ipynb", "if simulated:\n    print(\"Not measured in the simulator: the times above")
    ways = [("halo 1, every launch from Python", 1, False), ("halo 1, CUDA graphs", 1, True), ("halo 10, CUDA graphs", 10, True)]
    rows = [[ways[0][0], 1.038, 0.18, 60, 0.9, 0.19, "host"], [ways[1][0], 1.082, 0.17, 52, 0.78, 0.19, "host"],
            [ways[2][0], 0.193, 0.98, 52, 0.078, 0.19, "GPUs"]]
    names = {"simulated": False, "count": 4, "top": 4, "halo": 10, "ways": ways, "rows": rows}
    base = printed(source, names)
    assert "1.0380" in base and "1.0820" in base and "0.1930" in base
    for r in range(3):
        for column in (1, 3, 6):
            changed = copy.deepcopy(names)
            value = changed["rows"][r][column]
            if isinstance(value, str):
                changed["rows"][r][column] = "GPUs" if value == "host" else "host"
            else:
                changed["rows"][r][column] = value * 1.5 if column == 1 else value + 7
            assert printed(source, changed) != base, f"the verdict ignores row {r}, column {column}"
    one_gpu = printed(source, {**names, "count": 1, "top": 2})
    assert "cost of splitting" in one_gpu and "0.170" in one_gpu and "0.980" in one_gpu  # both ends, from every row


def test_the_strong_scaling_verdict_of_4_5_says_where_the_parts_ran():
    source = cell_starting("05_domain_decomposition.ipynb", "one = scaling.one_gpu_sweep(shape)")

    class Run:
        def __init__(self, gpus, ms, efficiency):
            self.gpus, self.ms_per_sweep, self.efficiency = gpus, ms, efficiency

    class Scaling:
        @staticmethod
        def one_gpu_sweep(shape):
            return {"ms": 0.75, "of_copy": 0.95}

    names = {"scaling": Scaling, "shape": (10, 10), "simulated": False}
    on_one = printed(source, {**names, "count": 1, "strong": [Run(1, 0.75, 1.0), Run(2, 0.74, 0.509)]})
    assert "2 parts on one GPU" in on_one and "0.509" in on_one and "below" not in on_one
    on_four = printed(source, {**names, "count": 4, "strong": [Run(1, 0.75, 1.0), Run(4, 0.19, 0.983)]})
    assert "4 GPUs" in on_four and "at the 0.92" in on_four


def test_the_reference_verdict_of_4_5_reads_both_kernels_and_both_efficiencies():
    source = cell_starting("05_domain_decomposition.ipynb", "record_path = Path(")
    record = {"ms_per_sweep": {"1": 0.759, "2": 0.378, "4": 0.193}, "reference_ms_per_sweep": {"1": 1.251, "2": 0.632, "4": 0.322},
              "reference_over_ours_4": 1.669, "efficiency_2": 1.003, "efficiency_4": 0.983, "gpus": "4 x H100", "driver": "x", "date": "d"}

    class FakePath:
        def __init__(self, *_):
            pass

        def exists(self):
            return True

        def read_text(self):
            return json.dumps(RECORD)

    from gpucourse.report import Table

    global RECORD
    RECORD = record
    names = {"Path": FakePath, "json": json, "Table": Table}
    base = printed(source, names)
    assert "1.65" in base and "0.971" in base and "0.983" in base and "the one-GPU kernel" in base
    for key, sub in (("ms_per_sweep", "1"), ("ms_per_sweep", "4"), ("reference_ms_per_sweep", "1"), ("reference_ms_per_sweep", "4")):
        RECORD = copy.deepcopy(record)
        RECORD[key][sub] *= 1.3
        assert printed(source, names) != base, f"the verdict ignores {key}[{sub}]"


RECORD: dict = {}


@pytest.mark.parametrize("count", [1, 4])
def test_the_alltoall_verdict_of_4_6_reads_every_run(count):
    source = cell_starting("06_distributed_fft.ipynb", "if simulated:\n    print(f\"All {len(runs)} ways")

    class Run:
        def __init__(self, how, gbs):
            self.how, self._gbs, self.mismatches = how, gbs, 0

        def gbs(self):
            return self._gbs

    runs = [Run(f"way {k}", 100.0 + 10 * k) for k in range(6)]
    names = {"simulated": False, "count": count, "pair_gbs": 390.0, "runs": runs}
    base = printed(source, names)
    for k in range(6):  # the fastest and the slowest come from all of them
        changed = copy.deepcopy(names)
        changed["runs"][k]._gbs = 1000.0 if k < 5 else 1.0
        assert printed(source, changed) != base, f"the verdict ignores run {k}"
