"""`proofcheck demo`'s flags to the `DemoConfig` it runs: each mode's recipe, the flags given on top."""

from __future__ import annotations

from pathlib import Path

import pytest

from proofcheck.app.cli import build_parser
from proofcheck.app.commands.demo import demo_config


def _config(*flags: str):
    return demo_config(build_parser().parse_args(["demo", *flags]))


@pytest.mark.parametrize(("flags", "expected"), [
    # make train-cpu: one verifier for six families, the recomputed rationale, SFT-first, GRPO at 1e-4
    (("--full",), dict(families="all", rationale="recomputed", sft_share=0.75, sft_steps=900, eval_tasks=192,
                       grpo_lr=1e-4, budget_s=5400.0, workdir=Path("runs/train-cpu"))),
    # the chains recipe, as it was measured (64-step warm-up, half the time, 2e-4, 128 held-out chains)
    (("--full", "--families", "chain"), dict(families=None, rationale="checks", sft_share=0.5, sft_steps=64,
                                             eval_tasks=128, grpo_lr=2e-4)),
    # a flag on top of the six-family recipe keeps the rest of it
    (("--full", "--rationale", "checks", "--sft-steps", "300"), dict(families="all", rationale="checks",
                                                                     sft_steps=300, sft_share=0.75, grpo_lr=1e-4)),
    (("--full", "--exclude-family", "parity", "--budget-min", "45"), dict(families="all", exclude_family="parity",
                                                                          budget_s=2700.0, grpo_floor=None)),
    # leave one family out measures the held-out set only: nothing served or scored, no reserve for it
    (("--full", "--no-score"), dict(score=False, score_reserve_s=0.0, families="all")),
    (("--full",), dict(score=True, score_reserve_s=720.0, fit_eval=True)),
    # a held-out size asked for is kept: a slow host's plan does not cut it
    (("--full", "--no-score", "--eval-tasks", "144"), dict(eval_tasks=144, fit_eval=False)),
    # the demo keeps chains and the checks rationale; --quick all families on the tiny model
    ((), dict(families=None, rationale="checks", sft_steps=48, budget_s=None, grpo_floor=40)),
    (("--families", "all", "--rationale", "recomputed"), dict(families="all", rationale="recomputed")),
    (("--quick",), dict(model="tiny", families="all", budget_s=1200.0)),
])
def test_each_mode_is_its_recipe_with_the_flags_on_top(flags, expected) -> None:
    cfg = _config(*flags)
    assert {k: getattr(cfg, k) for k in expected} == expected


@pytest.mark.parametrize(("flags", "says"), [
    (("--quick", "--full"), "choose one"),
    (("--sft-steps", "0"), "--sft-steps=0: sizes must be >= 1"),
    (("--budget-min", "-5"), "give a positive number of minutes"),
])
def test_a_bad_flag_is_named(flags, says) -> None:
    with pytest.raises(ValueError, match=says):
        _config(*flags)
