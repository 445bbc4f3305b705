"""The sentences that notebooks print from measured values: each wording for each side of its threshold."""

from __future__ import annotations

import pytest

from gpucourse import verdicts


def test_share_of_copy_says_reaches_only_near_the_copy():
    assert verdicts.share_of_copy(0.953) == "reaches 0.95 of the copy"
    assert verdicts.share_of_copy(0.827) == "stays at 0.83 of the copy"
    assert verdicts.share_of_copy(0.827, near=0.8) == "reaches 0.83 of the copy"
    with pytest.raises(ValueError):
        verdicts.share_of_copy(-0.1)


def test_against_model_names_the_side_and_the_range():
    assert verdicts.against_model([0.95, 1.08]) == "follows the model within 15% (measured/model 0.95 to 1.08)"
    assert verdicts.against_model([1.46, 1.53, 1.58]) == "runs above the model (measured/model 1.46 to 1.58)"  # 3.2 on the H200, float32
    assert verdicts.against_model([0.48, 0.62]) == "runs below the model (measured/model 0.48 to 0.62)"
    assert verdicts.against_model([0.48, 1.08]) == "does not follow the model (measured/model 0.48 to 1.08)"
    assert verdicts.against_model([1.0]) == "follows the model within 15% (measured/model 1.00)"
    with pytest.raises(ValueError):
        verdicts.against_model([])


def test_speed_against_keeps_small_differences_as_no_change():
    assert verdicts.speed_against(1.02, "the padded kernel") == "as fast as the padded kernel, within 5% (1.02 x)"
    assert verdicts.speed_against(1.52, "one call") == "1.52 times as fast as one call"
    assert verdicts.speed_against(0.93, "the padded kernel") == "slower than the padded kernel (0.93 x its speed)"
    with pytest.raises(ValueError):
        verdicts.speed_against(0, "x")


def test_more_or_fewer():
    assert verdicts.more_or_fewer(13.9, 16.94) == "fewer"  # the H200's flops per byte against the K20's
    assert verdicts.more_or_fewer(16.94, 7.153) == "more"
    assert verdicts.more_or_fewer(16.5, 16.94) == "about as many"
    with pytest.raises(ValueError):
        verdicts.more_or_fewer(1.0, 0.0)


def test_the_launch_cost_table_words_the_graph_against_the_gated_time():
    from gpucourse.launch_costs import LaunchCost, launch_cost_table

    costs = [LaunchCost("a plan: plan()", 5.4, 5.2, ""), LaunchCost("a CUDA graph of 100 plan launches, replayed (per launch)", 0.08, 1.156, "")]
    notes = launch_cost_table(costs, 32768, 2.04, simulated=False).notes
    assert "a copy takes 2.04 us of GPU time" in notes[0] and "The graph's copies take 1.16 us each, less than that" in notes[1]
    slower_graph = [costs[0], LaunchCost(costs[1].way, 0.08, 2.1, "")]
    assert len(launch_cost_table(slower_graph, 32768, 2.04, simulated=False).notes) == 1
    assert "Simulator" in launch_cost_table(costs, 32768, None, simulated=True).notes[0]
