"""The report as Markdown and as a self-contained HTML page (plots embedded)."""

from __future__ import annotations

import base64
import html
import io
import re

from ..report import NOT_MEASURED
from .core import ChapterResult, Row

SIMULATOR_WARNING = ("SIMULATOR MODE: no GPU was used. The simulator runs each CUDA thread as a Python thread at tiny sizes, so "
                     "no time, bandwidth or speed-up is measured here: the column of this device shows what the simulator can "
                     "compute (results, errors, counts). Run `python -m gpucourse report` on a GPU machine for its figures.")


def number(value) -> str:
    """A value as the report prints it: integers in full (grouped from a million on), other values to 4 significant figures.

    Small values take exponent form, never '0.0' for a tiny one; a count, a version code or a byte
    size is never written in exponent form.
    """
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and 1e4 <= abs(value) < 1e6):
        whole = int(value)
        return f"{whole:,}" if abs(whole) >= 10**6 else str(whole)
    value = float(value)
    if value != value:
        return "—"  # NaN: nothing was measured
    if value == 0:
        return "0"
    if abs(value) < 1e-3 or abs(value) >= 1e6:
        return f"{value:.3e}"
    return f"{value:.4g}"


#: Units of quantities measured by timing (times, rates, speed-ups): in the simulator they describe Python threads, not a GPU.
TIMED_UNITS = frozenset({"us", "ms", "s", "GB/s", "MB/s", "GFLOP/s", "billion/s", "x"})


def here_text(row: Row, simulated: bool) -> str:
    """The row's value on this device, or, in the simulator, 'not measured in the simulator' for a time, a rate or a speed-up."""
    if simulated and row.here is not None and row.unit.split(" (")[0] in TIMED_UNITS:
        return NOT_MEASURED
    return number(row.here)


def fraction(value) -> str:
    """A fraction of a ceiling as a percentage."""
    return "—" if value is None else f"{100 * value:.0f}%"


def book_text(row: Row) -> str:
    """The row's book figures, each with its GPU and its fraction of that GPU's ceiling."""
    parts = []
    for cell in row.book:
        gpu = cell.gpu.replace("Tesla ", "")
        text = f"{cell.text} ({gpu}"
        text += f", {fraction(cell.fraction)} of its copy)" if cell.fraction is not None else ")"
        parts.append(text)
    return "; ".join(parts) if parts else "—"


HEADERS = ("quantity", "the book (its GPU, fraction of its ceiling)", "this GPU", "unit", "of measured copy", "library anchor", "note")


def _cells(row: Row, simulated: bool = False) -> list[str]:
    unit = row.unit.split(" (simulator")[0] if simulated else row.unit
    return [row.quantity, book_text(row), here_text(row, simulated), unit, fraction(row.here_fraction), row.anchor or "", row.note]


def _meta_text(key: str, value) -> str:
    if key == "driver CUDA version" and isinstance(value, int):
        from ..environment import format_cuda_version

        return f"{format_cuda_version(value)} ({value})"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def chapter_run(chapter: ChapterResult) -> str:
    """'12 s' (the chapter's time), with the run it comes from when the report joins several: '12 s on NVIDIA H200, 2026-11-25 08:20'."""
    recorded = chapter.recorded or {}
    where = ", ".join(str(recorded[key]) for key in ("device", "date") if recorded.get(key))
    return f"{chapter.seconds:.0f} s" + (f" on {where}" if where else "")


def to_markdown(meta: dict, chapters: list[ChapterResult], unexplained: list[str], explained: dict[str, list[str]]) -> str:
    """The whole report as Markdown."""
    out = [f"# Then and now: the book's figures on {meta['device']}", ""]
    if meta["simulated"]:
        out += [f"> **{SIMULATOR_WARNING}**", ""]
    out += [f"- {key}: {_meta_text(key, value)}" for key, value in meta.items() if key != "simulated"] + [""]
    for chapter in chapters:
        out += [f"## Chapter {chapter.number}: {chapter.title}", "", f"*{chapter_run(chapter)}*", ""]
        if chapter.error:
            out += [f"**This chapter's measurements failed:** `{chapter.error}`", ""]
        for section in chapter.sections:
            out += [f"### {section.title}", "", "| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
            for row in section.rows:
                out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in _cells(row, meta["simulated"])) + " |")
            out += [""] + [f"- {note}" for note in section.notes] + ([""] if section.notes else [])
    out += ["## Book figures without a row", ""]
    if unexplained:
        out += [f"- **not measured and not explained**: {', '.join(unexplained)}"]
    for reason, ids in sorted(explained.items()):
        out.append(f"- {reason}: {len(ids)} figure(s) ({', '.join(ids[:6])}{', ...' if len(ids) > 6 else ''})")
    return "\n".join(out) + "\n"


