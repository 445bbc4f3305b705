"""The course as a website (book/build.py): built from executed notebooks, every chapter page there, no broken link.

The site is built once, as `./course site` does (each chapter notebook executed here, in this
machine's mode), then again from a folder of executed notebooks, as from a recorded GPU run.
Jupyter Book 2 needs Node.js: outside CI a machine without it skips these tests; in CI it fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "build.py")
site = importlib.util.module_from_spec(spec)
sys.modules["book_build"] = site
spec.loader.exec_module(site)


def need_node():
    missing = []
    if shutil.which("node") is None:
        missing.append("Node.js (Debian's nodejs package; .ci/run installs it)")
    if not (Path(sys.executable).parent / "jupyter-book").exists():
        missing.append("jupyter-book (the dev extra)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail("the website needs " + " and ".join(missing))
        pytest.skip("the website needs " + " and ".join(missing))


def build_site(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "book" / "build.py"), "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=3000)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    need_node()
    out = tmp_path_factory.mktemp("site") / "html"
    done = build_site(out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "every internal link checked" in done.stdout
    return out


def test_every_chapter_notebook_has_its_page_with_outputs(built):
    pages = json.loads((built / "pages.json").read_text())
    book = site.chapters()
    assert book and all(notebooks for _, notebooks in book)
    for chapter, notebooks in book:
        for notebook in notebooks:
            location = f"/chapters/{chapter.name}/{notebook.name}"
            assert location in pages, f"no page for {location}"
            page = (built / pages[location]).read_text()
            words = re.findall(r"[A-Za-z]{4,}", site.notebook_title(notebook))[:4]
            assert words and all(word in page for word in words), f"{location}: the page does not carry the notebook's title"
            assert 'class="outputs"' in page, f"{location}: the page shows no outputs (not executed?)"
            assert "SIMULATOR MODE" in page or "GPU MODE" in page  # the banner cell's output
    index = (built / "index.html").read_text()
    for chapter, _ in book:
        assert site.chapter_title(chapter) in index  # the sidebar and the landing page list every chapter
    assert "then and now" in index.lower() and (built / pages["/then_and_now.md"]).exists()
    assert any(p.suffix == ".png" for p in built.iterdir())  # the plots


def test_the_built_site_has_no_broken_internal_link(built):
    assert site.broken_links(built) == []
    assert len(list(built.glob("*.html"))) >= sum(len(n) for _, n in site.chapters()) + 2


def test_link_check_reports_broken_files_and_anchors(tmp_path):
    (tmp_path / "index.html").write_text('<a href="a.html#there">ok</a><a href="missing.html">x</a><img src="plot.png">'
                                         '<a href="a.html#nowhere">y</a><a href="https://example.org/x">external</a>'
                                         '<a href="#top">self</a><p id="top"></p>')
    (tmp_path / "a.html").write_text('<h2 id="there">A</h2><a href="../outside.html">up</a>')
    assert sorted(site.broken_links(tmp_path)) == [
        "a.html: ../outside.html (no such file)",
        "index.html: a.html#nowhere (no such anchor)",
        "index.html: missing.html (no such file)",
        "index.html: plot.png (no such file)",
    ]


def test_builds_from_a_folder_of_executed_notebooks(built, tmp_path):
    """A later GPU run supplies executed notebooks laid out as chapters/: the site is built from them as they are."""
    recorded = tmp_path / "recorded"
    shutil.copytree(site.BUILD / "executed", recorded)
    first_chapter, notebooks = site.chapters()[0]
    copy = recorded / first_chapter.name / notebooks[0].name
    notebook = json.loads(copy.read_text())
    marker = "output recorded on another machine"
    notebook["cells"][[c["cell_type"] for c in notebook["cells"]].index("code")]["outputs"].append(
        {"output_type": "stream", "name": "stdout", "text": marker})
    copy.write_text(json.dumps(notebook))
    out = tmp_path / "html"
    done = build_site(out, "--executed", str(recorded))
    assert done.returncode == 0, done.stderr[-3000:]
    pages = json.loads((out / "pages.json").read_text())
    assert marker in (out / pages[f"/chapters/{first_chapter.name}/{notebooks[0].name}"]).read_text()


def test_a_folder_of_executed_notebooks_must_match_the_chapters(built, tmp_path):
    recorded = tmp_path / "recorded"
    shutil.copytree(site.BUILD / "executed", recorded)
    (first_chapter, notebooks), (last_chapter, last) = site.chapters()[0], site.chapters()[-1]
    (recorded / last_chapter.name / last[-1].name).unlink()
    stale = recorded / first_chapter.name / notebooks[0].name
    notebook = json.loads(stale.read_text())
    next(c for c in notebook["cells"] if c["cell_type"] == "code")["source"] = "print('older code')"
    stale.write_text(json.dumps(notebook))
    problems = site.check_executed(recorded)
    assert len(problems) == 2
    assert "is missing" in problems[-1] and last[-1].name in problems[-1]
    assert "other code" in problems[0] and notebooks[0].name in problems[0]
    done = build_site(tmp_path / "html", "--executed", str(recorded))
    assert done.returncode == 1 and "do not match chapters/" in done.stderr


def test_files_that_pages_link_to_are_published_with_them(tmp_path):
    """A link from a page to a repository file that is no page (a script, a log, a screenshot) works on the site too."""
    root, stage = tmp_path / "repo", tmp_path / "stage"
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "gpu_run.py").write_text("print('measured')\n")
    for folder in (root, stage):
        (folder / "chapters" / "01_x").mkdir(parents=True)
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": [
        "The script [gpu_run.py](../../tools/gpu_run.py), a [missing file](nothing.png), `[code](../../tools/gpu_run.py)`."]}]}
    (stage / "chapters" / "01_x" / "01_a.ipynb").write_text(json.dumps(notebook))
    (stage / "index.md").write_text("See [the script](tools/gpu_run.py) and [the web](https://example.org/a.py).")
    copied = site.copy_linked_files(stage, root)
    assert copied == [stage / "tools" / "gpu_run.py"] and (stage / "tools" / "gpu_run.py").read_text() == "print('measured')\n"
