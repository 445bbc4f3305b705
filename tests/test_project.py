"""The project's own files: environments that agree, a CLI that runs, notebooks stored clean."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

from conftest import ROOT

import gpucourse
from gpucourse import environment

# Packages that only conda lists (the interpreter, pip and the CUDA version pin), and names that
# differ between PyPI and conda-forge (both sides are read as the conda-forge package's PyPI name).
CONDA_ONLY = {"python", "pip", "cuda-version"}
CONDA_NAME = {"cupy-cuda12x": "cupy", "cupy-cuda13x": "cupy", "playwright-python": "playwright"}


def requirement_name(line: str) -> str:
    name = re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0].lower()
    return CONDA_NAME.get(name, name)


def requirement_pins(line: str) -> str:
    return re.sub(r"^[A-Za-z0-9_.\-]+(\[[^\]]*\])?", "", line.strip()).replace(" ", "")


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def conda_dependencies() -> list[str]:
    """environment.yml's packages, those pip installs into it included (not the course itself)."""
    lines, inside = [], False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.startswith("dependencies:"):
            inside = True
        elif inside and re.match(r"^ +- [^ ]", line) and not line.strip().startswith(("- pip:", "- -e")):
            lines.append(line.split("#")[0].strip()[2:])
    return lines


def binder_requirements() -> list[str]:
    return [line for line in (ROOT / "binder/requirements.txt").read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_environments_list_the_same_packages():
    project = pyproject()
    cpu = project["dependencies"] + project["optional-dependencies"]["dev"]
    gpu = project["optional-dependencies"]["cuda12"]
    assert {requirement_name(r) for r in binder_requirements()} == {requirement_name(r) for r in cpu}
    conda = {requirement_name(r) for r in conda_dependencies()} - CONDA_ONLY
    assert conda == {requirement_name(r) for r in cpu + gpu}
    assert {requirement_name(r) for r in gpu} == {requirement_name(r) for r in project["optional-dependencies"]["cuda13"]}


def test_the_cuda_extras_differ_only_in_the_cuda_major_version():
    # cuda12 and cuda13 ask for the same packages at the same versions; only the CUDA flavour of each differs
    extras = pyproject()["optional-dependencies"]
    for twelve, thirteen in zip(sorted(extras["cuda12"]), sorted(extras["cuda13"]), strict=True):
        assert twelve.replace("12", "13") == thirteen
    assert any(r.startswith("numba-cuda[cu12]") for r in extras["cuda12"]) and any(r.startswith("cupy-cuda12x") for r in extras["cuda12"])
    # environment.yml pins conda's CUDA 12 and takes cupy and numba-cuda at the pip extra's versions
    conda = {requirement_name(r): requirement_pins(r) for r in conda_dependencies()}
    assert "cuda-version=12" in conda_dependencies()
    for line in extras["cuda12"]:
        assert conda[requirement_name(line)] == requirement_pins(line), line


def test_pins_agree():
    pins = {requirement_name(r): requirement_pins(r) for r in pyproject()["dependencies"] + pyproject()["optional-dependencies"]["dev"]}
    for line in binder_requirements() + [r for r in conda_dependencies() if requirement_name(r) in pins]:
        assert requirement_pins(line) == pins[requirement_name(line)], line
    limit = ".".join(map(str, environment.NUMPY_TOO_NEW))
    assert pins["numpy"].endswith(f"<{limit}")


def test_cli_info_and_exercises():
    info = subprocess.run([sys.executable, "-m", "gpucourse", "info", "--no-ceilings"], capture_output=True, text=True, cwd=ROOT)
    assert info.returncode == 0, info.stderr
    assert ("SIMULATOR MODE" if gpucourse.is_simulator() else "GPU MODE") in info.stdout
    check = subprocess.run([sys.executable, "-m", "gpucourse", "exercises", "--check"], capture_output=True, text=True, cwd=ROOT)
    assert check.returncode == 0, check.stdout


def test_notebooks_are_stored_without_outputs():
    for path in sorted(ROOT.glob("*/**/*.ipynb")):
        if {".ipynb_checkpoints", ".venv", "_build"} & set(path.parts) or path.relative_to(ROOT).parts[0] in ("grading", "measurements"):
            continue  # not sources: checkpoints, the venv, the website's executed copies, nbgrader's course folder, GPU records
        for cell in json.loads(path.read_text())["cells"]:
            assert not cell.get("outputs"), f"{path.relative_to(ROOT)} has stored outputs"


def test_chapter_notebooks_follow_the_skeleton():
    paths = sorted((ROOT / "chapters").glob("**/*.ipynb"))
    assert paths
    for path in paths:
        cells = json.loads(path.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").lower()
        for heading in ("overview", "prerequisites", "summary", "exercises"):
            assert heading in text, f"{path.relative_to(ROOT)} has no {heading} section"
        first_code = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert "gpucourse.banner()" in first_code, f"{path.relative_to(ROOT)}: the first code cell must show the banner"


def test_links_between_notebooks_resolve():
    broken = []
    for path in sorted([*ROOT.glob("chapters/*/*.ipynb"), *ROOT.glob("solutions/*.ipynb"), *ROOT.glob("exercises/*.ipynb")]):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = re.sub(r"`[^`]*`", "", "".join(cell["source"]))  # code spans are not links
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
                if not target.startswith(("http://", "https://")) and not (path.parent / target).exists():
                    broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert broken == []
