"""The course in a real browser: JupyterLab on localhost and the website, driven by Playwright in Debian's headless Chromium.

Four visits, each saving screenshots (GPUCOURSE_SCREENSHOTS, default build/screenshots/):
- `./course lab` opens on the first notebook of the course (as root too, as in CI and many containers),
  without nbgrader's instructor tools (its menu, sidebar and Validate button);
- a chapter notebook runs with Run All: no cell errors, the banner, plots and the block-size tuner
  render, no output shows a simulated rate or verdict (in the simulator), moving its slider
  re-measures (the plot and the reported figure change), and its sweep button says what it did;
- an exercise notebook with a typical wrong answer typed in: the check shows its message, short;
- the website as `./course site` builds it from a recorded GPU run (a fixture): chapter pages show the
  record's GPU outputs and say so, the then-and-now page shows the recorded report, and no table runs
  off the right edge of a page (the README page, chapter 7's record, the report).

Chromium comes from Debian (`.ci/run` installs it); Playwright never downloads a browser. Outside CI a
machine without Chromium skips these tests; in CI (CI=true) a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from test_site import build_site, make_records, need_node, simulator_problems, site

import gpucourse

CHROMIUM = Path(os.environ.get("GPUCOURSE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]
CHAPTER = ROOT / "chapters" / "02_metrics" / "03_bandwidth.ipynb"  # banner, plots, the block-size tuner and the roofline widget
EXERCISE = ROOT / "exercises" / "ch01_introduction.ipynb"
SHOTS = Path(os.environ.get("GPUCOURSE_SCREENSHOTS", ROOT / "build" / "screenshots"))
# JupyterLab settings for the visits: every cell in the page (no windowing), no autosave, no news fetched.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def need_browser():
    missing = [] if CHROMIUM.exists() else [f"{CHROMIUM} (Debian's chromium package)"]
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (the dev extra)")
    if missing:
        message = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run installs it")
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server on 127.0.0.1 with a token, started by `command`, its log in a file."""

    def __init__(self, command: list[str], cwd: Path, log: Path, settings: Path):
        self.port, self.token = free_port(), secrets.token_hex(16)
        settings.mkdir(parents=True, exist_ok=True)
        for name, values in LAB_SETTINGS.items():
            (settings / name).parent.mkdir(parents=True, exist_ok=True)
            (settings / name).write_text(json.dumps(values))
        args = ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", f"--IdentityProvider.token={self.token}",
                f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={settings / 'workspaces'}"]
        env = {**os.environ, "JUPYTER_PLATFORM_DIRS": "1"}  # the kernels inherit GPUCOURSE_MODE, if set
        self.log = log
        self.process = subprocess.Popen([*command, *args], cwd=cwd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + 120
        while "is running at" not in log.read_text() and "http://127.0.0.1" not in log.read_text():
            assert self.process.poll() is None, f"JupyterLab exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"JupyterLab did not start: {log.read_text()[-3000:]}"
            time.sleep(0.5)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def browser():
    need_browser()
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a folder holding copies of the chapter and exercise notebooks (nothing is saved into the repository)."""
    need_browser()
    folder = tmp_path_factory.mktemp("lab")
    shutil.copy(CHAPTER, folder)
    shutil.copy(EXERCISE, folder)
    root = ["--allow-root"] if os.geteuid() == 0 else []
    server = Lab([str(Path(sys.executable).parent / "jupyter"), "lab", *root], folder, folder / "lab.log", folder / "settings")
    yield server, folder
    server.stop()


def open_notebook(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(state="visible", timeout=120_000)
    wait_idle(page, 120)
    return page


def wait_idle(page, timeout_s: float = 600):
    """Wait until the kernel is idle and no cell waits to run ([*])."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        waiting = page.locator(".jp-NotebookPanel:visible .jp-InputPrompt", has_text="*").count()
        # the status bar names the kernel once it is connected ("Python 3 (ipykernel) | Idle"); before, "No Kernel"
        if waiting == 0 and re.search(r"\(ipykernel\) \| Idle", kernel_status(page)):
            return
        time.sleep(1)
    page.screenshot(path=SHOTS / "failed_wait.png")
    raise AssertionError(f"the notebook did not finish running: {kernel_status(page)}")


def kernel_status(page) -> str:
    return " ".join(page.locator(".jp-StatusBar-Widget").all_inner_texts())


def run_all(page):
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    deadline = time.monotonic() + 30
    while "| Busy" not in kernel_status(page) and not page.locator(".jp-NotebookPanel:visible .jp-InputPrompt", has_text="*").count():
        assert time.monotonic() < deadline, f"Run All Cells started nothing: {kernel_status(page)}"
        time.sleep(0.2)
    wait_idle(page)


def save(page, path: Path) -> dict:
    """Save the notebook open in `page` (Ctrl+S) and return it as written to `path`."""
    before = path.stat().st_mtime_ns
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 60
    while path.stat().st_mtime_ns == before:
        assert time.monotonic() < deadline, "the notebook was not saved"
        time.sleep(0.5)
    time.sleep(1)  # let the write finish
    return json.loads(path.read_text())


def test_course_lab_opens_on_the_first_notebook(browser, tmp_path):
    """`./course lab` (root handled) lands on the first notebook of the course."""
    first = sorted(ROOT.glob("chapters/*/*.ipynb"))[0].relative_to(ROOT)
    server = Lab([str(ROOT / "course"), "lab"], ROOT, tmp_path / "lab.log", tmp_path / "settings")
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(server.url(""))  # the server's front page: it sends the browser on to the first notebook
        tab = page.locator(".lm-TabBar-tab.jp-mod-current .lm-TabBar-tabLabel", has_text=first.name)
        tab.wait_for(timeout=120_000)
        page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(state="visible", timeout=60_000)
        wait_idle(page, 120)  # the kernel has started
        page.wait_for_timeout(10_000)  # JupyterLab writes the kernel's language_info a few seconds after it starts
        assert page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() == 0, "the tab turned dirty with no edit"
        page.screenshot(path=SHOTS / "lab_first_notebook.png")
        # opened and saved unchanged, the notebook is unchanged in git (the kernel's language_info is stored; ./course lab
        # leaves its Python version out)
        original = (ROOT / first).read_bytes()
        try:
            save(page, ROOT / first)
            assert (ROOT / first).read_bytes() == original, "opening and saving the notebook changed it"
        finally:
            (ROOT / first).write_bytes(original)
        log = (tmp_path / "lab.log").read_text()
        assert f"/lab/tree/{first}?token=" in log, log[-2000:]  # the URL printed for a browser elsewhere opens it too
        assert "Overriding existing pre_save_hook" not in log, [line for line in log.splitlines() if "pre_save_hook" in line]
        if os.geteuid() == 0:
            assert "starting JupyterLab with --allow-root" in log, log[-2000:]
        # students do not see the instructor's tools: nbgrader's menu, its Create Assignment sidebar, its Validate button
        menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        assert menus and not any("nbgrader" in m.lower() or "formgrader" in m.lower() for m in menus), menus
        assert page.locator("button", has_text=re.compile(r"^\s*Validate\s*$")).count() == 0
        assert page.locator(".lm-TabBar-tab[title*='Create Assignment'], .lm-TabBar-tab[title*='nbgrader']").count() == 0
        assert "nbgrader" not in log.lower(), [line for line in log.splitlines() if "nbgrader" in line.lower()]
    finally:
        server.stop()


def test_chapter_notebook_runs_and_its_widget_reacts(browser, lab):
    server, folder = lab
    page = open_notebook(browser, server.url(f"lab/tree/{CHAPTER.name}"))
    run_all(page)
    notebook = save(page, folder / CHAPTER.name)  # the copy in the temporary folder: which cells ran, whether any failed
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert all(cell["execution_count"] for cell in code), "Run All stopped before the last cell"
    errors = [out for cell in code for out in cell["outputs"] if out["output_type"] == "error"]
    assert errors == [], f"{errors[0]['ename']}: {errors[0]['evalue']}" if errors else ""
    stderr = [out["text"] for cell in code for out in cell["outputs"] if out.get("name") == "stderr" and "DELIM" in "".join(out["text"])]
    assert stderr == []  # the kernel's shell channel kept every message whole
    figures = [text for cell in code for out in cell["outputs"] for text in [(out.get("data") or {}).get("text/plain", "")]
               if "".join(text).startswith("<Figure: ")]
    assert len(figures) >= 3, "the figures do not say what they show"
    if gpucourse.is_simulator():  # no 0 GB/s, no rate of Python threads, no verdict, no GB/s axis from simulated times
        assert simulator_problems(notebook) == []
        assert all("y: effective bandwidth" not in "".join(text) for text in figures)
        assert sum("not measured in the simulator" in "".join(text) for text in figures) >= 3

    panel = page.locator(".jp-NotebookPanel:visible")
    banner = "GPU MODE" if os.environ.get("GPUCOURSE_MODE") == "gpu" else "SIMULATOR MODE"
    assert banner in panel.locator(".jp-CodeCell").first.inner_text()  # the banner cell comes first
    assert panel.locator(".jp-OutputArea-output img").count() >= 3  # plots rendered as images
    tuner = panel.locator(".jp-OutputArea-output .widget-vbox", has=page.locator(".widget-label", has_text="threads_per_block")).first
    tuner.scroll_into_view_if_needed()
    assert tuner.locator("button", has_text="sweep threads_per_block").is_visible()
    page.screenshot(path=SHOTS / "chapter_run_all.png", full_page=False)

    readout = tuner.locator(".widget-readout").first
    image = tuner.locator(".widget-output img")
    text = tuner.locator(".widget-output")
    before = (readout.inner_text(), image.get_attribute("src"), figure(text.inner_text()))
    handle = tuner.locator(".noUi-handle").first
    after = before
    for _ in range(3):  # one step right; again if the simulator happened to report the same GB/s to 3 digits
        shown = after
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("([el, old]) => el.innerText.trim() !== old", arg=[readout.element_handle(), shown[0]])
        # the redraw shows the plot first and prints its line after it: wait for both, the line naming the new value
        page.wait_for_function(
            "([el, old, line]) => { const i = el.querySelector('img'); return i && i.src !== old && el.innerText.includes(line); }",
            arg=[text.element_handle(), shown[1], f"threads per block {readout.inner_text().strip()}"], timeout=120_000)
        after = (readout.inner_text(), image.get_attribute("src"), figure(text.inner_text()))
        if after[2] != before[2]:
            break
    assert after[0] != before[0] and f"threads per block {after[0]}" in text.inner_text() and "{" not in text.inner_text()
    assert after[1] != before[1], "the plot did not change"
    assert after[2] != before[2], "the reported figure did not change"
    tuner.screenshot(path=SHOTS / "tuner_after_slider.png")

    # the sweep button says what it did, also when every value was measured already
    sweep = tuner.locator("button", has_text="sweep threads_per_block")
    sweep.click()
    page.wait_for_function("el => el.innerText.includes('sweep of threads per block:')", arg=text.element_handle(), timeout=600_000)
    sweep.click()
    page.wait_for_function("el => el.innerText.includes('were measured before (cached)')", arg=text.element_handle(), timeout=120_000)


def figure(text: str) -> str:
    """What the tuner's text line reports: its GB/s on a GPU; in the simulator its time (it gives no GB/s there)."""
    found = re.search(r"threads per block \d+[^:]*: ([0-9.e+-]+) GB/s", text) or \
        re.search(r"threads per block \d+[^:]*: ([0-9.e+-]+) ms of simulator wall clock; GB/s not measured", text)
    assert found, text
    return found.group(1)


WRONG_ADD = '''@cuda.jit
def add_kernel(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def add_arrays(out, x, y, threads_per_block=64):
    add_kernel[out.size // threads_per_block, threads_per_block](out, x, y)'''


def test_exercise_wrong_answer_gets_the_check_message(browser, lab):
    server, _ = lab
    page = open_notebook(browser, server.url(f"lab/tree/{EXERCISE.name}"))
    panel = page.locator(".jp-NotebookPanel:visible")
    answer = panel.locator(".jp-CodeCell", has_text="raise NotImplementedError").first
    answer.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(WRONG_ADD)  # as typed, without the editor's auto-indent and bracket closing
    page.keyboard.press("Escape")
    run_all(page)  # runs up to the first failing cell: the check of exercise 1.1
    check = panel.locator(".jp-CodeCell", has_text="ch1.check_add_arrays(add_arrays)")
    output = check.locator(".jp-OutputArea-output").first
    output.wait_for(timeout=60_000)
    text = output.inner_text()
    assert "The number of blocks must be rounded up" in text, text
    assert "gpucourse" not in text and "Traceback" not in text and len(text.splitlines()) <= 4, text  # the message alone
    assert "ch1.check_add_arrays(add_arrays)" in text  # ... and the student's own line
    check.scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "exercise_wrong_answer.png")