def to_text(meta: dict, chapters: list[ChapterResult]) -> str:
    """The report's tables as aligned text, for a terminal."""
    from ..report import Table

    out = [SIMULATOR_WARNING] if meta["simulated"] else []
    for chapter in chapters:
        out.append(f"Chapter {chapter.number}, then and now: the book's GPUs beside {meta['device']}")
        if chapter.error:
            out.append(f"  this chapter's measurements failed: {chapter.error}")
        for section in chapter.sections:
            table = Table(list(HEADERS[:-2]) + ["note"], title=section.title, notes=list(section.notes))
            table.rows = [[*cells[:-2], cells[-1]] for cells in (_cells(row, meta["simulated"]) for row in section.rows)]
            out += ["", str(table)]
    return "\n".join(out) + "\n"


def _figure_html(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{encoded}">'


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 110em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; vertical-align: top; text-align: left; }
th { background: #f0f0f0; }
.warning { background: #fde2e2; border: 2px solid #c00; padding: 0.8em; font-weight: bold; }
.meta td:first-child { font-weight: bold; }
"""


def scoped_style(scope: str) -> str:
    """STYLE for an element of class `scope` only (a report shown inside a notebook or a page keeps the page's own styles)."""
    rules = [f".{scope} {{ overflow-x: auto; max-width: 100%; }}"]  # in place of the page's body rule: wide tables scroll
    for rule in STYLE.strip().splitlines():
        selectors, _, body = rule.partition("{")
        if selectors.strip() != "body":
            rules.append(", ".join(f".{scope} {sel.strip()}" for sel in selectors.split(",")) + f" {{{body}")
    return "\n".join(rules)


def to_html(meta: dict, chapters: list[ChapterResult], unexplained: list[str], explained: dict[str, list[str]],
            fragment: bool = False, kept: dict[int, str] | None = None) -> str:
    """The whole report as one HTML page with its plots embedded; with `fragment`, as a block to show inside a notebook.

    `kept`: chapters' HTML as an earlier run wrote it (their plots included), used in place of rendering them again.
    """
    e = html.escape
    if fragment:
        out = [f"<div class='gpucourse-report'><style>{scoped_style('gpucourse-report')}</style>",
               f"<h3>Then and now: the book's figures on {e(meta['device'])}</h3>"]
    else:
        out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Then and now: {e(meta['device'])}</title>",
               f"<style>{STYLE}</style></head><body>", f"<h1>Then and now: the book's figures on {e(meta['device'])}</h1>"]
    if meta["simulated"]:
        out.append(f"<p class='warning'>{e(SIMULATOR_WARNING)}</p>")
    out.append("<table class='meta'>" + "".join(f"<tr><td>{e(str(k))}</td><td>{e(_meta_text(k, v))}</td></tr>" for k, v in meta.items()
                                                 if k != "simulated") + "</table>")
    out.append("<ul>" + "".join(f"<li><a href='#ch{c.number}'>Chapter {c.number}: {e(c.title)}</a> ({len(c.rows)} rows)</li>"
                                for c in chapters) + "</ul>")
    for chapter in chapters:
        if kept and chapter.number in kept:
            out.append(kept[chapter.number])
            continue
        out.append(f"<h2 id='ch{chapter.number}'>Chapter {chapter.number}: {e(chapter.title)}</h2><p><i>{e(chapter_run(chapter))}</i></p>")
        if chapter.error:
            out.append(f"<p class='warning'>This chapter's measurements failed: {e(chapter.error)}</p>")
        for section in chapter.sections:
            out.append(f"<h3>{e(section.title)}</h3><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in HEADERS) + "</tr>")
            for row in section.rows:
                out.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in _cells(row, meta["simulated"])) + "</tr>")
            out.append("</table>")
            out += [f"<p><small>{e(note)}</small></p>" for note in section.notes]
            if section.figure is not None:
                out.append(_figure_html(section.figure))
    out.append("<h2>Book figures without a row</h2><ul>")
    if unexplained:
        out.append(f"<li><b>not measured and not explained</b>: {e(', '.join(unexplained))}</li>")
    for reason, ids in sorted(explained.items()):
        out.append(f"<li>{e(reason)}: {len(ids)} figure(s) <small>({e(', '.join(ids))})</small></li>")
    out.append("</ul></div>" if fragment else "</ul></body></html>")
    return "\n".join(out)


def chapter_blocks(page: str) -> dict[int, str]:
    """Each chapter's HTML in a report page written by to_html, by chapter number (from its heading to the next chapter's)."""
    starts = [(int(m.group(1)), m.start()) for m in re.finditer(r"<h2 id='ch(\d+)'>", page)]
    end = page.find("<h2>Book figures without a row</h2>")
    ends = [start for _, start in starts[1:]] + [end if end >= 0 else len(page)]
    return {number: page[start:stop].rstrip("\n") for (number, start), stop in zip(starts, ends)}
