"""The recipe YAML is the one source of a run's GRPO values: the demo's modes and every ablation arm are that
YAML plus named deltas (`proofcheck.app.launch.Delta`), printed and recorded (`recipe` in summary.json).

The expected values are the ones `DemoConfig` and `AblateConfig` restated before they read the YAML (flag for
flag), so reading them from the recipe changed no run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from proofcheck.app.demo import DemoConfig, grpo_run
from proofcheck.app.launch import Delta, recipe_line, recipe_record
from proofcheck.data.assembly import Curriculum

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from ablate.arms import arm_run  # noqa: E402
from ablate.config import AblateConfig, _tiny  # noqa: E402

CUR = Curriculum(Path("data") / "dataset", {"synthetic": 512}, 64)
SHOWN = ("--max_steps", "--learning_rate", "--eval_every_steps", "--eval_curve_samples", "--prompt_style",
         "--eval_max_samples", "--eval_passes", "--seed", "--uncertainty_pool")


def _flags(cmd: list[str]) -> dict[str, str]:
    return {flag: cmd[cmd.index(flag) + 1] for flag in SHOWN if flag in cmd}


def _recipe(cmd: list[str]) -> str:
    return Path(cmd[cmd.index("--config") + 1]).name


MODES = {
    "default": (DemoConfig, "smollm2-cpu.yaml",
                {"--max_steps": "48", "--learning_rate": "0.0002", "--eval_every_steps": "8",
                 "--eval_curve_samples": "16", "--prompt_style": "compact", "--eval_max_samples": "64",
                 "--eval_passes": "4", "--seed": "0", "--uncertainty_pool": "64"},
                {"max_steps": 48, "learning_rate": 2e-4, "uncertainty_pool": 64, "eval_every_steps": 8},
                dict(max_tokens=192, sft_share=0.8, families=None, sft_lr=1e-3, sft_lora_r=16, sft_steps=48)),
    "full": (DemoConfig.full_recipe, "smollm2-cpu.yaml",
             {"--max_steps": "200", "--learning_rate": "0.0001", "--eval_every_steps": "15",
              "--eval_curve_samples": "32", "--prompt_style": "compact", "--eval_max_samples": "192",
              "--eval_passes": "4", "--seed": "0", "--uncertainty_pool": "64"},
             {"max_steps": 200, "learning_rate": 1e-4, "uncertainty_pool": 64, "eval_max_samples": 192,
              "eval_every_steps": 15, "max_completion_length": 400, "eval_max_new_tokens": 400},
             dict(max_tokens=400, sft_share=0.75, families="all", rationale="recomputed", sft_steps=900,
                  sft_tasks=7200, sft_varied=0.3, passes=4, repeats=1)),
    "full chains": (lambda: DemoConfig.full_recipe(families=None), "smollm2-cpu.yaml",
             {"--max_steps": "200", "--learning_rate": "0.0002", "--eval_every_steps": "15",
              "--eval_curve_samples": "32", "--prompt_style": "compact", "--eval_max_samples": "128",
              "--eval_passes": "4", "--seed": "0", "--uncertainty_pool": "64"},
             {"max_steps": 200, "learning_rate": 2e-4, "uncertainty_pool": 64, "eval_max_samples": 128,
              "eval_every_steps": 15},
             dict(max_tokens=192, sft_share=0.5, families=None, rationale="checks", sft_steps=64, sft_tasks=2048,
                  sft_varied=0.0, passes=4, repeats=1)),
    "quick": (DemoConfig.quick, "tiny-cpu.yaml",
              {"--max_steps": "8", "--learning_rate": "0.0005", "--eval_every_steps": "3",
               "--eval_curve_samples": "16", "--prompt_style": "compact", "--eval_max_samples": "16",
               "--eval_passes": "4", "--seed": "0"},
              {"max_steps": 8, "learning_rate": 5e-4, "eval_max_samples": 16, "eval_every_steps": 3,
               "prompt_style": "compact"},
              dict(max_tokens=96, sft_share=0.8, families="all", sft_lr=3e-3, sft_lora_r=0, sft_steps=60)),
}


@pytest.mark.parametrize("mode", MODES)
def test_each_demo_mode_is_its_recipe_plus_named_deltas(mode: str) -> None:
    make, recipe, flags, deltas, demo_values = MODES[mode]
    cfg = make()
    cmd = grpo_run(cfg, Path("sft"), CUR, 600.0).command()
    assert _recipe(cmd) == recipe and _flags(cmd) == flags
    assert {k: getattr(cfg, k) for k in demo_values} == demo_values
    record = cfg.recipe_summary
    assert Path(record["path"]).name == recipe
    assert {k: d["value"] for k, d in record["deltas"].items()} == deltas
    assert all(d["reason"] for d in record["deltas"].values())
    line = recipe_line(cfg.recipe, cfg.deltas)
    assert line.startswith(f"recipe {cfg.recipe} + deltas: ") and all(f"{k}=" in line for k in deltas)


def test_a_value_given_by_the_caller_is_one_more_delta() -> None:
    cfg = DemoConfig.quick(grpo_steps=2, eval_passes=4)   # 4: the recipe's own, no delta
    assert cfg.deltas["max_steps"] == Delta(2, "set by the caller") and "eval_passes" not in cfg.deltas
    assert _flags(grpo_run(cfg, Path("sft"), CUR, 1.0).command())["--max_steps"] == "2"


def test_values_are_read_from_the_recipe_file(tmp_path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("max_steps: 5\nlearning_rate: 7.0e-4\neval_max_samples: 12\neval_passes: 2\n"
                      "eval_every_steps: 0\nprompt_style: full\neval_max_new_tokens: 80\n")
    cfg = DemoConfig(recipe=str(recipe), deltas={})
    assert (cfg.grpo_steps, cfg.grpo_lr, cfg.eval_tasks, cfg.eval_passes, cfg.curve_every, cfg.prompt_style,
            cfg.max_tokens) == (5, 7e-4, 12, 2, 0, "full", 80)
    assert recipe_record(cfg.recipe, cfg.deltas) == {"path": str(recipe), "deltas": {}}
    recipe.write_text("learning_rate: 1.0e-4\n")
    with pytest.raises(ValueError, match="sets no max_steps"):
        DemoConfig(recipe=str(recipe), deltas={})


ARMS = {
    "full": (AblateConfig, "smollm2-cpu.yaml",
             {"--max_steps": "40", "--learning_rate": "0.0002", "--eval_every_steps": "0", "--prompt_style": "compact",
              "--eval_max_samples": "128", "--eval_passes": "4", "--seed": "1", "--uncertainty_pool": "64"},
             {"max_steps": 40, "learning_rate": 2e-4, "uncertainty_pool": 64, "eval_max_samples": 128},
             dict(max_tokens=160, sft_lr=1e-3, sft_lora_r=16, sft_steps=64, seeds=[0, 1])),
    "quick": (AblateConfig.quick, "smollm2-cpu.yaml",
              {"--max_steps": "24", "--learning_rate": "0.0003", "--eval_every_steps": "0", "--prompt_style": "compact",
               "--eval_max_samples": "32", "--eval_passes": "4", "--seed": "1"},
              {"max_steps": 24, "eval_max_samples": 32}, dict(max_tokens=160, sft_lr=1e-3, sft_lora_r=16)),
    "quick-tiny": (lambda: _tiny(AblateConfig.quick()), "tiny-cpu.yaml",
                   {"--max_steps": "24", "--learning_rate": "0.0005", "--eval_every_steps": "0",
                    "--prompt_style": "compact", "--eval_max_samples": "32", "--eval_passes": "4", "--seed": "1"},
                   {"max_steps": 24, "eval_max_samples": 32, "learning_rate": 5e-4, "prompt_style": "compact"},
                   dict(max_tokens=96, sft_lr=3e-3, sft_lora_r=0)),
}


@pytest.mark.parametrize("mode", ARMS)
def test_an_ablation_arm_is_the_recipe_plus_named_deltas_plus_its_overrides(mode: str) -> None:
    make, recipe, flags, deltas, values = ARMS[mode]
    cfg = make()
    cmd = arm_run(cfg, Path("out"), 1, Path("start"), CUR, ["--reward_scale", "balanced"]).command()
    assert _recipe(cmd) == recipe and _flags(cmd) == flags and cmd[-2:] == ["--reward_scale", "balanced"]
    assert {k: getattr(cfg, k) for k in values} == values
    assert {k: d["value"] for k, d in recipe_record(cfg.recipe, cfg.deltas)["deltas"].items()} == deltas


def test_the_tiny_ablation_takes_the_demos_quick_settings() -> None:
    demo, cfg = DemoConfig.quick(), _tiny(AblateConfig())
    assert (cfg.recipe, cfg.grpo_lr, cfg.prompt_style, cfg.sft_lr, cfg.sft_lora_r, cfg.max_tokens) == (
        demo.recipe, demo.grpo_lr, demo.prompt_style, demo.sft_lr, demo.sft_lora_r, demo.max_tokens)
    assert (cfg.steps, cfg.eval_tasks) == (40, 128)   # the ablation's own sizes kept
