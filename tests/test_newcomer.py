"""What a newcomer sees: numbers never shown as 0.0, simulated rates and conclusions said to be unmeasured, a busy sign
while a widget measures, whole button labels, integer ticks for integer parameters, no roof from the simulator, a failed
check as its message, and `./course --help` that exits 0."""

from __future__ import annotations

import asyncio
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402  (after gpucourse: it picks the mode)

import gpucourse  # noqa: E402
from gpucourse import roofline, widgets  # noqa: E402
from gpucourse.checks import CheckFailed, ch1, short_traceback  # noqa: E402
from gpucourse.report import number  # noqa: E402
from gpucourse.timing import Timing  # noqa: E402


@pytest.mark.parametrize(("value", "text"), [(1.234e-5, "1.23e-05"), (0.0042, "4.20e-03"), (0.5, "0.5"), (12.345, "12.3"),
                                             (3004.4, "3004"), (0.0, "0"), (-2.5e-7, "-2.50e-07")])
def test_numbers_keep_their_digits(value, text):
    assert number(value) == text


def fake_timing(ms: float) -> Timing:
    return Timing(samples_ms=(ms,), calls_per_sample=1, clock="test")


def test_tuner_line_shows_a_tiny_rate_as_it_is():
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1.0, {"threads_per_block": [32]})
    line = tuner.describe(widgets.Measurement((("threads_per_block", 32),), fake_timing(80.0), 1000.0))
    assert ": 1.25e-05 GB/s" in line and "0.0 GB/s" not in line


def test_simulated_rates_and_conclusions_are_said_to_be_unmeasured():
    """In the simulator a line shows the time, labelled, and says which rate or conclusion it does not give: never '0.0 GB/s'."""
    simulated = Timing(samples_ms=(80.0,), calls_per_sample=1, clock="simulator wall clock")
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1.0, {"threads_per_block": [32]})
    line = tuner.describe(widgets.Measurement((("threads_per_block", 32),), simulated, 1000.0))
    assert line == "kernel, threads per block 32: 80 ms of simulator wall clock; GB/s not measured in the simulator"
    assert gpucourse.rate(3.5e-05, simulated=True) == "GB/s not measured in the simulator"
    assert gpucourse.rate(912.34, "GFLOP/s", simulated=False) == "912 GFLOP/s" and gpucourse.rate(None, simulated=False) == "—"
    assert gpucourse.finding("padding makes it 1.9x faster", "what padding gains", simulated=False) == "padding makes it 1.9x faster"
    assert gpucourse.finding("padding makes it 0.2x faster", "what padding gains", simulated=True) == \
        "what padding gains: not measured in the simulator"
    assert [gpucourse.data_size(n) for n in (512, 2048, 3 * 2**19, 64 * 2**20, 6.4 * 2**30)] == ["512 B", "2 KiB", "1.5 MiB", "64 MiB", "6.4 GiB"]