# -- the website ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def recorded_site(tmp_path_factory):
    """The site as `./course site` builds it when a GPU run is recorded: a fixture record made of this machine's executed copies."""
    need_browser()
    need_node()
    folder = tmp_path_factory.mktemp("recorded")
    site.executed_here(2, 600)  # the executed copies (reused when current): the fixture record is made of them
    records = make_records(folder / "measurements", site.BUILD / "executed")
    out = folder / "html"
    done = build_site(out, "--records", str(records))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, json.loads((out / "pages.json").read_text())


def overflow(page) -> list[str]:
    """Tables and code blocks of the page whose box runs past the right edge of the window or of the page's text column."""
    return page.evaluate("""() => {
        const right = Math.min(window.innerWidth, document.querySelector('main').getBoundingClientRect().right) + 1;
        const out = [];
        for (const el of document.querySelectorAll('main table, main pre, main .table-wrap, main .output')) {
            let box = el.getBoundingClientRect(), clip = el.parentElement;
            while (clip && clip.tagName !== 'MAIN') {  // a scrolling container keeps its content inside it
                const style = getComputedStyle(clip);
                if (['auto', 'scroll', 'hidden'].includes(style.overflowX)) { box = clip.getBoundingClientRect(); break; }
                clip = clip.parentElement;
            }
            if (box.right > right) out.push(el.tagName + ' ' + (el.innerText || '').slice(0, 60));
        }
        if (document.documentElement.scrollWidth > window.innerWidth + 1) out.push('the page scrolls sideways');
        return out;
    }""")


