"""proofcheck.app.launch: the one launcher of the SFT warm-up and GRPO runs (demo, ablations, `proofcheck train`).

The expected command lines are the ones the demo and the ablation (benchmarks/ablate) wrote out by hand before
the launcher existed (flag for flag), so moving them here changed no run; the data flags since come
from the curriculum (`data_args`: every training row once, the eval split held out).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from proofcheck.app.demo import DemoConfig, grpo_run
from proofcheck.app.launch import (
    GrpoRun,
    SftRun,
    SyntheticTasks,
    grpo_args,
    grpo_command,
    grpo_script,
    recipe_path,
)
from proofcheck.data.assembly import Curriculum

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "configs" / "grpo" / "smollm2-cpu.yaml")


def test_the_demos_grpo_command_line() -> None:
    cfg = DemoConfig(grpo_overrides=["--use_vllm", "false"])
    cur = Curriculum(Path("data") / "dataset", {"synthetic": 512}, 64)
    cmd = grpo_run(cfg, Path("sft"), cur, 600.4).command()
    assert cmd == [sys.executable, str(grpo_script()), "--config", RECIPE,
                   "--model_name_or_path", "sft", "--output_dir", str(cfg.workdir / "grpo"), "--expert_files",
                   str(Path("data") / "dataset"), "--synthetic_count", "0", "--mix_ratios", "0", "0", "512",
                   "--train_size", "512", "--eval_fraction", "0", "--max_steps", str(cfg.grpo_steps), "--learning_rate", str(cfg.grpo_lr),
                   "--eval_at_start", "true", "--eval_every_steps", str(cfg.curve_every), "--eval_curve_samples",
                   str(min(cfg.curve_tasks, cfg.eval_tasks)), "--prompt_style", cfg.prompt_style,
                   "--eval_max_samples", str(cfg.eval_tasks), "--eval_passes", str(cfg.eval_passes),
                   "--include_reference_solution", "false", "--save_strategy", "no", "--seed", "0",
                   "--time_budget_s", "600", "--uncertainty_pool", "64", "--use_vllm", "false"]


@pytest.mark.parametrize(("at_start", "budget", "tail"), [
    (True, None, []),                              # an arm's first run: the "before" evaluation, every step
    (False, 300.0, ["--time_budget_s", "300"]),    # a budgeted arm
])
def test_an_ablation_arms_grpo_command_line(at_start: bool, budget: float | None, tail: list[str]) -> None:
    run = GrpoRun(recipe="configs/grpo/smollm2-cpu.yaml", model="start", output_dir="out",
                  dataset=Curriculum(Path("ds"), {"synthetic": 6, "repaired": 2}, 4),
                  max_steps=12, learning_rate=3e-4, seed=1, prompt_style="compact", eval_tasks=32, eval_passes=4,
                  eval_at_start=at_start, eval_every_steps=0, time_budget_s=budget, overrides=["--reward_scale", "x"])
    assert run.command() == [
        sys.executable, str(grpo_script()), "--config", RECIPE, "--model_name_or_path", "start", "--output_dir", "out",
        "--expert_files", "ds", "--synthetic_count", "0", "--mix_ratios", "0", "2", "6", "--train_size", "8",
        "--eval_fraction", "0",
        "--max_steps", "12", "--learning_rate", "0.0003", "--eval_at_start", "true" if at_start else "false",
        "--eval_every_steps", "0", "--prompt_style", "compact", "--eval_max_samples", "32", "--eval_passes", "4",
        "--include_reference_solution", "false", "--save_strategy", "no", "--seed", "1", *tail,
        "--reward_scale", "x"]


@pytest.mark.parametrize(("kw", "tail"), [
    ({}, ["--prompt-style", "compact"]),
    ({"time_budget_s": 99.6}, ["--time-budget", "100", "--prompt-style", "compact"]),
    ({"time_budget_s": 50.0, "lora_layers": 10}, ["--time-budget", "50", "--lora-layers", "10",
                                                  "--prompt-style", "compact"]),
])
def test_the_sft_command_line(kw: dict, tail: list[str]) -> None:
    run = SftRun(model="base", out="sft", data="sft.jsonl", steps=64, lr=1e-3, lora_r=16, seed=0,
                 prompt_style="compact", **kw)
    assert run.command() == [sys.executable, "-m", "proofcheck.train.sft", "--model", "base", "--out", "sft",
                             "--data", "sft.jsonl", "--steps", "64", "--lr", "0.001", "--lora-r", "16", "--seed", "0",
                             *tail]


def test_full_fine_tuning_takes_no_lora_layers() -> None:
    run = SftRun(model="b", out="o", data="d", steps=1, lr=1.0, lora_r=0, seed=0, prompt_style="full", lora_layers=10)
    assert "--lora-layers" not in run.command()


def test_a_recipe_is_found_by_name_from_any_working_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert recipe_path("smollm2-cpu") == Path(RECIPE)
    assert recipe_path("configs/grpo/tiny-cpu.yaml").name == "tiny-cpu.yaml"  # not a file here: found by name
    with pytest.raises(FileNotFoundError, match="shipped: .*smollm2-cpu"):
        recipe_path("no-such-recipe")


@pytest.mark.parametrize(("data", "expected"), [
    # a benchmark's short run: train/grpo.py draws the tasks and holds 20% of their problems out
    (SyntheticTasks(32, 0.2), ["--synthetic_count", "32", "--eval_fraction", "0.2"]),
    (SyntheticTasks(64), ["--synthetic_count", "64"]),  # the recipe's hold-out
    # the GPU check's: the shipped annotated proofs mixed half and half with synthetic tasks
    (SyntheticTasks(64, 0.2, ("a.jsonl",), (0.5, 0.0, 0.5)),
     ["--expert_files", "a.jsonl", "--mix_ratios", "0.5", "0.0", "0.5", "--synthetic_count", "64", "--eval_fraction",
      "0.2"]),
])
def test_a_benchmarks_grpo_command_line(data: SyntheticTasks, expected: list[str]) -> None:
    cmd = grpo_command("smollm2-cpu", "m", "o", data, {"use_vllm": False, "max_steps": 3, "reward_weights": [1.0, 0.1]})
    assert cmd == [sys.executable, str(grpo_script()), "--config", RECIPE, "--model_name_or_path", "m",
                   "--output_dir", "o", *expected, "--use_vllm", "false", "--max_steps", "3",
                   "--reward_weights", "1.0", "0.1"]
    assert grpo_args(None, "m", "o", data)[:4] == ["--model_name_or_path", "m", "--output_dir", "o"]
