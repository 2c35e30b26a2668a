"""Every YAML under configs/ parses: GRPO recipes through train/grpo.py's real parser into TRL's
dataclasses and ours, accelerate configs through accelerate's own config loader.

GPU recipes say `bf16: true`; transformers refuses bf16 on a machine without a GPU, so here they
are parsed with the single override `--bf16 false` (every other key goes through unchanged).
Data folders of GPU recipes do not exist on this machine: their paths are not checked here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
GRPO_RECIPES = sorted((REPO / "configs" / "grpo").glob("*.yaml"))
ACCELERATE_CONFIGS = sorted((REPO / "configs" / "accelerate").glob("*.yaml"))
ALL_YAML = sorted((REPO / "configs").rglob("*.y*ml"))


def test_the_shipped_recipes_and_accelerate_configs_exist() -> None:
    assert {p.name for p in GRPO_RECIPES} >= {"tiny-cpu.yaml", "smollm2-cpu.yaml", "qwen3-8b-lora-1gpu.yaml",
                                              "qwen3-8b-8gpu-zero3.yaml"}
    assert {p.name for p in ACCELERATE_CONFIGS} >= {"zero2.yaml", "zero3.yaml", "fsdp2.yaml", "multi-node.yaml"}


@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: str(p.relative_to(REPO / "configs")))
def test_every_yaml_is_a_mapping(path: Path) -> None:
    """Every YAML under configs/ (other folders' own tests check their meaning) is a valid mapping."""
    assert isinstance(yaml.safe_load(path.read_text(encoding="utf-8")), dict)


@pytest.mark.parametrize("path", GRPO_RECIPES, ids=lambda p: p.name)
def test_grpo_recipe_parses(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trl import GRPOConfig, ModelConfig

    from proofcheck.train.args import parse
    from proofcheck.train.config import ProofcheckScriptArguments, check_paths

    monkeypatch.chdir(REPO)  # recipes use paths relative to the repository root
    raw = yaml.safe_load(path.read_text())
    gpu = bool(raw.get("bf16")) and not raw.get("use_cpu")
    # model folders are built by `proofcheck model ...` (checked below): only the data paths here
    script, training, model = parse(["--config", str(path), *(["--bf16", "false"] if gpu else [])],
                                    require_data=False)
    if not gpu:
        check_paths(script)
    assert isinstance(script, ProofcheckScriptArguments)
    assert isinstance(training, GRPOConfig) and isinstance(model, ModelConfig)
    # YAML values reached the dataclasses
    for key, value in raw.items():
        if key in ("env", "bf16"):
            continue
        target = next(obj for obj in (script, training, model) if hasattr(obj, key))
        got = getattr(target, key)
        if key == "report_to":
            assert got == ([] if value == "none" else [value])
        elif not isinstance(value, str) or isinstance(got, str):
            assert got == value, key
    assert training.generation_batch_size % training.num_generations == 0
    assert len(training.reward_weights) == len(script.reward_funcs)
    assert model.model_name_or_path
    if gpu:
        assert raw["report_to"] == "tensorboard"
        assert training.use_vllm and training.vllm_mode in ("colocate", "server")
    else:
        # CPU recipes: bf16 only as autocast on fp32 master weights (the CPU's avx512_bf16)
        assert training.use_cpu and training.use_vllm and training.vllm_mode == "colocate"
        assert not training.bf16 or model.dtype == "float32"


@pytest.mark.parametrize("path", GRPO_RECIPES, ids=lambda p: p.name)
def test_a_missing_model_folder_stops_before_loading_and_names_the_build(path: Path, tmp_path: Path) -> None:
    """Every recipe: a model folder that does not exist is exit 2 before anything loads, and the
    message names the command that builds it (the recipe's `model_build`, when it has one)."""
    import subprocess
    import sys

    raw = yaml.safe_load(path.read_text())
    gpu = bool(raw.get("bf16")) and not raw.get("use_cpu")
    missing = tmp_path / "no-model-here"
    out = subprocess.run([sys.executable, str(REPO / "train" / "grpo.py"), "--config", str(path),
                          "--model_name_or_path", str(missing), *(["--bf16", "false"] if gpu else [])],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"{missing}: no such model folder" in out.stderr
    if raw.get("model_build"):
        assert raw["model_build"] in out.stderr
    assert "Loading" not in out.stderr and not (tmp_path / "runs").exists()


def test_cpu_recipes_say_how_to_build_their_model() -> None:
    for name, cmd in (("tiny-cpu.yaml", "proofcheck model tiny"), ("smollm2-cpu.yaml", "proofcheck model smollm2")):
        assert cmd in yaml.safe_load((REPO / "configs" / "grpo" / name).read_text())["model_build"]


def test_zero3_recipe_uses_a_vllm_server_and_the_lora_recipe_lora() -> None:
    zero3 = yaml.safe_load((REPO / "configs/grpo/qwen3-8b-8gpu-zero3.yaml").read_text())
    lora = yaml.safe_load((REPO / "configs/grpo/qwen3-8b-lora-1gpu.yaml").read_text())
    assert zero3["vllm_mode"] == "server" and not zero3.get("use_peft")
    assert lora["use_peft"] and lora["lora_target_modules"] and lora["vllm_mode"] == "colocate"


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_accelerate_config_loads(path: Path) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    raw = yaml.safe_load(path.read_text())
    for key in ("compute_environment", "distributed_type", "num_processes", "num_machines", "mixed_precision",
                "machine_rank", "use_cpu"):
        assert key in raw, f"{path.name}: missing {key}"
    cfg = load_config_from_file(str(path))
    assert cfg.num_processes % cfg.num_machines == 0
    assert cfg.mixed_precision == "bf16" and not cfg.use_cpu
    name = path.stem
    if name.startswith("zero") or name == "multi-node":
        assert str(cfg.distributed_type) in ("DistributedType.DEEPSPEED", "DEEPSPEED")
        assert cfg.deepspeed_config["zero_stage"] == (2 if name == "zero2" else 3)
    if name == "fsdp2":
        assert cfg.fsdp_config["fsdp_version"] == 2
        assert cfg.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"
    if name == "multi-node":
        assert cfg.num_machines > 1 and raw["main_process_port"] and raw["rdzv_backend"] == "static"
