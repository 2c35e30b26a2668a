"""The long recipe's cut held-out set keeps whole rounds of its own families (`demo_plan.eval_round`: a valid
and a flawed proof per family, as `demo.draw_task_sets` draws and `assembly.strata_in_turn` cuts)."""

from __future__ import annotations

import time

import pytest

from proofcheck.app.demo import DemoConfig, Plan
from proofcheck.app.demo_plan import LONG_EVAL_FLOOR, eval_round
from proofcheck.precision import Machine, decide

AVX2 = Machine("cpu", "x86_64", frozenset({"avx", "avx2", "fma"}), "AVX2")


@pytest.mark.parametrize(("families", "exclude", "proofs"), [
    (None, None, 2), ("chain", None, 2), ("all", None, 12), ("linear,parity", None, 4),
    ("linear, parity, chain", None, 6),
    (None, "parity", 12),   # leaving a family out draws every family's held-out proofs
])
def test_a_round_is_a_pair_per_family_of_the_held_out_set(families, exclude, proofs) -> None:
    assert eval_round(families, exclude) == proofs


def _cut(families: str, median_s: float) -> int:
    plan = Plan(DemoConfig.full_recipe(families=families), decide(AVX2))
    plan.t0 = time.perf_counter() - (plan.cfg.budget_s - 1881.0)   # what the 90-minute recipe leaves after SFT
    plan.record["sft"] = {"first_step_s": 71.0, "median_step_s": median_s}
    plan.scale_work()
    return plan.eval_tasks


def test_two_families_keep_a_multiple_of_four_not_of_twelve() -> None:
    assert _cut("linear,parity", 12.0) % 4 == 0 and _cut("linear,parity", 12.0) % 12 != 0
    assert 48 < _cut("linear,parity", 12.0) < 192


def test_the_floor_is_whole_rounds_too() -> None:
    """Five families on a host too slow for 48 proofs: the floor rises to 50, five rounds of 10."""
    assert LONG_EVAL_FLOOR == 48 and _cut("chain,prose,linear,expand,parity", 60.0) == 50
    assert _cut("all", 60.0) == 48
