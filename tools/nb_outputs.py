"""Execute a notebook and print the text of its outputs, cell by cell: `python3 tools/nb_outputs.py NOTEBOOK`.

nbval checks that every cell runs but keeps no outputs; on a GPU machine this prints what the cells showed, for the
record in measurements/ (the notebooks in git stay without outputs).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main(path: str) -> None:
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        print(f"----- cell {index}: {cell.source.splitlines()[0][:80] if cell.source else ''}")
        for output in cell.outputs:
            if output.output_type == "stream":
                print(output.text[:3000])
            elif output.output_type in ("execute_result", "display_data"):
                print(output.get("data", {}).get("text/plain", "")[:3000])
            elif output.output_type == "error":
                print("ERROR", output.ename, output.evalue)


if __name__ == "__main__":
    main(sys.argv[1])
