"""The course on the software learners have: the CUDA 12 stack as a notebook service installs it, every GPU class's limits.

The CUDA 12 environment is made once and kept (tools/stack_venv.py: docs/notebook_services.md's install cell, run in a
fresh virtual environment with the driver reporting CUDA 12; CI makes it before the tests). Nothing here needs a GPU:
NVVM, NVRTC and ptxas compile for a named architecture without one. On a machine in GPU mode (the GPU machine reaches
no package index) the same tests check the course's own environment, the one `./course` installed, instead:
`.venv/bin/python -m pytest -p no:xdist tests/test_stack.py` there compiles every kernel with its CUDA 13 wheels.
GPUCOURSE_STACK_PYTHON names another environment to check; GPUCOURSE_COMPILE_REPORT=FILE keeps the compile report.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import stack_venv  # noqa: E402  (tools/ is not a package)

import gpucourse  # noqa: E402
from gpucourse import architectures  # noqa: E402
from gpucourse.kernels import _module_kernels, course_kernels, cuda_c_sources  # noqa: E402

FIRST_NOTEBOOK = ROOT / "chapters" / "01_introduction" / "01_first_kernels.ipynb"


@pytest.fixture(scope="module")
def stack_python() -> Path:
    """The environment under test: GPUCOURSE_STACK_PYTHON's; on a GPU, this one; else the cached CUDA 12 stack."""
    if os.environ.get("GPUCOURSE_STACK_PYTHON"):
        return Path(os.environ["GPUCOURSE_STACK_PYTHON"])
    if gpucourse.on_gpu():
        return Path(sys.executable)
    return stack_venv.ensure(ROOT, log=lambda *_: None)


def made_by_the_install_cell(python: Path) -> bool:
    """True for the environment tools/stack_venv.py made by running the install cell (with the driver saying CUDA 12)."""
    return python.parent.parent.name.startswith("stack-") and (python.parent.parent / "ready").exists()


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without the course's mode, Numba's switches and any path to the checkout.

    Other PYTHONPATH folders stay (an offline GPU machine installs its wheels into one); `extra`'s PYTHONPATH goes first.
    """
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCOURSE_", "NUMBA_", "PYTHONPATH", "VIRTUAL_ENV"))}
    kept = [folder for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if folder and not Path(folder).resolve().is_relative_to(ROOT.resolve())]
    paths = [extra.pop("PYTHONPATH")] if "PYTHONPATH" in extra else []
    if paths + kept:
        environment["PYTHONPATH"] = os.pathsep.join(paths + kept)
    environment.update(extra)
    return environment


def environment_for(python: Path, **extra: str) -> dict[str, str]:
    """A clean environment for `python`: the checkout on its path unless the install cell put the course into it."""
    return clean_environment(**extra) if made_by_the_install_cell(python) else clean_environment(PYTHONPATH=str(ROOT), **extra)


def run_in(python: Path, code: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=environment_for(python, **extra), timeout=900)


def test_the_stack_holds_one_cuda_major_version(stack_python, tmp_path):
    listed = subprocess.run([str(stack_python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True)
    versions = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)}
    cupy = [name for name in versions if name.startswith("cupy-cuda")]
    assert len(cupy) == 1 and "numba-cuda" in versions, sorted(versions)
    major = cupy[0].removeprefix("cupy-cuda").removesuffix("x")  # 12 or 13
    assert versions["cuda-bindings"].split(".")[0] == major
    other = {"12": "13", "13": "12"}[major]
    assert not [name for name in versions if name.endswith(f"cu{other}") or name == f"cupy-cuda{other}x"]
    if not made_by_the_install_cell(stack_python):
        pytest.skip(f"{stack_python} is not the install cell's (GPUCOURSE_STACK_PYTHON, or a GPU machine's): how its packages came is not checked")
    assert major == "12" and {"nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvrtc-cu12"} <= set(versions)
    # the course came in as a package (not editable), from a copy of the repository: its files are in the environment
    where = run_in(stack_python, "import gpucourse, importlib.metadata as m; print(gpucourse.__file__); "
                   "print(m.distribution('gpucourse').read_text('direct_url.json'))", tmp_path)
    assert where.returncode == 0, where.stderr
    location, direct_url = where.stdout.split("\n", 1)
    assert Path(location).is_relative_to(stack_python.parent.parent)
    assert '"editable": true' not in direct_url
    data = run_in(stack_python, "import importlib.resources as r; print(r.files('gpucourse').joinpath('data/book_figures.csv').is_file())",
                  tmp_path)
    assert data.stdout.strip() == "True", data.stderr


def notebook_imports() -> dict[str, set[str]]:
    """What the chapter, solution and exercise notebooks import: module -> names taken from it ('' for the module)."""
    found: dict[str, set[str]] = {}
    for path in sorted([*ROOT.glob("chapters/*/*.ipynb"), *ROOT.glob("solutions/*.ipynb"), *ROOT.glob("exercises/*.ipynb")]):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            code = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        found.setdefault(alias.name, set()).add("")
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    found.setdefault(node.module, set()).update(alias.name for alias in node.names)
    return found


IMPORT_ALL = """
import importlib, json, sys
import gpucourse
missing = []
for module, names in json.loads(sys.argv[1]).items():
    imported = importlib.import_module(module)
    for name in filter(None, names):
        if not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
