"""Then and now: every figure the book and the articles print, beside the same measurement on this GPU.

`run()` measures chapter by chapter (sized for the device; tiny in the simulator, which the report
says in red), with a progress bar in a terminal or a notebook; `write()` saves the report (merged by chapter into one already there) as HTML
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

__all__ = ["BookCell", "ChapterPlan", "ChapterResult", "Context", "Report", "Row", "Section", "chapters", "coverage", "file_into", "merged",
           "read", "run", "write"]


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


def _run_of(meta: dict) -> dict:
    """What names the run a chapter comes from: its device and date (and, for a GPU, its ceilings and versions)."""
    return {key: meta[key] for key in ("device", "date", "ceilings", "versions", "driver CUDA version") if key in meta}


def _chapter_json(chapter: ChapterResult, meta: dict) -> dict:
    return {"number": chapter.number, "title": chapter.title, "seconds": chapter.seconds, "error": chapter.error,
            "recorded": chapter.recorded or _run_of(meta),
            "sections": [{"title": s.title, "notes": s.notes, "rows": [_json_row(r) for r in s.rows]} for s in chapter.sections]}


def _chapter_of(data: dict, meta: dict) -> ChapterResult:
    """A chapter as report.json holds it (no plots), with the run it comes from (older files: the file's own run)."""
    sections = [Section(s["title"], [Row(**{**r, "book": [BookCell(**c) for c in r["book"]]}) for r in s["rows"]], list(s["notes"]))
                for s in data["sections"]]
    return ChapterResult(data["number"], data["title"], sections, data.get("seconds", 0.0), data.get("error"),
                         data.get("recorded") or _run_of(meta))


def read(out_dir: str | Path) -> tuple[Report, dict[int, str]] | None:
    """The report written in `out_dir` (report.json, with its chapters' HTML from report.html, plots included), or None."""
    from .render import chapter_blocks

    out = Path(out_dir)
    if not (out / "report.json").exists():
        return None
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    meta = dict(data["meta"])
    report = Report(meta, [_chapter_of(chapter, meta) for chapter in data["chapters"]])
    page = (out / "report.html").read_text(encoding="utf-8") if (out / "report.html").exists() else ""
    return report, chapter_blocks(page)


def merged(earlier: Report, later: Report) -> Report:
    """`later`'s chapters with those of `earlier` it did not run: a part of a report never replaces the whole."""
    mine = {c.number for c in later.chapters}
    chapters_now = [dataclasses.replace(c, recorded=c.recorded or _run_of(later.meta)) for c in later.chapters]
    chapters_now += [c for c in earlier.chapters if c.number not in mine]
    chapters_now.sort(key=lambda c: c.number)
    from .render import _meta_text

    meta = dict(later.meta)
    for key in ("device", "ceilings", "versions", "driver CUDA version"):
        runs: dict[str, list[int]] = {}
        for chapter in chapters_now:
            value = (chapter.recorded or {}).get(key, meta.get(key))
            if value is not None:
                runs.setdefault(_meta_text(key, value), []).append(chapter.number)
        if len(runs) > 1:  # chapters of several runs: the line names each run's value with its chapters
            meta[key] = " and ".join(f"{value} ({_chapters_text(numbers)})" for value, numbers in runs.items())
    dates = sorted({str((c.recorded or {}).get("date", meta["date"])) for c in chapters_now})
    if len(dates) > 1:
        meta["date"] = f"{dates[0]} to {dates[-1]} (each chapter says its own)"
    return Report(meta, chapters_now)


def _chapters_text(numbers: list[int]) -> str:
    """'chapters 1-6', 'chapter 7', 'chapters 2, 5'."""
    if len(numbers) == 1:
        return f"chapter {numbers[0]}"
    runs = numbers == list(range(numbers[0], numbers[-1] + 1))
    return f"chapters {numbers[0]}-{numbers[-1]}" if runs else "chapters " + ", ".join(map(str, numbers))


def write(report: Report, out_dir: str | Path, merge: bool = True) -> dict[str, Path]:
    """Write report.html, report.md and report.json into `out_dir`; return their paths.

    With `merge` (the default), a report already in `out_dir` of the same kind (GPU or simulator) keeps
    every chapter this one did not run: a run of one chapter replaces that chapter only.
    """
    return _write_merged(report, {}, Path(out_dir)) if merge else _write_files(report, Path(out_dir), {})


def file_into(source_dir: str | Path, target_dir: str | Path) -> dict[str, Path]:
    """Merge the report written in `source_dir` into the one in `target_dir` (a record's report filed beside the others)."""
    found = read(source_dir)
    if found is None:
        raise FileNotFoundError(f"no report.json in {source_dir}")
    return _write_merged(*found, Path(target_dir))


def _write_merged(later: Report, later_blocks: dict[int, str], out: Path) -> dict[str, Path]:
    """Write `later` (its chapters' HTML blocks, if any) into `out`, merged with a report of the same kind (GPU or simulator)
    already there: each of its chapters replaces that chapter only."""
    earlier = read(out)
    if earlier is None or bool(earlier[0].meta.get("simulated")) != later.simulated:
        return _write_files(later, out, later_blocks)
    mine = {c.number for c in later.chapters}
    return _write_files(merged(earlier[0], later), out, {**{n: b for n, b in earlier[1].items() if n not in mine}, **later_blocks})


def _write_files(report: Report, out: Path, kept: dict[int, str]) -> dict[str, Path]:
    from .render import to_html, to_markdown

    out.mkdir(parents=True, exist_ok=True)
    measured = report.figure_ids()
    plans = {n: p for n, p in chapters().items() if n in {c.number for c in report.chapters}}
    unexplained, explained = coverage(measured, chapters())
    if len(plans) < len(chapters()):  # a part of the report: figures of the other chapters are not its business
        wanted = {f"ch{n}_" for n in plans}
        unexplained = [i for i in unexplained if i.startswith(tuple(wanted))]
    paths = {"html": out / "report.html", "md": out / "report.md", "json": out / "report.json"}
    paths["html"].write_text(to_html(report.meta, report.chapters, unexplained, explained, kept=kept), encoding="utf-8")
    paths["md"].write_text(to_markdown(report.meta, report.chapters, unexplained, explained), encoding="utf-8")
    data = {"meta": report.meta, "unexplained": unexplained, "chapters": [_chapter_json(c, report.meta) for c in report.chapters]}
    paths["json"].write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    return paths
