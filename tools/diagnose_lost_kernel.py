"""Why did two wrong answers end their notebook's kernel with no message on a GPU (issue 28)? Run them and say how each ended.

Usage, on a GPU machine from the repository root, with the venv's Python:

    python tools/diagnose_lost_kernel.py OUT

For each answer (Exercise 3.5.2 storing right after each load; Exercise 6.2 passing Python float
coefficients) it runs the check twice: in a plain Python process under faulthandler, with its exit
status (a negative status is the signal that killed it), its peak memory and the last lines of its
output; and as the exercise notebook in a Jupyter kernel (nbclient), with the kernel's own stderr,
where the checks' faulthandler writes the Python stack of a crash. Everything goes to OUT/.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STORE_AFTER_EACH_LOAD = '''ILP = 4


@cuda.jit
def copy_ilp_kernel(out, inp, owner):
    first = cuda.blockIdx.x * cuda.blockDim.x * ILP + cuda.threadIdx.x
    for j in range(ILP):  # each value stored right after its load: one load in flight at a time
        i = first + j * cuda.blockDim.x
        if i < inp.size:
            out[i] = inp[i]
            owner[i] = cuda.grid(1)
'''

PYTHON_FLOAT_COEFFICIENTS = '''@cuda.jit
def deriv_z_kernel(f, df, a, b, c, d):
    i, j = cuda.grid(2)
    nz, ny, nx = f.shape
    if i < nx and j < ny:
        w0, w1, w2, w3 = f[nz - 4, j, i], f[nz - 3, j, i], f[nz - 2, j, i], f[nz - 1, j, i]
        w4, w5, w6, w7 = f[0, j, i], f[1, j, i], f[2, j, i], f[3, j, i]
        for k in range(nz):
            ahead = k + 4
            if ahead >= nz:
                ahead -= nz
            w8 = f[ahead, j, i]
            df[k, j, i] = a * (w5 - w3) + b * (w6 - w2) + c * (w7 - w1) + d * (w8 - w0)
            w0, w1, w2, w3, w4, w5, w6, w7 = w1, w2, w3, w4, w5, w6, w7, w8


def deriv_z(f, df, coefficients):
    nz, ny, nx = f.shape
    threads = (32, 4)
    blocks = (math.ceil(nx / threads[0]), math.ceil(ny / threads[1]))
    deriv_z_kernel[blocks, threads](f, df, *[float(value) for value in coefficients])  # Python floats: float64 arguments
'''

CASES = {
    "3.5.2": ("ch03_execution", "copy_ilp_kernel", STORE_AFTER_EACH_LOAD, "from numba import cuda\nfrom gpucourse.checks import ch3_execution",
              "ch3_execution.check_copy_ilp(copy_ilp_kernel)"),
    "6.2": ("ch06_finite_difference", "def deriv_z", PYTHON_FLOAT_COEFFICIENTS,
            "import math\nfrom numba import cuda\nfrom gpucourse.checks import ch6", "ch6.check_z_derivative(deriv_z)"),
}


def plain_run(name: str, out: Path) -> dict:
    """The check in a fresh Python process under faulthandler: how it ended."""
    _, _, answer, setup, check = CASES[name]
    module = out / f"answer_{name.replace('.', '_')}.py"
    module.write_text(f"{setup}\n\n{answer}\n\nif __name__ == '__main__':\n    {check}\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))  # keep an offline machine's wheel folder
    done = subprocess.run([sys.executable, "-X", "faulthandler", str(module)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": path}, timeout=1800)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    (out / f"plain_{name}.log").write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    return {"exit": done.returncode, "peak_rss_mib_at_least": round(max(peak, before) / 1024), "tail": (done.stdout + done.stderr)[-1500:]}


def notebook_run(name: str, out: Path) -> dict:
    """The exercise notebook with this answer, in a Jupyter kernel; the kernel's stderr is this process's (see the log)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    stem, marker, answer, _, _ = CASES[name]
    notebook = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "code" and marker in c.source and "BEGIN SOLUTION" in c.source)
    cell.source = answer
    client = NotebookClient(notebook, timeout=1800, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(ROOT / "solutions")}})
    ended = "ran to the end"
    try:
        client.execute()
    except DeadKernelError as exc:
        ended = f"the kernel died: {exc}"
    except Exception as exc:  # noqa: BLE001 - whatever nbclient says is the finding
        ended = f"{type(exc).__name__}: {exc}"
    nbformat.write(notebook, out / f"notebook_{name}.ipynb")
    errors = [(o.ename, o.evalue[:300]) for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    return {"ended": ended, "errors": errors}


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "diagnose_lost_kernel")
    out.mkdir(parents=True, exist_ok=True)
    report = {}
    for name in CASES:
        report[name] = {"plain": plain_run(name, out), "notebook": notebook_run(name, out)}
        print(name, json.dumps(report[name], indent=1)[:3000], flush=True)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(textwrap.dedent(f"""
        Written to {out}/. A negative exit is the signal that ended the process (-9: killed, often the kernel's OOM killer;
        -11: a crash in native code, whose Python stack faulthandler wrote to the log). Check `dmesg | tail` for the OOM killer."""))


if __name__ == "__main__":
    main()