print(gpucourse.MODE, missing)
"""


def test_everything_the_notebooks_import_imports(stack_python, tmp_path):
    imports = notebook_imports()
    assert {"cupy", "cupyx.scipy.fft", "numba.cuda", "gpucourse.kernels"} <= set(imports)
    payload = json.dumps({module: sorted(names) for module, names in imports.items()})
    result = subprocess.run([str(stack_python), "-c", IMPORT_ALL, payload], capture_output=True, text=True, cwd=tmp_path,
                            env=environment_for(stack_python), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    mode, missing = result.stdout.strip().split(" ", 1)
    assert missing == "[]"
    assert mode in ("gpu", "simulator")


def test_the_registry_lists_every_kernel():
    listed = {id(case.kernel) for case in course_kernels()}
    assert [name for name, kernel in _module_kernels() if id(kernel) not in listed] == []
    names = [case.name for case in course_kernels()] + [source.name for source in cuda_c_sources()]
    assert len(names) == len(set(names))
    for source in cuda_c_sources():
        for entry in source.entries:
            assert f'__global__ void {entry}(' in source.code, (source.name, entry)


@pytest.fixture(scope="module")
def compile_report(stack_python, tmp_path_factory) -> dict:
    """tools/compile_kernels.py's report, run in the environment under test."""
    out = tmp_path_factory.mktemp("compile") / "report.json"
    result = subprocess.run([str(stack_python), str(ROOT / "tools" / "compile_kernels.py"), "--json", str(out)], capture_output=True,
                            text=True, cwd=out.parent, env=environment_for(stack_python), timeout=1800)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    if os.environ.get("GPUCOURSE_COMPILE_REPORT"):  # a record wants the report (measurements/compile_kernels/)
        Path(os.environ["GPUCOURSE_COMPILE_REPORT"]).write_text(out.read_text())
    report = json.loads(out.read_text())
    report["output"] = result.stdout
    return report


