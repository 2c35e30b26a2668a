"""The demo's sizing without a budget (app/demo_estimate.py): its first line's estimate, GRPO's steps (40 at least,
more where they fit in 20 minutes), and the command line choosing between that and a budget."""

from __future__ import annotations

from dataclasses import replace

import pytest

from proofcheck.app import demo as demo_mod
from proofcheck.app.cli import main
from proofcheck.app.demo_config import DemoConfig
from proofcheck.app.demo_estimate import (
    GRPO_FLOOR,
    TARGET_S,
    Work,
    estimate,
    first_line,
    grpo_steps,
    minutes,
    work_of,
)

WORK = Work(sft_steps=64, grpo_steps=48, eval_tasks=64, eval_passes=4, curve_every=8, curve_tasks=16, pool=64,
            pool_passes=2, pool_every=4, prover_n=40, prover_passes=8, shipped=25, annotated=48, repeats=1)


@pytest.mark.parametrize(("u", "dtype", "steps"), [
    (1.0, "bfloat16", 48),     # a fast machine: the cap, well inside 20 minutes
    (3.0, "bfloat16", 48),
    (3.4, "bfloat16", 47),     # more than the floor while they fit
    (4.3, "bfloat16", 40),     # the floor
    (8.2, "bfloat16", 40),     # a slow day: the floor, past 20 minutes
    (25.0, "float32", 40),     # AVX2 in fp32
])
def test_grpo_gets_the_floor_and_more_where_it_fits(u, dtype, steps):
    got = grpo_steps(u, WORK, dtype)
    assert got == steps
    assert GRPO_FLOOR <= got <= WORK.grpo_steps
    if got > GRPO_FLOOR:   # every step beyond the floor fits the target
        assert estimate(u, replace(WORK, grpo_steps=got), dtype)["total"] <= TARGET_S


@pytest.mark.parametrize(("floor", "cap", "steps"), [(40, 30, 30), (8, 48, 48), (2, 2, 2)])
def test_the_floor_never_passes_the_cap(floor, cap, steps):
    assert grpo_steps(0.5, replace(WORK, grpo_steps=cap), "bfloat16", floor) == steps


@pytest.mark.parametrize(("u", "low_min", "high_min"), [
    (4.3, 21, 23),
    (5.16, 25, 27),  # the demo of 2026-12-06 (evening): 25.8 minutes measured at this SFT step
    (8.2, 38, 41),   # the uncertainty pool's refreshes (64 proofs x 2 passes every 4 steps): ~6 minutes of it
])
def test_the_estimate_at_the_measured_step_times(u, low_min, high_min):
    total = estimate(u, replace(WORK, grpo_steps=40), "bfloat16")["total"]
    assert low_min * 60 <= total <= high_min * 60


@pytest.mark.parametrize(("change", "more"), [
    ({"grpo_steps": 48}, "grpo"), ({"sft_steps": 128}, "sft"), ({"prover_n": 80}, "score"),
    ({"eval_tasks": 128}, "grpo"), ({"curve_every": 4}, "grpo"), ({"model_built": False}, "setup"),
])
def test_each_count_costs_in_its_own_stage(change, more):
    base = estimate(5.0, replace(WORK, grpo_steps=40, model_built=True), "bfloat16")
    bigger = estimate(5.0, replace(WORK, **{"grpo_steps": 40, "model_built": True, **change}), "bfloat16")
    assert bigger[more] > base[more] and bigger["total"] - base["total"] == pytest.approx(bigger[more] - base[more])


@pytest.mark.parametrize(("seconds", "text"), [(1, "about 1 minutes"), (60, "about 1 minutes"), (61, "about 2 minutes"),
                                               (1208, "about 21 minutes")])
def test_minutes_round_up(seconds, text):
    assert minutes(seconds) == text


def test_first_line_says_how_long_here():
    line = first_line(1500, 6.1, "bf16", 40, "from a 1800 GFLOP/s probe")
    assert line.startswith("This demo will take about 25 minutes on this machine (bf16; an SFT step of ~6.1 s")


def test_work_reads_the_recipe_and_the_demo_deltas():
    w = work_of(DemoConfig(), model_built=True)
    assert (w.pool, w.pool_passes, w.pool_every) == (64, 2, 4)     # GRPO_THAT_CHECKS' pool on the YAML's cadence
    assert (w.grpo_steps, w.eval_tasks, w.eval_passes, w.curve_every) == (48, 64, 4, 8)
    assert (w.shipped, w.annotated, w.prover_n, w.prover_passes) == (25, 48, 40, 8)


@pytest.mark.parametrize(("argv", "budget_s", "floor"), [
    ([], None, 40),                                 # the demo: its steps, at least 40 GRPO, said first
    (["--grpo-steps", "30"], None, None),           # the caller's count: exactly that
    (["--budget-min", "25"], 1500.0, None),         # a budget: fitted to it
    (["--quick"], 1200.0, None),
    (["--full"], 5400.0, None),
])
def test_the_command_chooses_steps_or_a_budget(monkeypatch, tmp_path, argv, budget_s, floor):
    seen = {}
    monkeypatch.setattr(demo_mod, "run_demo", lambda cfg: seen.setdefault("cfg", cfg))
    assert main(["demo", "--workdir", str(tmp_path), *argv]) == 0
    assert (seen["cfg"].budget_s, seen["cfg"].grpo_floor) == (budget_s, floor)


@pytest.mark.parametrize(("step_s", "steps"), [(2.0, 48), (5.0, 40), (9.0, 40)])
def test_the_first_line_comes_from_the_probe_and_sizes_grpo(monkeypatch, capsys, tmp_path, step_s, steps):
    from proofcheck.precision import choose_dtype

    monkeypatch.setattr(demo_mod, "probe_step_s", lambda dtype, allocator: (step_s, 1234.0))
    cfg, first, work = demo_mod._first_line(DemoConfig(workdir=tmp_path), choose_dtype("bfloat16", device="cpu"))
    out = capsys.readouterr().out
    assert out.startswith("This demo will take about ") and "from a 1234 GFLOP/s probe" in out
    want = estimate(step_s, replace(work, grpo_steps=steps), "bfloat16")["total"]
    assert first["total"] == pytest.approx(want) and first["probe_gflops"] == 1234.0
    assert cfg.budget_s == pytest.approx(3 * want)      # a guard against a hang, never a cut
    assert f"; {steps} GRPO steps)" in out


@pytest.mark.parametrize(("allocator", "factor"), [("glibc", 1.0), ("tcmalloc", 0.75), ("libjemalloc.so.2", 1.0)])
def test_the_probe_step_follows_the_allocator_the_stages_run_on(monkeypatch, allocator, factor):
    import proofcheck.app.demo_estimate as est

    monkeypatch.setattr(est, "probe_gflops", lambda dtype: 1300.0)
    step, gflops = est.probe_step_s("bfloat16", allocator)
    assert gflops == 1300.0 and step == pytest.approx(est.COSTS["bfloat16"].probe_gflop / 1300.0 * factor)
