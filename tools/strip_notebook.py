"""Git's clean filter for the course's notebooks: what git stores of a notebook a student ran is the notebook as the course ships it.

    python3 tools/strip_notebook.py < notebook.ipynb > stripped.ipynb     (what git runs; standard library only)
    python3 tools/strip_notebook.py --install                             (what `./course lab` runs once)

A run leaves outputs, execution counts, widget state and the kernel's Python version in a notebook;
none of them is the course's, so git keeps none: `git status` stays clean after running a notebook,
and `git pull` takes an update without a conflict (the working copy keeps its outputs until the
update replaces the file). `--install` sets the filter in this clone's git config (a clone without it
stores notebooks as they are: `.gitattributes` names the filter, git ignores a filter it lacks).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILTER = "gpucourse-notebook"
#: Cell metadata a run or an editor adds (nbclient's timing, JupyterLab's scroll and collapse state).
RUN_CELL_METADATA = ("execution", "ExecuteTime", "scrolled", "collapsed", "jupyter")


def strip(text: str) -> str:
    """The notebook in `text` without what running it added, serialised as Jupyter writes it (one-space indent, sorted keys)."""
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError:
        return text  # not a notebook git can read as one (a merge in progress): stored as it is
    metadata = notebook.get("metadata", {})
    metadata.pop("widgets", None)
    info = metadata.get("language_info")
    if isinstance(info, dict):
        info.pop("version", None)  # the Python of whoever ran it
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        for key in RUN_CELL_METADATA:
            cell.get("metadata", {}).pop(key, None)
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def install(root: Path = ROOT) -> None:
    """Set the clean filter in the clone at `root` (git config, this clone only)."""
    command = f'"{sys.executable}" tools/strip_notebook.py'  # git runs it at the top of the working tree: any clone or worktree
    for key, value in ((f"filter.{FILTER}.clean", command), (f"filter.{FILTER}.smudge", "cat")):
        subprocess.run(["git", "config", key, value], cwd=root, check=True)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--install"]:
        install()
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.reconfigure(encoding="utf-8")
    sys.stdout.write(strip(sys.stdin.buffer.read().decode("utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
