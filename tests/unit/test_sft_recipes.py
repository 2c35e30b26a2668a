"""The supervised recipes (configs/sft/): each parses through train/supervised.py's parser into TRL's SFTConfig,
ModelConfig and ours; `proofcheck train --config <sft recipe> --plan` launches train/supervised.py and prints the
memory plan of the 1-GPU LoRA and the 8-GPU ZeRO-3 recipes; configuration errors name the field and the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SFT_RECIPES = sorted((REPO / "configs" / "sft").glob("*.yaml"))


def test_the_sft_recipes_are_shipped() -> None:
    assert {p.stem for p in SFT_RECIPES} >= {"qwen3-8b-sft-lora-1gpu", "qwen3-8b-sft-8gpu-zero3", "smollm2-sft-cpu",
                                             "tiny-sft-cpu"}


@pytest.mark.parametrize("path", SFT_RECIPES, ids=lambda p: p.name)
def test_sft_recipe_parses(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trl import ModelConfig, SFTConfig

    from proofcheck.train.sft_config import SftScriptArguments
    from proofcheck.train.supervised import parse

    monkeypatch.chdir(REPO)
    raw = yaml.safe_load(path.read_text())
    gpu = raw.get("bf16") is True and not raw.get("use_cpu")
    script, training, model = parse(["--config", str(path), *(["--bf16", "false"] if gpu else [])],
                                    require_data=False)
    assert isinstance(script, SftScriptArguments) and isinstance(training, SFTConfig) and isinstance(model, ModelConfig)
    assert raw["stage"] == "sft" and training.completion_only_loss
    assert training.output_dir.startswith("runs/sft-")
    if not gpu:  # the CPU recipes: one CPU process, no checkpointing (it recomputes the forward)
        assert training.use_cpu and not training.gradient_checkpointing


@pytest.mark.parametrize(("recipe", "accelerate", "expect"), [
    ("qwen3-8b-sft-lora-1gpu", None, ["1 process(es), single", "trainable 174.6 M (LoRA r=64)"]),
    ("qwen3-8b-sft-8gpu-zero3", "zero3", ["8 process(es), zero3", "rows per optimizer update: 1 per device x 8"]),
])
def test_proofcheck_train_plans_the_gpu_sft_recipes(recipe: str, accelerate: str | None, expect: list[str]) -> None:
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "train", "--config", recipe, "--plan", "--bf16", "false",
           *(["--accelerate-config", accelerate] if accelerate else [])]
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "train/supervised.py" in got.stderr and "# supervised plan: Qwen/Qwen3-8B" in got.stdout
    assert all(e in got.stdout for e in expect), got.stdout
    assert "peak" in got.stdout and "WARNING" not in got.stdout


@pytest.mark.parametrize(("kw", "message"), [
    ({"stage": "grpo"}, "a supervised recipe has `stage: sft`"),
    ({"focal_gamma": -1.0}, "focal_gamma=-1.0: must be >= 0"),
    ({"prompt_style": "terse"}, "prompt_style='terse': choose one of"),
    ({"save_merged": False, "save_adapter": False}, "nothing would be saved; set save_merged: true"),
])
def test_sft_arguments_refuse_bad_values_with_the_fix(kw: dict, message: str) -> None:
    from proofcheck.train.config import ConfigError
    from proofcheck.train.sft_config import SftScriptArguments

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        SftScriptArguments(**kw)


def test_no_data_is_an_error_naming_both_sources(tmp_path: Path) -> None:
    from proofcheck.train.config import ConfigError
    from proofcheck.train.sft_config import SftScriptArguments, check_sft_paths

    with pytest.raises(ConfigError, match="set sft_files .* or synthetic_count"):
        check_sft_paths(SftScriptArguments())
    with pytest.raises(ConfigError, match="no such file: .*missing.jsonl .*proofcheck data distill"):
        check_sft_paths(SftScriptArguments(sft_files=[str(tmp_path / "missing.jsonl")]))


@pytest.mark.parametrize(("device", "kw", "why"), [
    ("cpu", {}, None),
    ("cuda", {}, "TRL's head is compact on cuda"),
    ("cuda", {"focal_gamma": 2.0}, None),      # TRL has no focal loss: ours runs there too
    ("cpu", {"sharded": True}, "the parameters are sharded (FSDP / ZeRO-3)"),
    ("cpu", {"packed": True}, "packed or padding-free rows"),
    ("cpu", {"loss_type": "dft"}, "loss_type dft"),
])
def test_the_answer_only_loss_steps_aside_where_it_does_not_apply(device: str, kw: dict, why: str | None) -> None:
    from proofcheck.train.sft_trainer import why_not

    base = {"focal_gamma": 0.0, "sharded": False, "aux_loss": False, "custom_loss": False, "label_smoothing": False,
            "loss_type": "nll", "packed": False}
    assert why_not(device, **{**base, **kw}) == why
