"""What the GPU measurement scripts share: a line logged at once, and a part of a script run so that its failure is logged
and recorded while the other parts still run."""

from __future__ import annotations

import time
import traceback


def log(*parts) -> None:
    """Print at once (a script's log is read while it runs)."""
    print(*parts, flush=True)


def run_part(name: str, function, *args, **kwargs) -> tuple[object, str | None]:
    """Run one part of a script, logging its name and seconds: (its value, None), or (None, the error's words) after logging
    the error and its traceback."""
    log(f"== {name}")
    start = time.perf_counter()
    try:
        value = function(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - one part's failure is recorded; the others still run
        words = f"{type(exc).__name__}: {exc}"
        log(f"!! {name}: {words}")
        traceback.print_exc()
        return None, words
    log(f"   ({time.perf_counter() - start:.1f} s)")
    return value, None
