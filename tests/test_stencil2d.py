"""gpucourse.stencil2d: the one measurement behind the 2D notebooks, the report and measurements/stencil2d.json."""

from __future__ import annotations

import json

from gpucourse import mode, stencil2d

SHAPE = (14, 36) if mode.is_simulator() else (2048, 2048)


def test_measure_gives_every_row_and_the_record(tmp_path):
    result = stencil2d.measure(SHAPE, repeat=1, steps=(1, 2))
    labels = set(result.rows)
    for key_label in ("Jacobi global, tuned", "Jacobi shared, tuned", "heat, tuned one step", "k-space Poisson division, tuned"):
        assert key_label in labels
    assert {"Jacobi global, the book's", "heat, the article's one step", "k-space Poisson division, first version"} <= labels
    assert set(result.blocked) == {1, 2} and result.best_steps in (1, 2)
    assert result.blocked[2].steps == 2 and result.blocked[2].us_per_step == result.blocked[2].us / 2
    record = stencil2d.write_record(result, tmp_path / "stencil2d.json", commit="abc123")
    assert json.loads((tmp_path / "stencil2d.json").read_text()) == record
    assert record["commit"] == "abc123" and record["shape"] == list(SHAPE) and record["gpu"] == result.ceilings.device
    assert record["configuration"]["jacobi"]["global"]["rows"] >= 1
    keys = ("heat_global_of_copy", "jacobi_global_of_copy", "jacobi_shared_of_copy", "kspace_poisson_of_copy")
    if mode.is_simulator():  # simulator times are not GPU figures: no fraction of a ceiling is recorded
        assert all(record[key] is None for key in keys) and record["heat_blocked_speedup_per_step"] is None
        assert ("Jacobi read-only, tuned" in result.skipped) and "needs a CUDA GPU" in result.skipped["Jacobi read-only, tuned"]
    else:
        assert all(0 < record[key] for key in keys) and record["jacobi_readonly_of_copy"] > 0
        assert record["heat_blocked_speedup_per_step"] > 0
    table = result.table()
    assert len(table.rows) == len(result.rows) + len(result.skipped)
