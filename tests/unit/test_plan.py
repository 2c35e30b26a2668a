"""`train/grpo.py --plan` on every shipped recipe: printed without loading a model, with the
published parameter count and hand-computed batch and memory figures for the GPU recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted((REPO / "configs" / "grpo").glob("*.yaml"))
# the accelerate configuration each recipe is launched with (docs/training.md, "pair with")
PAIRED = {"qwen3-8b-8gpu-zero3.yaml": "configs/accelerate/zero3.yaml"}
GIB = 2**30


@pytest.fixture
def nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any model load or training start fails the test."""
    import transformers

    from proofcheck.train import run

    def refuse(*a, **k):
        raise AssertionError("--plan loaded a model or started training")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr(run, "train", refuse)
    monkeypatch.setattr(run, "build_trainer", refuse)


def run_plan(recipe: Path, *extra: str) -> str:
    import contextlib
    import io

    from proofcheck.train.grpo import main

    argv = ["--config", str(recipe), "--plan", *extra]
    if recipe.name in PAIRED:
        argv += ["--plan_accelerate", str(REPO / PAIRED[recipe.name])]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_plan_prints_the_batch_arithmetic_of_every_recipe(recipe: Path, nothing_loads: None) -> None:
    raw = yaml.safe_load(recipe.read_text())
    procs = 8 if recipe.name in PAIRED else 1
    completions = raw["per_device_train_batch_size"] * procs * raw.get("gradient_accumulation_steps", 1)
    text = run_plan(recipe)
    assert f"= {completions} completions = {completions // raw['num_generations']} prompts x " \
           f"{raw['num_generations']} generations" in text
    assert text.startswith(f"# plan: {raw['model_name_or_path']}, {procs} process(es)")


def _line(text: str, label: str) -> float:
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(label))
    return float(line.split(label, 1)[1].split("GiB")[0])


def test_one_gpu_lora_plan(nothing_loads: None) -> None:
    text = run_plan(REPO / "configs/grpo/qwen3-8b-lora-1gpu.yaml")
    # Qwen3-8B: 8,190,735,360 parameters (its model card / safetensors index); bf16 -> 15.26 GiB
    assert "model: 8.191 B parameters" in text
    assert _line(text, "weights") == pytest.approx(8_190_735_360 * 2 / GIB, abs=0.01)
    # LoRA r=64 on all 7 projections of 36 layers: 36 x 64 x (2x4096 + 2x(4096+1024) + 2x4096 + 2x(4096+12288)
    # + (12288+4096)) = 174,587,904 trainable
    assert "trainable 174.6 M (LoRA r=64)" in text
    # vLLM share 0.35 x 80 GiB = 28 GiB; KV = 28 - 15.26 - 1.5 (overhead) = 11.24 GiB at 2x36x8x128x2 = 147,456
    # bytes a token -> 81,870 tokens; one generation: 4 x 8 sequences x (2048 + 8192) = 327,680 tokens > that
    assert _line(text, "vLLM colocate share") == pytest.approx(28.0, abs=0.01)
    assert _line(text, "KV cache in that share") == pytest.approx(11.24, abs=0.01)
    assert "WARNING: the KV cache" in text and "327,680 tokens" in text


def test_one_gpu_plan_without_warning_when_the_cache_holds_a_step(nothing_loads: None) -> None:
    # 0.6 x 141 GiB - 15.26 - 1.5 = 67.84 GiB = 494,000 tokens >= 32 x (2048 + 1024) = 98,304; the peak,
    # vLLM's 84.6 GiB beside the 17.9 GiB of weights, gradients and optimizer that stay, fits 141 GiB
    text = run_plan(REPO / "configs/grpo/qwen3-8b-lora-1gpu.yaml", "--plan_gpu_gib", "141",
                    "--vllm_gpu_memory_utilization", "0.6", "--max_completion_length", "1024")
    assert _line(text, "KV cache in that share") == pytest.approx(0.6 * 141 - 15.255 - 1.5, abs=0.02)
    assert "WARNING" not in text
    # at 0.9 the cache is larger still, but vLLM's share and training no longer fit one GPU
    text = run_plan(REPO / "configs/grpo/qwen3-8b-lora-1gpu.yaml", "--plan_gpu_gib", "141",
                    "--vllm_gpu_memory_utilization", "0.9", "--max_completion_length", "1024")
    assert "WARNING: estimated peak" in text and "WARNING: the KV cache" not in text


def test_zero3_plan_shards_weights_and_states_over_8_gpus(nothing_loads: None) -> None:
    text = run_plan(REPO / "configs/grpo/qwen3-8b-8gpu-zero3.yaml")
    assert "8 process(es), zero3" in text
    # bf16 weights / 8 = 1.907 GiB; fp32 master + AdamW (12 B/param) / 8 = 11.44 GiB
    assert _line(text, "weights") == pytest.approx(8_190_735_360 * 2 / 8 / GIB, abs=0.01)
    assert _line(text, "optimizer (+ masters)") == pytest.approx(8_190_735_360 * 12 / 8 / GIB, abs=0.01)
    assert "vLLM server" in text  # server mode: the KV cache is on the server's GPUs


def test_plan_warns_when_one_checkpoint_is_kept(nothing_loads: None) -> None:
    recipe = REPO / "configs/grpo/tiny-cpu.yaml"
    assert "save_total_limit=1" in run_plan(recipe, "--save_total_limit", "1")
    assert "save_total_limit" not in run_plan(recipe, "--save_total_limit", "2")
