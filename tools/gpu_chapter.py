"""One chapter's measurements on a GPU: its part of the then-and-now report, written for the record.

    python3 tools/gpu_chapter.py N OUT_DIR        # the same as: python -m gpucourse report --chapter N --out OUT_DIR

The chapter scripts that made the records of 2026-11-22 (tools/gpu_ch2.py, gpu_ch3_execution.py,
gpu_ch3_memory.py, gpu_ch6.py: measurements/README.md cites them) are in git history at commit
7396dba; their measurements now live in the package (`gpucourse.thenandnow.chN` and the functions
it calls), so that the notebook, the report and the record share one code path.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpucourse.__main__ import main  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(["report", "--chapter", sys.argv[1], "--out", sys.argv[2]]))
