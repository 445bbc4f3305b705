"""Edit a notebook's cells from Python: `nbedit.Notebook(path)` reads it; insert, replace, save (outputs stay empty).

A maintainer's helper (not used by the course): notebooks are the source of truth, and JSON is
awkward to edit by hand. Cell ids are made from the cell's position and text, like tools/py2nb.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


class Notebook:
    """A notebook file opened for editing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.data = json.loads(self.path.read_text())

    @property
    def cells(self) -> list[dict]:
        return self.data["cells"]

    def text(self, index: int) -> str:
        return "".join(self.cells[index]["source"])

    def find(self, needle: str) -> int:
        """Index of the only cell containing `needle`."""
        hits = [i for i, c in enumerate(self.cells) if needle in "".join(c["source"])]
        if len(hits) != 1:
            raise KeyError(f"{needle!r} is in {len(hits)} cells of {self.path}")
        return hits[0]

    def _cell(self, kind: str, text: str) -> dict:
        cell_id = hashlib.sha1(f"{self.path.name}:{len(self.cells)}:{text}".encode()).hexdigest()[:8]
        cell = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": _lines(text.strip("\n"))}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        return cell

    def insert(self, index: int, kind: str, text: str) -> None:
        self.cells.insert(index, self._cell(kind, text))

    def replace(self, index: int, text: str) -> None:
        self.cells[index]["source"] = _lines(text.strip("\n"))

    def sub(self, index: int, old: str, new: str) -> None:
        text = self.text(index)
        if old not in text:
            raise KeyError(f"{old!r} not in cell {index} of {self.path}")
        self.replace(index, text.replace(old, new))

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
