"""Then and now: every figure the book and the articles print, beside the same measurement on this GPU.

`run()` measures chapter by chapter (sized for the device; tiny in the simulator, which the report
says in red), with a progress bar in a terminal or a notebook; `write()` saves the report as HTML
(plots embedded) and as a Markdown twin, plus the numbers as JSON. Each chapter's part
(`gpucourse.thenandnow.chN`) calls the same functions as its notebooks and the course's GPU records.
Every book figure either has a row or an explanation of why the course does not measure it
(`coverage()`); a test keeps that list complete.

Command line: `python -m gpucourse report [--chapter N ...] [--out DIR]`.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import book
from .core import BookCell, ChapterPlan, ChapterResult, Context, Progress, Row, Section, ids_of

__all__ = ["BookCell", "ChapterPlan", "ChapterResult", "Context", "Report", "Row", "Section", "chapters", "coverage", "run", "write"]


def chapters() -> dict[int, ChapterPlan]:
    """Every chapter's part of the report, by chapter number."""
    from . import ch1, ch2, ch3, ch4, ch5, ch6, ch7

    plans = [ch1.PLAN, ch2.PLAN, ch3.PLAN, ch4.PLAN, ch5.PLAN, ch6.PLAN, ch7.PLAN]
    return {plan.number: plan for plan in sorted(plans, key=lambda p: p.number)}


@dataclass
class Report:
    """A finished report: its metadata, each chapter's sections, and the book figures it did not measure."""

    meta: dict
    chapters: list[ChapterResult] = field(default_factory=list)

    @property
    def simulated(self) -> bool:
        """True when no GPU was used."""
        return bool(self.meta["simulated"])

    def figure_ids(self) -> set[str]:
        """Every book figure id that has a row."""
        return ids_of(section for chapter in self.chapters for section in chapter.sections)

    def rows(self) -> list[Row]:
        """Every row of the report."""
        return [row for chapter in self.chapters for row in chapter.rows]

    def _repr_html_(self) -> str:
        from .render import to_html

        return to_html(self.meta, self.chapters, [], {}, fragment=True)


def coverage(measured: set[str], plans: dict[int, ChapterPlan] | None = None) -> tuple[list[str], dict[str, list[str]]]:
    """(figures with neither a row nor an explanation, {explanation: figures}) over the whole book table."""
    plans = plans if plans is not None else chapters()
    unexplained: list[str] = []
    explained: dict[str, list[str]] = {}
    for fig in book.figures():
        if fig.id in measured:
            continue
        reason = next((r for plan in plans.values() if (r := plan.explained(fig.id))), None)
        if reason is None:
            unexplained.append(fig.id)
        else:
            explained.setdefault(reason, []).append(fig.id)
    return unexplained, explained


def run(only: list[int] | None = None, repeat: int | None = None, progress: bool | Progress = True,
        after_chapter: Callable[[Report], object] | None = None) -> Report:
    """Measure every chapter (or those in `only`) on this device and return the report.

    `after_chapter(report)` is called after each chapter with the report so far (the command line
    writes it then, so that an interrupted run keeps the chapters it finished).
    """
    plans = chapters()
    chosen = [plans[n] for n in (only or plans) if n in plans]
    missing = sorted(set(only or []) - set(plans))
    if missing:
        raise ValueError(f"no report part for chapter(s) {missing}; chapters with one: {sorted(plans)}")
    bar = progress if isinstance(progress, Progress) else Progress(sum(len(p.steps) for p in chosen) + 1) if progress else None
    if bar is not None:
        bar.step("bandwidth ceilings")
    ctx = Context.make(repeat, bar)
    meta = {
        "device": ctx.device.name, "simulated": ctx.simulated, "date": time.strftime("%Y-%m-%d %H:%M"),
        "ceilings": str(ctx.ceilings), "python": platform.python_version(), "versions": _versions(),
    }
    if ctx.device.driver_cuda_version is not None:  # the simulator has no driver: no line saying "None"
        meta["driver CUDA version"] = ctx.device.driver_cuda_version
    report = Report(meta)
    for plan in chosen:
        started = time.perf_counter()
        result = ChapterResult(plan.number, plan.title)
        try:
            result.sections = plan.measure(ctx)
        except Exception as exc:  # one chapter's failure is reported, the others still run
            result.error = f"{type(exc).__name__}: {exc} ({traceback.extract_tb(exc.__traceback__)[-1].filename.rsplit('/', 1)[-1]}:"\
                           f"{traceback.extract_tb(exc.__traceback__)[-1].lineno})"
        result.seconds = time.perf_counter() - started
        report.chapters.append(result)
        if after_chapter is not None:
            after_chapter(report)
    if bar is not None:
        bar.finish()
    return report


def _versions() -> str:
    from ..banner import versions

    return versions()


def _json_row(row: Row) -> dict:
    data = dataclasses.asdict(row)
    data["book"] = [dataclasses.asdict(cell) for cell in row.book]
    return data


def write(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write report.html, report.md and report.json into `out_dir`; return their paths."""
    from .render import to_html, to_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    measured = report.figure_ids()
    plans = {n: p for n, p in chapters().items() if n in {c.number for c in report.chapters}}
    unexplained, explained = coverage(measured, chapters())
    if len(plans) < len(chapters()):  # a part of the report: figures of the other chapters are not its business
        wanted = {f"ch{n}_" for n in plans}
        unexplained = [i for i in unexplained if i.startswith(tuple(wanted))]
    paths = {"html": out / "report.html", "md": out / "report.md", "json": out / "report.json"}
    paths["html"].write_text(to_html(report.meta, report.chapters, unexplained, explained), encoding="utf-8")
    paths["md"].write_text(to_markdown(report.meta, report.chapters, unexplained, explained), encoding="utf-8")
    data = {"meta": report.meta, "unexplained": unexplained,
            "chapters": [{"number": c.number, "title": c.title, "seconds": c.seconds, "error": c.error,
                          "sections": [{"title": s.title, "notes": s.notes, "rows": [_json_row(r) for r in s.rows]} for s in c.sections]}
                         for c in report.chapters]}
    paths["json"].write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    return paths
