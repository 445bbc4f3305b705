"""Figures printed in the seed texts (the book and the four articles), quoted by id, never retyped.

The table `data/book_figures.csv` holds every number the sources print, with its section, GPU and
unit. Notebooks quote a figure with `figure(id)` so that it is always shown as the book's, on the
book's GPU, beside what the learner's GPU measures now.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from importlib import resources

SOURCES = {
    "004_88605c32a2d8391b.txt": "Ruetsch & Fatica, CUDA Fortran for Scientists and Engineers (2014)",
    "000_a9c963c01d1728f2.txt": "Finite difference methods in CUDA Fortran, part 2 (article)",
    "001_8de49eea85a4797d.txt": "Finite difference methods in CUDA C/C++, part 1 (article)",
    "002_fd97addc663ef419.txt": "Finite difference methods in CUDA C/C++, part 2 (article)",
    "003_57bc480a6a4f7dce.txt": "Temporal blocking for the 2D heat equation (article)",
}


@dataclass(frozen=True)
class BookFigure:
    """One printed figure: the value as printed, its unit, GPU and section."""

    id: str
    source: str
    section: str
    quantity: str
    variant: str
    gpu: str
    value: str
    unit: str
    notes: str

    @property
    def number(self) -> float:
        """The printed value as a float (markers such as '*' dropped); ValueError if it is not a number."""
        match = re.search(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", self.value.replace(",", ""))
        if not match:
            raise ValueError(f"book figure {self.id} is not numeric: {self.value!r}")
        return float(match.group())

    @property
    def where(self) -> str:
        """Where it is printed: '§2.4, CUDA Fortran for Scientists and Engineers' and the like."""
        title = SOURCES.get(self.source, self.source)
        return f"§{self.section}, {title}" if self.section else title

    def quote(self) -> str:
        """The figure as the book prints it, with its GPU and section."""
        return f"{self.value} {self.unit} on {self.gpu} ({self.quantity}, {self.variant}; {self.where})"


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, BookFigure]:
    text = resources.files("gpucourse").joinpath("data/book_figures.csv").read_text(encoding="utf-8")
    return {row["id"]: BookFigure(**row) for row in csv.DictReader(text.splitlines())}


def figure(figure_id: str) -> BookFigure:
    """The printed figure with this id (KeyError, naming close ids, if there is none)."""
    table = _table()
    try:
        return table[figure_id]
    except KeyError:
        stem = figure_id.rsplit("_", 1)[0]
        close = [key for key in table if key.startswith(stem)][:5]
        raise KeyError(f"no book figure {figure_id!r}; ids starting alike: {close}") from None


def has_figure(figure_id: str) -> bool:
    """True when the book (or an article) prints a figure with this id."""
    return figure_id in _table()


def figures(
    prefix: str = "",
    *,
    gpu: str | None = None,
    quantity: str | None = None,
    variant: str | None = None,
) -> list[BookFigure]:
    """Figures whose id starts with `prefix` and whose gpu/quantity/variant contain the given text."""

    def matches(field: str, wanted: str | None) -> bool:
        return wanted is None or wanted.lower() in field.lower()

    return [
        fig
        for key, fig in _table().items()
        if key.startswith(prefix) and matches(fig.gpu, gpu) and matches(fig.quantity, quantity) and matches(fig.variant, variant)
    ]
