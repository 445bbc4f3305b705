"""Draft a notebook from a plain text file of cells: `python tools/py2nb.py draft.txt out.ipynb`.

Cells start with a line `#%% md` or `#%% code`. The notebook written is the source of truth
afterwards (edit it in JupyterLab); this tool only saves typing JSON by hand when drafting.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def cells_from_text(text: str) -> list[dict]:
    cells, kind, lines = [], None, []

    def flush():
        if kind is not None:
            source = "\n".join(lines).strip("\n")
            cell_id = hashlib.sha1(f"{len(cells)}:{source}".encode()).hexdigest()[:8]
            cell = {"cell_type": "markdown" if kind == "md" else "code", "id": cell_id, "metadata": {}, "source": source}
            if kind == "code":
                cell.update(execution_count=None, outputs=[])
            cells.append(cell)

    for line in text.splitlines():
        if line.startswith("#%% "):
            flush()
            kind, lines = line[4:].strip(), []
            if kind not in ("md", "code"):
                raise ValueError(f"unknown cell kind {kind!r}")
        else:
            lines.append(line)
    flush()
    return cells


def notebook(cells: list[dict]) -> dict:
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def main(source: str, target: str) -> None:
    nb = notebook(cells_from_text(Path(source).read_text()))
    for cell in nb["cells"]:  # Jupyter stores source as a list of lines
        text = cell["source"]
        cell["source"] = [line + "\n" for line in text.split("\n")[:-1]] + [text.split("\n")[-1]] if text else []
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