def test_course_help_exits_zero_and_a_wrong_command_two():
    import subprocess

    from conftest import ROOT

    for argument in ("--help", "-h", "help"):
        done = subprocess.run([str(ROOT / "course"), argument], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "usage: ./course lab" in done.stdout and "./course site" in done.stdout, done
    wrong = subprocess.run([str(ROOT / "course"), "labb"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "unknown command: labb" in wrong.stderr and wrong.stdout == ""


def test_widget_shows_a_busy_sign_while_it_measures_and_keeps_its_button_label_whole():
    seen = []
    box = None

    def make_call(threads_per_block):
        if box is not None:
            seen.append(box.tuner_status.value)  # what the widget shows while this configuration is measured
        return lambda: None

    tuner = widgets.Tuner(make_call, 1e6, {"threads_per_block": [32, 64, 96]}, repeat=1, warmup=0)
    box = tuner.widget()
    assert box.tuner_status.value == ""
    box.tuner_controls["threads_per_block"].value = 64
    assert len(seen) == 1 and "measuring" in seen[0] and "threads_per_block = 64" in seen[0]
    assert box.tuner_status.value == ""  # gone once the plot is there
    box.tuner_controls["threads_per_block"].value = 32  # cached: no measurement, no sign
    assert len(seen) == 1
    assert box.tuner_sweep.description == "sweep threads_per_block" and box.tuner_sweep.layout.width == "auto"
    box.tuner_sweep.click()
    assert any("every threads_per_block" in text for text in seen) and box.tuner_status.value == ""
    plt.close("all")


def test_integer_parameters_get_integer_ticks():
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1e6, {"streams": [1, 2, 3, 4]}, repeat=1, warmup=0)
    tuner.sweep("streams")
    ax = tuner.plot("streams")
    assert list(ax.get_xticks()) == [1, 2, 3, 4]
    many = widgets.Tuner(lambda **c: (lambda: None), 1e6, {"blocks": list(range(1, 15))}, repeat=1, warmup=0)
    many.sweep("blocks")
    ticks = many.plot("blocks").get_xticks()
    assert all(float(t).is_integer() for t in ticks)
    plt.close("all")


def test_simulator_roofs_give_no_fraction():
    point = roofline.RooflinePoint("k", flops=4e9, bytes_moved=1e9, ms=1.0)  # 4000 GFLOP/s at 4 flop/byte
    simulated = roofline.Roof(bandwidth_gbs=100.0, compute_gflops=1000.0, simulated=True)
    text = roofline.describe_point(point, simulated)
    assert "%" not in text and "GFLOP/s not measured in the simulator" in text and "4000" not in text
    if not gpucourse.is_simulator():
        real = roofline.Roof(bandwidth_gbs=2000.0, compute_gflops=50000.0)
        assert "50% of the roof" in roofline.describe_point(point, real)


@cuda.jit
def add_kernel(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def test_a_failed_check_reads_as_its_message_and_the_calling_line():
    def add_arrays(out, x, y, threads_per_block=64):  # a typical wrong answer: the blocks round down
        add_kernel[out.size // threads_per_block, threads_per_block](out, x, y)

    with pytest.raises(CheckFailed) as failure:
        ch1.check_add_arrays(add_arrays)
    lines = short_traceback(failure.value, failure.tb)
    assert lines[0].startswith("\u274c Exercise 1.1: not yet right.") and "rounded up" in lines[0]
    assert len(lines) == 2 and "ch1.check_add_arrays(add_arrays)" in lines[1]  # the student's own line, nothing of gpucourse
    assert sys.modules["gpucourse.checks"].PACKAGE_DIR.name == "gpucourse"


def simulator_axes_problems(ax) -> list[str]:
    """What a simulator plot must not show: a value axis (its label or tick labels), a GB/s or GFLOP/s label, a measured curve."""
    problems = []
    if ax.get_ylabel():
        problems.append(f"a value axis: {ax.get_ylabel()!r}")
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    if any(re.search(r"\d", t) for t in ticks):
        problems.append(f"numbers on the value axis: {ticks}")
    labels = [artist.get_label() for artist in [*ax.lines, *ax.collections, *ax.patches]]
    problems += [f"a rate in a label: {label}" for label in labels if re.search(r"GB/s|GFLOP/s", label)]
    return problems


def test_simulator_plots_show_no_gbs_axis_and_no_measured_curve():
    """2.3's block-rate plot, 3.4's bar chart and a sweep, drawn with simulated values: a note in place of the GB/s axis."""
    from gpucourse import plotting

    fig, ax = plt.subplots()  # a notebook's own plot (2.3's small blocks), marked at its end as the notebooks do
    ax.scatter([128, 256], [2e-5, 4e-5], label="4-byte elements")
    ax.plot([128, 256], [3e-5, 6e-5], label="1.55e-07 billion blocks/s x bytes per block x 2")
    ax.set_yscale("log")
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.legend()
    plotting.mark_simulated(ax, True)
    assert simulator_axes_problems(ax) == [] and ax.get_legend() is None and not ax.lines and not ax.collections
    assert plotting.is_simulator_plot(ax) and ax.texts[0].get_text().startswith("effective bandwidth: not measured in the simulator")
    bars = plotting.bar_bandwidth(["naive", "coalesced", "no bank conflicts"], [3e-5, 1e-5, 2e-5], simulated=True)
    assert simulator_axes_problems(bars) == [] and not bars.patches  # no bar to say which kernel "wins"
    assert [t.get_text() for t in bars.get_xticklabels()] == ["naive", "coalesced", "no bank conflicts"]  # what ran stays
    lines = plotting.plot_bandwidth_lines({"float32": ([0, 1, 2], [1e-5, 2e-5, 1e-5])}, xlabel="offset", simulated=True)
    assert simulator_axes_problems(lines) == [] and lines.get_xlabel() == "offset"
    gpu = plotting.bar_bandwidth(["naive", "padded"], [700.0, 3400.0], simulated=False)  # on a GPU: the bars and their axis
    assert gpu.get_ylabel() == "effective bandwidth (GB/s)" and len(gpu.patches) == 2
    _, ax = plt.subplots()
    ax.loglog([8, 16], [1e-3, 1e-5], label="spectral")
    plotting.mark_simulated(ax, True, measured=False)  # an accuracy plot: its data are the simulator's real results
    assert len(ax.lines) == 1 and plotting.is_simulator_plot(ax)
    plt.close("all")


def test_the_simulator_tuner_plot_marks_the_configurations_that_ran():
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1e6, {"threads_per_block": [32, 64, 128]}, repeat=1, warmup=0)
    tuner.sweep("threads_per_block")
    ax = tuner.plot("threads_per_block", highlight={"threads_per_block": 64})
    if gpucourse.is_simulator():
        assert simulator_axes_problems(ax) == []
        assert [list(line.get_xdata()) for line in ax.get_lines()] == [[32, 64, 128], [64]]  # the dots and the star
    else:
        assert ax.get_ylabel() == "effective bandwidth (GB/s)"
    plt.close("all")


def test_a_widget_opens_where_the_sweep_left_it():
    """3.4: after a sweep at tile 32 the widget opens at tile 32 (on a GPU at the fastest configuration), not at the first tile."""
    speeds = {(8, 32): 2.0, (16, 32): 1.0}  # ms: block_rows 16 is the fastest at tile 32

    def make_call(block_rows, tile):
        return lambda: None

    tuner = widgets.Tuner(make_call, 1e6, {"block_rows": [8, 16], "tile": [16, 32]}, repeat=1, warmup=0)
    assert tuner.opening_config() == {"block_rows": 8, "tile": 16}  # nothing measured: the first values
    for rows in (8, 16):
        key = (("block_rows", rows), ("tile", 32))
        tuner.cache[key] = widgets.Measurement(key, Timing(samples_ms=(speeds[rows, 32],), calls_per_sample=1, clock="CUDA events"), 1e6)
    assert tuner.opening_config() == {"block_rows": 16, "tile": 32}  # the fastest
    simulated = Timing(samples_ms=(1.0,), calls_per_sample=1, clock="simulator wall clock")
    tuner.cache = {key: widgets.Measurement(key, simulated, 1e6) for key in tuner.cache}
    assert tuner.opening_config() == {"block_rows": 8, "tile": 32}  # the sweep's first: no simulated "fastest"
    box = tuner.widget(x_parameter="block_rows")
    assert box.tuner_controls["tile"].value == 32 and box.tuner_controls["block_rows"].value == 8
    plt.close("all")


def test_counts_read_in_the_right_number():
    assert widgets.counted(1, "value") == "1 value" and widgets.counted(3, "value") == "3 values"
    assert widgets.describe_config({"threads_per_block": 256, "variant": "naive"}) == "threads per block 256, variant naive"
    tuner = widgets.Tuner(lambda **c: (lambda: None), 1e6, {"threads_per_block": [32]}, repeat=1, warmup=0)
    tuner.sweep("threads_per_block")
    assert tuner.sweep_summary("threads_per_block", 0) == \
        "sweep of threads per block: the value was measured before (cached), so the plot shows it already"
    assert tuner.sweep_summary("threads_per_block", 1) == "sweep of threads per block: 1 value measured now"


def test_the_sizes_command_fits_a_terminal():
    """`python -m gpucourse sizes --profile T4` printed rows of 290 characters: each row now wraps under 100."""
    import subprocess

    from conftest import ROOT

    done = subprocess.run([sys.executable, "-m", "gpucourse", "sizes", "--profile", "T4"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert any(line.startswith("ch3_transpose ") for line in lines) and "    why: beyond L2" in done.stdout
    assert "    what the size counts: (rows, columns)" in done.stdout


def test_tables_keep_one_number_format():
    from gpucourse.report import Table

    row = [Table._cell(v) for v in (0.5971, 1948.4, 15580.2, 100878.7, 107200.0, 2.7e9, 3.5e-5)]
    assert row == ["0.5971", "1948", "15580", "100879", "107200", "2.700e+09", "3.5e-05"]


def test_the_simulators_thread_ids_read_as_words():
    """1.3's guarded run named the failing thread as `tid=[39, 0, 0] ctaid=[1, 0, 0]`: now 'thread 39 of block 1'."""
    from gpucourse.checks.launches import index_problem

    error = IndexError("tid=[39, 0, 0] ctaid=[1, 0, 0]: index 103 is out of bounds for axis 0 with size 100")
    assert index_problem(error, "HINT") == ("the kernel indexed outside an array (thread 39 of block 1: index 103 is out of bounds "
                                            "for axis 0 with size 100). HINT")
    two_d = IndexError("tid=[3, 2, 0] ctaid=[1, 4, 0]: index 9 is out of bounds")
    assert "thread (3, 2, 0) of block (1, 4, 0)" in index_problem(two_d, "")
    assert index_problem(IndexError("index 5 is out of bounds"), "HINT") == "the kernel indexed outside an array (index 5 is out of bounds). HINT"


def test_opening_and_saving_a_notebook_changes_nothing_in_git():
    """Every notebook is stored as Jupyter writes it, with the language_info a kernel reports (its Python version aside,
    which `./course lab` leaves out when it saves): opening and saving an unchanged notebook is no change in git."""
    import nbformat
    from conftest import ROOT
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    try:
        client.kernel_info()
        reported = client.get_shell_msg(timeout=60)["content"]["language_info"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    expected = {key: value for key, value in reported.items() if key != "version"}
    notebooks = sorted([*ROOT.glob("chapters/*/*.ipynb"), *ROOT.glob("solutions/*.ipynb"), *ROOT.glob("exercises/*.ipynb")])
    assert len(notebooks) > 40
    for path in notebooks:
        text = path.read_text(encoding="utf-8")
        notebook = nbformat.reads(text, as_version=4)
        assert notebook.metadata.get("language_info") == expected, f"{path.relative_to(ROOT)}: {notebook.metadata.get('language_info')}"
    manager = course_contents_manager(ROOT)
    for path in notebooks[:3] + notebooks[-3:]:  # ./course lab's server: opened with the kernel's version, saved without it
        relative = path.relative_to(ROOT).as_posix()
        model = asyncio.run(manager.get(relative))
        assert model["content"]["metadata"]["language_info"] == reported, f"{relative}: JupyterLab would change it on opening"
        original = path.read_bytes()
        try:
            asyncio.run(manager.save({"type": "notebook", "format": "json", "content": model["content"]}, relative))
            assert path.read_bytes() == original, f"{relative} changes on a save"
        finally:
            path.write_bytes(original)


def course_contents_manager(root):
    """The contents manager of `./course lab`'s JupyterLab (the config file `course` writes), serving `root`."""
    import re

    text = (root / "course").read_text()
    config = re.search(r"cat > \"\$dir/jupyter_server_config.py\" <<'PY'\n(.*?)\nPY\n", text, re.S).group(1)
    assert "pre_save_hook" not in config  # set again on every config reload, the server warned "Overriding existing pre_save_hook"
    from traitlets.config import Config

    c = Config()
    names = {"c": c}
    exec(compile(config, "jupyter_server_config.py", "exec"), names)
    return c.ServerApp.contents_manager_class(root_dir=str(root))


def test_running_a_notebook_leaves_git_clean_with_the_course_filter(tmp_path):
    """The clean filter `./course lab` installs: a notebook run and saved (outputs, counts, widgets, the Python version) is
    unchanged to git, so `git pull` takes an update without a conflict."""
    import shutil
    import subprocess

    from conftest import ROOT

    repo = tmp_path / "clone"
    (repo / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "strip_notebook.py", repo / "tools")
    shutil.copy(ROOT / ".gitattributes", repo)
    source = sorted(ROOT.glob("chapters/*/*.ipynb"))[0]
    notebook_path = repo / "chapters" / source.parent.name / source.name
    notebook_path.parent.mkdir(parents=True)
    shutil.copy(source, notebook_path)

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=s", "-c", "user.email=s@x", *args], cwd=repo, check=True,
                              capture_output=True, text=True).stdout

    git("init", "-q")
    subprocess.run([sys.executable, "tools/strip_notebook.py", "--install"], cwd=repo, check=True)
    git("add", ".")
    git("commit", "-qm", "course")
    ran = json.loads(notebook_path.read_text())
    ran["metadata"]["language_info"]["version"] = "3.12.3"
    ran["metadata"]["widgets"] = {"state": {}}
    for count, cell in enumerate(c for c in ran["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = count + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "GPU MODE\n"}]
    notebook_path.write_text(json.dumps(ran, indent=1))
    assert git("diff") == "", "a run notebook differs to git"
    git("add", "-u")  # as README says before a pull: git records the file's new size, and stages nothing
    assert git("status", "--porcelain") == "", "a run notebook shows as changed"
    edited = json.loads(notebook_path.read_text())
    edited["cells"][0]["source"] = "# my note\n"
    notebook_path.write_text(json.dumps(edited))
    assert git("diff", "--name-only").strip() == f"chapters/{source.parent.name}/{source.name}"  # a real edit still shows


def test_the_repository_url_is_in_one_place_and_the_badges_and_docs_read_it():
    """pyproject.toml's [project.urls] Repository is the address the README's Colab and Binder badges and the clone command
    of docs/notebook_services.md use; no placeholder stands in for it."""
    import tomllib

    from conftest import ROOT

    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    path = url.removeprefix("https://github.com/")
    assert url.startswith("https://github.com/") and path.count("/") == 1, url
    readme = (ROOT / "README.md").read_text()
    badges = re.search(r"<!-- badges:begin[^>]*-->\n(.*?)<!-- badges:end -->", readme, re.S).group(1)
    first = sorted(ROOT.glob("chapters/*/*.ipynb"))[0].relative_to(ROOT).as_posix()
    assert f"(https://colab.research.google.com/github/{path}/blob/main/{first})" in badges
    assert f"(https://mybinder.org/v2/gh/{path}/HEAD?labpath={first})" in badges
    services = (ROOT / "docs" / "notebook_services.md").read_text()
    assert f"git clone {url} gpu-course" in services
    everywhere = readme + services
    assert "the repository's URL>" not in everywhere and not [u for u in re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", everywhere)
                                                             if "numba" not in u and "NVIDIA" not in u and u != url]