def test_the_site_shows_the_recorded_gpu_run_and_keeps_tables_inside(browser, recorded_site):
    from test_site import GPU_MARKER

    out, pages = recorded_site
    first_chapter, notebooks = site.chapters()[0]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / pages[f"/chapters/{first_chapter.name}/{notebooks[0].name}"]).as_uri())
    note = page.locator("aside.admonition", has_text="Outputs recorded on a GPU")
    assert note.count() == 1 and "NVIDIA H200, driver 570.124.06, 2026-11-25" in note.inner_text()
    assert page.locator("pre.output", has_text=GPU_MARKER).first.is_visible()
    assert "SIMULATOR MODE" not in page.locator("main").inner_text()
    page.screenshot(path=SHOTS / "site_chapter_gpu_record.png")
    for location in ("/then_and_now.md", "/index.md", "/measurements/ch7.md"):  # index.md: the README page
        name = pages[location]
        for width in (800, 1280):  # the narrow layout (the sidebar on top) and the wide one
            page.set_viewport_size({"width": width, "height": 900})
            page.goto((out / name).as_uri())
            assert overflow(page) == [], f"{location} at {width} px"
        page.locator("main table").first.scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / f"site_{Path(location).stem}.png")
    page.goto((out / pages["/then_and_now.md"]).as_uri())
    text = page.locator("main").inner_text()
    assert "No report is recorded yet" not in text and "recorded on NVIDIA H200" in text and "4312" in text
    # no printed line is cut: every output box wraps its lines (pages with long printed sentences: 3.4, 4.5, 7.1)
    page.set_viewport_size({"width": 1280, "height": 900})
    for source in ("03_optimization/04_transpose.ipynb", "04_multi_gpu/05_domain_decomposition.ipynb", "07_fft/01_cufft.ipynb"):
        if f"/chapters/{source}" not in pages:
            continue
        page.goto((out / pages[f"/chapters/{source}"]).as_uri())
        cut = page.evaluate("""() => [...document.querySelectorAll('main pre.output, main pre.code')]
            .filter(el => el.scrollWidth > el.clientWidth + 1).map(el => el.innerText.slice(0, 60))""")
        assert cut == [], f"{source}: lines cut in {len(cut)} box(es): {cut[:3]}"
    # the sidebar: the course and one Records page, at most 52 links; the records are reached from its table
    page.goto((out / "index.html").as_uri())
    assert page.locator("nav.sidebar a").count() <= 52
    page.locator("nav.sidebar a", has_text="Records").first.click()
    page.wait_for_load_state()
    assert page.locator("main table th", has_text="GPU").count() == 1 and page.locator("main table tr").count() > 10
    page.close()


