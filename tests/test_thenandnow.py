"""The then-and-now report: its table building, its rendering, a whole simulator-mode run, and the coverage of the book's figures."""

from __future__ import annotations

import html
import json
import os

import pytest

from gpucourse import book, mode, thenandnow
from gpucourse.thenandnow import core, render


def test_numbers_never_print_a_tiny_value_as_zero():
    assert render.number(2.845e-05) == "2.845e-05" and render.number(0) == "0" and render.number(None) == "—"
    assert render.number(3017.2) == "3017" and render.number(0.0123) == "0.0123" and render.number(12.3456789) == "12.35"
    assert render.fraction(0.917) == "92%" and render.fraction(None) == "—"


def test_counts_codes_and_sizes_print_as_whole_numbers():
    assert render.number(13000) == "13000" and render.number(16896) == "16896" and render.number(65536.0) == "65536"
    assert render.number(150_100_000_000) == "150,100,000,000" and render.number(2147483647 * 1024) == "2,199,023,254,528"
    assert render.number(float("nan")) == "—"  # nothing measured, never 'nan'
    meta = {"device": "Test GPU", "simulated": False, "driver CUDA version": 13000}
    assert "- driver CUDA version: 13.0 (13000)" in render.to_markdown(meta, [], [], {})


def test_a_dual_gpu_boards_figure_is_set_against_one_gpus_ceiling():
    """Appendix A prints the K10's peak per board ('2 × 160'); its ceiling is per GPU and is that same peak: no fraction."""
    assert core.per_gpu_number(book.figure("appA_peak_bw_K10")) == 160.0
    assert core.BookCell.of("appA_peak_bw_K10").fraction is None
    assert core.BookCell.of("appA_peak_bw_C870").fraction == pytest.approx(76.8 / book.figure("ch2_tab2_1_copy_eccoff_C870").number)
    assert "K10, 1%" not in render.book_text(core.Row("peak", core.cells("appA_peak_bw_*")))


def test_the_simulator_column_holds_no_time_rate_or_speed_up():
    rows = [core.Row("a time", here=2.7e9, unit="us"), core.Row("a rate", here=3.5e-5, unit="GB/s (simulator)"),
            core.Row("a speed-up", here=1.56, unit="x"), core.Row("an error", here=1e-7, unit="abs"), core.Row("a count", here=1024, unit="threads")]
    shown = [render.here_text(row, simulated=True) for row in rows]
    assert shown == ["not measured in the simulator"] * 3 + ["1.000e-07", "1024"]
    assert [render.here_text(row, simulated=False) for row in rows][:3] == ["2.700e+09", "3.500e-05", "1.56"]


def test_book_cells_carry_the_fraction_of_their_gpus_ceiling():
    k20 = core.BookCell.of("ch2_tab2_1_copy_eccon_K20")
    assert k20.fraction == pytest.approx(1.0) and k20.gpu == "Tesla K20" and k20.text == "145 GB/s"
    naive = core.BookCell.of("ch3_transpose_transposeNaive_C2050")
    assert naive.fraction == pytest.approx(18.5 / 107)  # over the C2050's best copy, ECC on (Table 2.1)
    assert core.BookCell.of("ch6_laplace_global_kernel_K20").fraction is None  # a time has no bandwidth fraction
    assert core.book_copy_ceiling("Tesla K10 (each of 2 GPUs)")[0] == book.figure("ch2_peakbw_K10").number
    assert core.book_copy_ceiling("Tesla K20X") is None
    assert [c.id for c in core.cells("ch1_ptx_increment_*")] == [f.id for f in book.figures("ch1_ptx_increment_")]


def _synthetic() -> thenandnow.Report:
    row = core.Row("copy | kernel", core.cells("ch2_tab2_1_copy_eccon_K20"), 2757.3, "GB/s", 0.914, anchor="cudaMemcpy", note="n = 64 Mi")
    chapter = core.ChapterResult(2, "Metrics", [core.Section("Copies", [row, core.Row("no book figure", here=1.2e-6, unit="s")], ["a note"])])
    return thenandnow.Report({"device": "Test GPU", "simulated": False, "date": "today"}, [chapter])


