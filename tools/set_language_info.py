"""Store in every chapter and solution notebook the language_info that JupyterLab writes, less the Python version.

JupyterLab copies the kernel's language_info into a notebook when it opens it, so a notebook that stored only
{"name": "python"} changed in git as soon as it was opened and saved. The course's notebooks store every field
the kernel reports except its Python version, which `./course lab` leaves out when it saves (course,
student_lab_config). Run from the repository root, then `python -m gpucourse exercises`:

    python tools/set_language_info.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
#: ipykernel's language_info without "version" (what tests/test_newcomer.py checks against a running kernel).
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}


def main() -> int:
    changed = 0
    for path in sorted([*ROOT.glob("chapters/*/*.ipynb"), *ROOT.glob("solutions/*.ipynb")]):
        text = path.read_text(encoding="utf-8")
        notebook = nbformat.reads(text, as_version=4)
        notebook.metadata["language_info"] = dict(LANGUAGE_INFO)
        written = nbformat.writes(notebook)
        written += "" if written.endswith("\n") else "\n"
        if written != text:
            path.write_text(written, encoding="utf-8")
            changed += 1
    print(f"language_info set in {changed} notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