def test_the_site_reads_as_a_course_not_as_internals(browser, recorded_site):
    """No widget repr, no Numba warning, plots described without a simulated GB/s axis, records as pages, proper part titles."""
    out, pages = recorded_site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / pages[f"/chapters/{CHAPTER.parent.name}/{CHAPTER.name}"]).as_uri())  # 2.3: the tuner, the roofline, sweeps
    text = page.locator("main").inner_text()
    assert not re.search(r"\b(?:V|H)Box\(children=|NumbaPerformanceWarning", text)
    assert page.locator(".widget-note", has_text="runs when the notebook is open in JupyterLab").count() >= 2  # the tuner, the roofline
    described = [alt for alt in page.locator("main img.output").evaluate_all("els => els.map(e => e.alt)") if alt.startswith("Figure: ")]
    assert len(described) >= 3
    if gpucourse.is_simulator():  # the fixture record holds this machine's outputs: simulator plots have no GB/s axis
        assert not [alt for alt in described if re.search(r"y: [^;)]*(?:GB/s|GFLOP/s)", alt)]
        assert sum("not measured in the simulator" in alt for alt in described) >= 3
    nav = page.locator("nav.sidebar").inner_text()
    assert "Multi-GPU" in nav and "Monte Carlo" in nav and "FFT" in nav and not re.search(r"Multi gpu|Monte carlo|\bFft\b", nav)
    page.screenshot(path=SHOTS / "site_chapter_2_3.png")
    page.goto((out / "index.html").as_uri())  # the README page links to a GPU CI record and to the report: pages, not raw Markdown
    for link, heading in (("measurements/gpu_ci/2026-11-25_h200/gpu_ci.md", "GPU CI record, 2026-11-25"),
                          ("measurements/thenandnow/report.md", "Then and now")):
        page.goto((out / "index.html").as_uri())
        page.locator("main a", has_text=link).first.click()  # the README names the file; the site links its page
        page.wait_for_load_state()
        assert page.url.endswith(".html") and page.locator("main h1").first.inner_text().startswith(heading), page.url
        assert not page.locator("main").inner_text().lstrip().startswith("#")
    page.screenshot(path=SHOTS / "site_gpu_ci_record.png")
    titles = []
    for name in sorted(set(pages.values())):
        page.goto((out / name).as_uri())
        titles.append(page.locator("main h1").first.inner_text())
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    page.close()