def test_markdown_and_html_carry_every_row(tmp_path):
    report = _synthetic()
    markdown = render.to_markdown(report.meta, report.chapters, ["ch9_x"], {"a reason": ["ch2_a", "ch2_b"]})
    assert "| copy \\| kernel | 145 GB/s (K20, 100% of its copy) | 2757 | GB/s | 91% | cudaMemcpy | n = 64 Mi |" in markdown
    assert "1.200e-06" in markdown and "not measured and not explained**: ch9_x" in markdown and "a reason: 2 figure(s)" in markdown
    page = render.to_html(report.meta, report.chapters, [], {})
    # two metadata rows (device, date), then the section: a header row and two rows
    assert page.count("<tr>") == 2 + 3 and "145 GB/s (K20, 100% of its copy)" in page and "SIMULATOR" not in page
    simulated = thenandnow.Report({**report.meta, "simulated": True}, report.chapters)
    assert html.escape(render.SIMULATOR_WARNING) in render.to_html(simulated.meta, simulated.chapters, [], {})
    assert report.figure_ids() == {"ch2_tab2_1_copy_eccon_K20"}


def test_a_report_of_one_chapter_replaces_that_chapter_only(tmp_path):
    """A partial run merges by chapter: the chapters it did not run stay, each naming the run it comes from."""
    whole = _synthetic()
    whole.meta.update(device="GPU A", date="2026-01-01 10:00")
    whole.chapters.append(core.ChapterResult(7, "FFT", [core.Section("Plans", [core.Row("a plan", here=3.0, unit="ms")])], 9.0))
    thenandnow.write(whole, tmp_path)
    again = core.ChapterResult(7, "FFT", [core.Section("Plans", [core.Row("a plan", here=2.0, unit="ms")])], 8.0)
    part = thenandnow.Report({**whole.meta, "device": "GPU B", "date": "2026-02-02 11:00"}, [again])
    paths = thenandnow.write(part, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert [(c["number"], c["recorded"]["device"]) for c in data["chapters"]] == [(2, "GPU A"), (7, "GPU B")]
    assert data["chapters"][1]["sections"][0]["rows"][0]["here"] == 2.0
    markdown = paths["md"].read_text()
    assert "GPU A (chapter 2) and GPU B (chapter 7)" in markdown and "*0 s on GPU A, 2026-01-01 10:00*" in markdown
    assert "| copy \\| kernel |" in markdown and "*8 s on GPU B, 2026-02-02 11:00*" in markdown
    page = paths["html"].read_text()
    assert page.count("<h2 id='ch2'>") == 1 and page.count("<h2 id='ch7'>") == 1 and "145 GB/s (K20" in page
    other = tmp_path / "filed"
    thenandnow.write(whole, other)
    thenandnow.file_into(tmp_path, other)  # a record's report filed beside the others: the same merge
    assert json.loads((other / "report.json").read_text())["chapters"][1]["recorded"]["device"] == "GPU B"
    assert [c["number"] for c in json.loads(thenandnow.write(part, tmp_path / "alone", merge=False)["json"].read_text())["chapters"]] == [7]


def test_unknown_chapters_are_refused():
    with pytest.raises(ValueError, match="no report part for chapter"):
        thenandnow.run(only=[42], progress=False)


@pytest.fixture(scope="module")
def whole_report(tmp_path_factory):
    """The whole report, once: tiny sizes in the simulator, the real thing on a GPU."""
    out = tmp_path_factory.mktemp("report")
    report = thenandnow.run(repeat=None, progress=False)
    if os.environ.get("GPU_CI_REPORT"):  # tools/gpu_ci.py: this whole report is also the one its record keeps
        thenandnow.write(report, os.environ["GPU_CI_REPORT"])
    return report, thenandnow.write(report, out)


def test_a_whole_run_writes_the_report(whole_report):
    report, paths = whole_report
    assert [c.number for c in report.chapters] == sorted(thenandnow.chapters())
    assert all(c.error is None for c in report.chapters), [(c.number, c.error) for c in report.chapters if c.error]
    data = json.loads(paths["json"].read_text())
    assert data["meta"]["simulated"] == mode.is_simulator() and len(report.rows()) > 100
    page = paths["html"].read_text()
    assert (html.escape(render.SIMULATOR_WARNING) in page) == mode.is_simulator()
    assert "Chapter 6: Finite differences" in paths["md"].read_text()
    if mode.on_gpu():  # beyond the L2 cache nothing may pass a measured ceiling
        assert all(r.here_fraction is None or r.here_fraction <= 1.0 for r in report.rows()), \
            [r.quantity for r in report.rows() if r.here_fraction and r.here_fraction > 1]


def test_every_book_figure_has_a_row_or_a_reason(whole_report):
    report, _ = whole_report
    unexplained, explained = thenandnow.coverage(report.figure_ids())
    covered_chapters = {f"ch{n}_" for n in thenandnow.chapters()} | {"appA_", "appB_", "appC_", "art00"}
    mine = [figure_id for figure_id in unexplained if figure_id.startswith(tuple(covered_chapters))]
    assert mine == [], f"{len(mine)} book figures have neither a row nor a reason: {mine[:20]}"
    assert all(reason and ids for reason, ids in explained.items())
