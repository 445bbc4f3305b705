"""The GPU CI driver (tools/gpu_ci.py): its record and its packing for machines that return few files."""

from __future__ import annotations

import importlib.util
import sys
import tarfile

from conftest import ROOT

spec = importlib.util.spec_from_file_location("gpu_ci", ROOT / "tools" / "gpu_ci.py")
gpu_ci = importlib.util.module_from_spec(spec)
sys.modules["gpu_ci"] = gpu_ci
spec.loader.exec_module(gpu_ci)


def test_pack_leaves_the_record_and_one_archive(tmp_path):
    (tmp_path / "gpu_ci.md").write_text("# record\n")
    (tmp_path / "tests.log").write_text("301 passed\n")
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "report.md").write_text("| row |\n")
    (tmp_path / "executed" / "01_introduction").mkdir(parents=True)
    (tmp_path / "executed" / "01_introduction" / "01.ipynb").write_text("{}")
    archive = gpu_ci.pack(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_ci.md", "gpu_ci.tar.gz"]
    with tarfile.open(archive) as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
        assert names == ["executed/01_introduction/01.ipynb", "report/report.md", "tests.log"]
        assert tar.extractfile("tests.log").read() == b"301 passed\n"
