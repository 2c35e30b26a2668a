"""`proofcheck.time_budget.units_that_fit`: the one rule that fits work into a wall-clock budget, and
the three places that use it (the SFT warm-up, GRPO's time budget, the demo's planner)."""

from __future__ import annotations

import pytest

from proofcheck.time_budget import units_that_fit


@pytest.mark.parametrize(("seconds_left", "unit_s", "kw", "expected"), [
    (100.0, 30.0, {}, 3),                                   # whole units only
    (90.0, 30.0, {}, 3),                                    # exactly three fit
    (29.9, 30.0, {}, 0),                                    # not one
    (-50.0, 30.0, {}, 0),                                   # over the budget already: nothing, never negative
    (100.0, 30.0, {"fixed_s": 20.0}, 2),                    # the fixed cost comes first: 80 s left
    (10.0, 30.0, {"fixed_s": 20.0}, 0),                     # the fixed cost alone passes the budget
    (100.0, 30.0, {"already": 5}, 8),                       # counted on top of the units done
    (100.0, 30.0, {"already": 5, "at_most": 7}, 7),         # capped
    (-50.0, 30.0, {"already": 1, "at_least": 1}, 1),        # raised to the floor
    (100.0, 30.0, {"at_least": 5, "at_most": 4}, 5),        # the floor wins over the cap
    (1.0, 0.0, {"at_most": 10}, 10),                        # a zero-second unit: as many as allowed
    (0.0, 0.0, {}, 0),                                      # ... but no time left fits none
])
def test_units_that_fit(seconds_left: float, unit_s: float, kw: dict, expected: int) -> None:
    assert units_that_fit(seconds_left, unit_s, **kw) == expected


@pytest.mark.parametrize(("first", "left", "max_steps", "min_steps", "steps"), [
    (10.0, 95.0, 64, 1, 10),     # the first step + 9 more
    (10.0, 1000.0, 64, 1, 64),   # capped by --steps
    (10.0, -5.0, 64, 1, 1),      # the first step is done whatever the budget
    (10.0, 5.0, 64, 3, 3),       # the floor
])
def test_sft_steps_that_fit_is_the_rule(first: float, left: float, max_steps: int, min_steps: int, steps: int) -> None:
    from proofcheck.train.sft import steps_that_fit

    assert steps_that_fit(first, left, max_steps, min_steps) == steps
    assert steps == units_that_fit(left, first, already=1, at_least=min_steps, at_most=max_steps)


@pytest.mark.parametrize(("now", "step", "tail", "budget", "stops"), [
    (100.0, 10.0, 30.0, 200.0, False),  # 100 + 10 + 30 = 140 <= 200: one more step fits
    (160.0, 10.0, 30.0, 200.0, False),  # 160 + 10 + 30 = 200: exactly fits
    (161.0, 10.0, 30.0, 200.0, True),   # 201 > 200
    (250.0, 10.0, 30.0, 200.0, True),   # already over
])
def test_grpo_budget_stops_when_one_more_step_would_not_fit(now: float, step: float, tail: float, budget: float,
                                                            stops: bool) -> None:
    # the decision TimeBudgetCallback makes after each step (now + step + tail > budget, written as the rule)
    assert (units_that_fit(budget - now, step, fixed_s=tail) < 1) == stops == (now + step + tail > budget)
