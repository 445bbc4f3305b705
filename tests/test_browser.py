"""The course in a real browser: JupyterLab on localhost, driven by Playwright in Debian's headless Chromium.

Three visits, each saving screenshots (GPUCOURSE_SCREENSHOTS, default build/screenshots/):
- `./course lab` opens on the first notebook of the course (as root too, as in CI and many containers);
- a chapter notebook runs with Run All: no cell errors, the banner, plots and the block-size tuner
  render, and moving its slider re-measures (the plot and the reported GB/s change);
- an exercise notebook with a typical wrong answer typed in: the check shows its message, short.

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
        page.screenshot(path=SHOTS / "lab_first_notebook.png")
        log = (tmp_path / "lab.log").read_text()
        assert f"/lab/tree/{first}?token=" in log, log[-2000:]  # the URL printed for a browser elsewhere opens it too
        if os.geteuid() == 0:
            assert "starting JupyterLab with --allow-root" in log, log[-2000:]
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
    before = (readout.inner_text(), image.get_attribute("src"), gbs(text.inner_text()))
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
            arg=[text.element_handle(), shown[1], f"'threads_per_block': {readout.inner_text().strip()}"], timeout=120_000)
        after = (readout.inner_text(), image.get_attribute("src"), gbs(text.inner_text()))
        if after[2] != before[2]:
            break
    assert after[0] != before[0] and f"'threads_per_block': {after[0]}" in text.inner_text()
    assert after[1] != before[1], "the plot did not change"
    assert after[2] != before[2], "the reported GB/s did not change"
    tuner.screenshot(path=SHOTS / "tuner_after_slider.png")


def gbs(text: str) -> str:
    """The GB/s the tuner's text line reports."""
    found = re.search(r"\}: ([0-9.e+-]+) GB/s", text)
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