def test_every_kernel_compiles_and_fits_every_gpu_class(compile_report):
    print(compile_report["output"])
    assert compile_report["failures"] == []
    assert compile_report["not_in_this_toolkit"] == [] or set(compile_report["not_in_this_toolkit"]) <= {"sm_100", "sm_120"}
    assert set(compile_report["architectures"]) >= {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"}
    compiled = {(row["name"], row["arch"]) for row in compile_report["kernels"] if "entries" in row or "known_limit" in row}
    every = {case.name for case in course_kernels()} | {source.name for source in cuda_c_sources()}
    assert compiled == {(name, arch) for name in every for arch in compile_report["architectures"]}


def test_the_cuda12_compilers_known_limit_is_float_atomics_on_blackwell_only(compile_report):
    # CUDA 12.9's NVVM rejects numba-cuda's float atomic add for compute capability 10.0 and 12.0 (numba-cuda issue #603,
    # fixed in CUDA 13.0): the kernels that add floats atomically, there and nowhere else; the rest compiles and fits
    limited = [row for row in compile_report["kernels"] if "known_limit" in row]
    assert {row["arch"] for row in limited} <= {"sm_100", "sm_120"}
    if "nvidia-cuda-nvcc-cu12" not in compile_report["versions"]:
        assert limited == []  # CUDA 13's compilers: every kernel on every class
    names = {row["name"] for row in limited}
    assert all(row["kind"] == "numba" for row in limited)
    on_hopper = {row["name"] for row in compile_report["kernels"] if row["arch"] == "sm_90" and "entries" in row}
    assert names <= on_hopper


FLOAT_INSTRUCTIONS = """
import json, re
from gpucourse.compilation import nvrtc_compile
from gpucourse.kernels import cuda_c_sources
found = {}
for source in cuda_c_sources():
    ptx = nvrtc_compile(source.code, source.name, source.nvrtc_options, "compute_75").decode()
    found[source.name] = sorted(set(re.findall(r"\\b(?:fma|mul|add)(?:\\.rn)?(?:\\.ftz)?\\.f32\\b", ptx)))
print(json.dumps(found))
"""


def test_each_nvrtc_build_gets_exactly_its_switches(stack_python, tmp_path):
    # cupy.RawKernel adds -ftz=true to every build, so §3.6.2's defaults and --fmad=false are built by NVRTC directly: the
    # defaults keep subnormals (no .ftz), --fmad=false splits every FMA, --ftz=true flushes; everything CuPy builds flushes
    result = run_in(stack_python, FLOAT_INSTRUCTIONS, tmp_path, GPUCOURSE_MODE="simulator")
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    chain = {name.split("(")[1].rstrip(")"): ops for name, ops in found.items() if name.startswith("instructions.MULTIPLY_ADD_CHAIN")}
    assert chain == {"defaults": ["fma.rn.f32"], "--fmad=false": ["add.rn.f32", "mul.rn.f32"], "--ftz=true": ["fma.rn.ftz.f32"]}
    through_cupy = [ops for source in cuda_c_sources() if source.through_cupy for ops in found[source.name]]
    assert through_cupy and all(".ftz." in op for op in through_cupy)


def test_the_t4_needs_no_hopper_feature(compile_report):
    # the same PTX assembles for the T4: no instruction of a later architecture (cp.async, clusters, TMA) in any kernel
    t4 = [row for row in compile_report["kernels"] if row["arch"] == "sm_75"]
    assert t4 and all("entries" in row for row in t4)
    assert architectures.ARCHITECTURES["sm_75"].ldg  # the read-only loads of chapter 3's CUDA C (__ldg) exist on every class


def test_the_table_and_its_checks():
    t4, h100 = architectures.ARCHITECTURES["sm_75"], architectures.ARCHITECTURES["sm_90"]
    light = architectures.Resources(registers=32, static_shared_bytes=0, local_bytes=0, spill_bytes=0)
    assert architectures.check_launch(t4, light, 1024) == []
    heavy = architectures.Resources(registers=72, static_shared_bytes=0, local_bytes=0, spill_bytes=0)
    assert any("registers" in p for p in architectures.check_launch(h100, heavy, 1024))  # 72 x 32, rounded up, x 32 warps > 65536
    assert architectures.check_launch(h100, heavy, 512) == []
    tile = architectures.Resources(registers=32, static_shared_bytes=40 * 1024, local_bytes=0, spill_bytes=0)
    assert any("shared memory" in p for p in architectures.check_launch(t4, tile, 256, dynamic_shared_bytes=16 * 1024))
    assert architectures.architecture((8, 7)) == architectures.ARCHITECTURES["sm_86"]
    with pytest.raises(KeyError):
        architectures.architecture((6, 0))


def test_the_first_notebook_runs_from_a_folder_outside_the_repository(stack_python, tmp_path):
    notebook = tmp_path / "elsewhere" / FIRST_NOTEBOOK.name
    notebook.parent.mkdir()
    notebook.write_bytes(FIRST_NOTEBOOK.read_bytes())
    code = ("import nbformat, nbclient, sys\n"
            "nb = nbformat.read(sys.argv[1], as_version=4)\n"
            "nbclient.NotebookClient(nb, timeout=600, kernel_name='python3', resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
            "first = next(c for c in nb.cells if c.cell_type == 'code')\n"
            "print(''.join(o.get('text', '') + o.get('data', {}).get('text/plain', '') for o in first.outputs))\n")
    result = subprocess.run([str(stack_python), "-c", code, str(notebook), str(notebook.parent)], capture_output=True, text=True,
                            cwd=notebook.parent, env=environment_for(stack_python, GPUCOURSE_MODE="simulator"), timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "SIMULATOR MODE" in result.stdout


USE_THE_KERNELS = """
import warnings
warnings.simplefilter("error", __import__("numba.core.errors", fromlist=["x"]).NumbaDeprecationWarning)
import importlib, pkgutil
import numpy as np
import gpucourse
from gpucourse import kernels
for info in pkgutil.iter_modules(kernels.__path__):
    importlib.import_module(f"gpucourse.kernels.{info.name}")
from gpucourse.kernels import intro, random_numbers
a = gpucourse.to_device(np.zeros(300, np.float32))
intro.increment(a, np.float32(1.0))
intro.axpy(2.0, gpucourse.to_device(np.ones(300, np.float32)), a)
states = random_numbers.make_states(64, seed=1)
out = gpucourse.device_empty(64, np.float32)
random_numbers.xoroshiro_uniform(out, states)
print(float(gpucourse.to_host(a)[0]), float(gpucourse.to_host(out).max()) < 1.0)
"""


def test_no_numba_deprecation_warning_from_the_kernels(compile_report):
    # simulator: importing every kernel module and launching a few, NumbaDeprecationWarning made an error
    result = subprocess.run([sys.executable, "-c", USE_THE_KERNELS], capture_output=True, text=True, cwd=ROOT,
                            env=clean_environment(GPUCOURSE_MODE="simulator", PYTHONPATH=str(ROOT)), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["3.0", "True"]
    assert "Deprecation" not in result.stderr
    # the GPU target: compiling every kernel (tools/compile_kernels.py records the warnings it saw)
    assert compile_report["deprecations"] == []


# --- compile-only properties, asserted without a GPU ---------------------------------------------------------------------
# What the compiler makes of a kernel needs no GPU: these run in CI through the CUDA 12 stack (on a GPU, in its own
# environment), where tests/test_instructions.py and tests/test_kernels_intro.py can only read the PTX of launched kernels.

PTX_OF = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import compile_kernels as ck
ck.import_for_compiling()
from numba import cuda, float32
from gpucourse import architectures
from gpucourse.kernels import course_kernels

arch = architectures.ARCHITECTURES["sm_90"]
wanted = set(json.loads(sys.argv[2]))
found = {case.name: ck.numba_ptx(case, arch) for case in course_kernels() if case.name in wanted}


def add_one_per_thread(out, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def add_range_loop(out, x, y):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[i] + y[i]


vectors = (float32[::1],) * 3
for function in (add_one_per_thread, add_range_loop):
    found[function.__name__], _ = cuda.compile_ptx(function, vectors, cc=arch.compute_capability)
print(json.dumps(found))
"""

FAST_SINE, PRECISE_SINE = "instructions.unary_kernel('sin', True)", "instructions.unary_kernel('sin', False)"
LITERAL, TYPED = "intro.scale_by_literal_kernel", "intro.scale_by_typed_constant_kernel"


@pytest.fixture(scope="module")
def ptx_of(stack_python, tmp_path_factory) -> dict[str, str]:
    """PTX for sm_90 of a few registered kernels and of two grid-stride forms, made by the environment under test."""
    names = json.dumps([FAST_SINE, PRECISE_SINE, LITERAL, TYPED])
    result = subprocess.run([str(stack_python), "-c", PTX_OF, str(ROOT / "tools"), names], capture_output=True, text=True,
                            cwd=tmp_path_factory.mktemp("ptx"), env=environment_for(stack_python), timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_fast_math_compiles_sine_to_the_approximate_instruction(ptx_of):
    from gpucourse.compilation import count_matches

    assert count_matches(ptx_of[FAST_SINE], r"sin\.approx") >= 1
    assert count_matches(ptx_of[PRECISE_SINE], r"sin\.approx") == 0


def test_a_float_literal_makes_double_precision_instructions_and_a_typed_constant_none(ptx_of):
    from gpucourse.compilation import count_matches

    assert count_matches(ptx_of[LITERAL], r"\.f64") > 0
    assert count_matches(ptx_of[TYPED], r"\.f64") == 0


def test_a_range_loop_with_a_run_time_step_divides_to_count_its_trips(ptx_of):
    """The evidence the speed verdict names (gpucourse.checks.speed.slow_cause): a 64-bit division before the first element."""
    from gpucourse.checks.speed import ptx_facts

    plain, looped = ptx_facts(ptx_of["add_one_per_thread"]), ptx_facts(ptx_of["add_range_loop"])
    assert plain.divisions == () and any(op.endswith("64") for op in looped.divisions)
    assert looped.setup > 2 * plain.setup


def test_the_padded_transpose_tile_holds_one_more_column_of_shared_memory(compile_report):
    """Static shared bytes of the book's tiles as ptxas reports them: 32 x 32 floats, and 32 x 33 with the padding column."""
    shared = {row["name"]: next(iter(row["entries"].values()))["static_shared_bytes"] for row in compile_report["kernels"]
              if row["arch"] == "sm_90" and row["name"].startswith("transpose.kernels(32, 8).") and "entries" in row}
    assert shared["transpose.kernels(32, 8).coalesced"] == 32 * 32 * 4
    assert shared["transpose.kernels(32, 8).no_bank_conflicts"] == 32 * 33 * 4
