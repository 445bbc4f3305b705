"""Show the source of the package's kernels in a notebook, so that the code a student reads is the code tested."""

from __future__ import annotations

import html
import inspect
import textwrap


def source_of(obj) -> str:
    """The Python source of a function, a Numba kernel (real or simulated) or a module."""
    target = getattr(obj, "py_func", None) or getattr(obj, "fn", None) or obj
    target = inspect.unwrap(target) if hasattr(target, "__wrapped__") else target  # a planned launcher: its builder
    return textwrap.dedent(inspect.getsource(target))


class SourceListing:
    """Source code that renders highlighted in a notebook and plain in a terminal."""

    def __init__(self, *objects) -> None:
        self.text = "\n\n".join(source_of(obj) for obj in objects)

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import PythonLexer
        except ImportError:  # pragma: no cover - pygments comes with Jupyter
            return f"<pre>{html.escape(self.text)}</pre>"
        formatter = HtmlFormatter(noclasses=True, style="default")
        return highlight(self.text, PythonLexer(), formatter)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(self.text)


def show_source(*objects) -> SourceListing:
    """Return a listing of the objects' source (display it as a cell's last line)."""
    return SourceListing(*objects)
