"""Command line: `python -m gpucourse info | bench | report | exercises [--check] | sizes [--table | --notebooks] [--profile NAME] |
grading-env DIR [--cuda 12|13]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _root() -> Path:
    return Path(__file__).resolve().parent.parent


def command_info(args: argparse.Namespace) -> int:
    """Print the banner (mode, device, diagnosis) and the bandwidth ceilings."""
    import gpucourse

    print(gpucourse.banner())
    if not args.no_ceilings:
        print(gpucourse.bandwidth_ceilings())
    return 0


def command_bench(args: argparse.Namespace) -> int:
    """Run chapter 2's part of the report and print it beside the book's figures."""
    import gpucourse
    from gpucourse import thenandnow
    from gpucourse.thenandnow.render import to_text

    print(gpucourse.banner().headline())
    if gpucourse.is_simulator():
        print("Simulator mode: small sizes, and every time below is a simulator time, not a GPU time.")
    report = thenandnow.run(only=[2], repeat=args.repeat)
    print(to_text(report.meta, report.chapters))
    return 1 if any(c.error for c in report.chapters) else 0


def command_report(args: argparse.Namespace) -> int:
    """Run the then-and-now report (every chapter, or those named) and write it as HTML, Markdown and JSON."""
    import gpucourse
    from gpucourse import thenandnow

    print(gpucourse.banner().headline())
    if gpucourse.is_simulator():
        print("Simulator mode: tiny sizes, and every time in the report is a simulator time, not a GPU time.")
    report = thenandnow.run(only=args.chapter, repeat=args.repeat, after_chapter=lambda so_far: thenandnow.write(so_far, args.out))
    paths = thenandnow.write(report, args.out)
    failed = [c for c in report.chapters if c.error]
    for chapter in failed:
        print(f"chapter {chapter.number} failed: {chapter.error}")
    print(f"wrote {paths['html']}, {paths['md']} and {paths['json']} ({len(report.rows())} rows)")
    return 1 if failed else 0


def command_exercises(args: argparse.Namespace) -> int:
    """Write exercises/ from solutions/, or with --check list what is stale."""
    from gpucourse import exercises

    solutions, student = Path(args.solutions), Path(args.exercises)
    if args.check:
        problems = exercises.stale(solutions, student)
        for problem in problems:
            print(problem)
        if problems:
            print("Run `python -m gpucourse exercises` to rebuild exercises/ from solutions/.")
        return 1 if problems else 0
    for path in exercises.build(solutions, student, only=args.only):
        print(f"wrote {path}")
    return 0


def command_sizes(args: argparse.Namespace) -> int:
    """Print the device-dependent problem sizes and why, the per-notebook estimate, or the README's table of GPU classes."""
    from gpucourse import sizes, workload
    from gpucourse.profiles import PROFILES, current_profile

    if args.table:
        print(workload.markdown_table())
        return 0
    if args.profile is not None and args.profile not in PROFILES:
        print(f"no profile {args.profile!r}; profiles: {', '.join(PROFILES)}")
        return 2
    profile = PROFILES[args.profile] if args.profile else current_profile()
    if args.notebooks:
        if profile is None:
            print("Simulator mode: no GPU to estimate for. Name one with --profile, e.g. --profile T4.")
            return 2
        print(f"{profile.summary()}: an ESTIMATE from bytes moved and peak bandwidth (gpucourse.workload)")
        print(workload.notebook_table(profile))
        return 0
    print(wrapped_table(sizes.explain(*(name for name, entry in sizes.SIZES.items() if entry.follows_device), profile=profile)))
    return 0


def wrapped_table(table, width: int = 100) -> str:
    """A table for a terminal `width` characters wide: each row's first column and its size on one line, the rest indented under it."""
    import textwrap

    first = max((len(str(row[0])) for row in table.rows), default=0) + 2
    lines = [*textwrap.wrap(table.title, width), ""]
    for row in table.rows:
        name, size, *rest = [table._cell(value) for value in row]
        lines.append(f"{name.ljust(first)}{size}")
        for header, value in zip(table.headers[2:], rest):
            if value != "—":
                lines += textwrap.wrap(f"{header}: {value}", width, initial_indent=" " * 4, subsequent_indent=" " * 6)
    for note in table.notes:
        lines += ["", *textwrap.wrap(note, width)]
    return "\n".join(lines)


def command_grading_env(args: argparse.Namespace) -> int:
    """Build the venv that nbgrader autograde runs in: this checkout's wheel, with nbgrader, in a fresh folder."""
    from gpucourse import gradingenv

    target = Path(args.target).resolve()
    python = gradingenv.build(target, cuda=args.cuda)
    print(f"gpucourse from {gradingenv.installed_from_wheel(python)}\nGrade with it: source {target / 'bin' / 'activate'}; cd grading; "
          "nbgrader autograde NAME (README, 'For instructors')")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="python -m gpucourse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print the banner and the device's bandwidth ceilings")
    info.add_argument("--no-ceilings", action="store_true", help="skip measuring the copy ceiling")
    info.set_defaults(run=command_info)
    bench_parser = sub.add_parser("bench", help="chapter 2's part of the report, printed: the measurements beside the book's figures")
    bench_parser.add_argument("--repeat", type=int, default=None, help="timed samples per measurement (default: 20 on a GPU)")
    bench_parser.set_defaults(run=command_bench)
    report = sub.add_parser("report", help="measure every book figure on this device and write the then-and-now report")
    report.add_argument("--chapter", type=int, action="append", help="only this chapter (repeat for several)")
    report.add_argument("--out", default="report", help="folder for report.html, report.md and report.json (default: ./report)")
    report.add_argument("--repeat", type=int, default=None, help="timed samples per measurement (default: 10 on a GPU)")
    report.set_defaults(run=command_report)
    ex = sub.add_parser("exercises", help="generate exercises/ from solutions/")
    ex.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")
    ex.add_argument("--only", metavar="NAME.ipynb", help="rebuild only this solution notebook's exercise")
    ex.add_argument("--solutions", default=str(_root() / "solutions"))
    ex.add_argument("--exercises", default=str(_root() / "exercises"))
    ex.set_defaults(run=command_exercises)
    size_parser = sub.add_parser("sizes", help="the problem sizes that follow the device, and why; estimates of GPU time")
    size_parser.add_argument("--profile", help="a GPU class of gpucourse.profiles.PROFILES instead of this device (e.g. T4, 'RTX 4060')")
    size_parser.add_argument("--notebooks", action="store_true", help="each chapter notebook's estimated GPU time and memory")
    size_parser.add_argument("--table", action="store_true", help="the README's table: estimated GPU time of each chapter per GPU class")
    size_parser.set_defaults(run=command_sizes)
    grading = sub.add_parser("grading-env", help="a fresh venv for nbgrader autograde: the course from a wheel of this checkout")
    grading.add_argument("target", help="the venv's folder (emptied first), outside the checkout")
    grading.add_argument("--cuda", choices=("12", "13"), help="on a GPU machine: your driver's CUDA major version (nvidia-smi)")
    grading.set_defaults(run=command_grading_env)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
