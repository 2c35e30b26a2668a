"""The long recipe's cut held-out set keeps whole rounds of its own families (`DemoConfig.held_out_families`: a
valid and a flawed proof per family, as `demo.draw_task_sets` draws and `assembly.strata_in_turn` cuts)."""

from __future__ import annotations

import time

import pytest

from proofcheck.app.demo import DemoConfig, Plan, draw_task_sets
from proofcheck.app.demo_plan import LONG_EVAL_FLOOR
from proofcheck.data.families import ALL
from proofcheck.precision import Machine, decide

AVX2 = Machine("cpu", "x86_64", frozenset({"avx", "avx2", "fma"}), "AVX2")


@pytest.mark.parametrize(("families", "exclude", "held_out"), [
    (None, None, ("chain",)), ("chain", None, ("chain",)), ("all", None, ALL), ("linear,parity", None, ("linear", "parity")),
    ("linear, parity, chain", None, ("chain", "linear", "parity")),
    (None, "parity", ALL),   # leaving a family out draws every family's held-out proofs
])
def test_the_held_out_families_are_what_the_sets_draw(tmp_path, families, exclude, held_out) -> None:
    cfg = DemoConfig(workdir=tmp_path, families=families, exclude_family=exclude, sft_tasks=24, grpo_tasks=12,
                     dev_tasks=12, eval_tasks=24)
    assert cfg.held_out_families() == held_out
    sets, _ = draw_task_sets(cfg)
    assert {t.get("family", "chain") for t in sets["eval"]} == set(held_out)


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
