"""GPU-only checks (skipped without CUDA; see tests/conftest.py). CPU counterparts:
test_train_grpo.py (GRPO with vLLM colocate and LoRA) and test_serve_inprocess.py (8-pass verification)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
def test_grpo_vllm_colocate_lora_bf16_on_gpu(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "grpo"
    cmd = [sys.executable, str(REPO / "train/grpo.py"), "--config", str(REPO / "configs/grpo/tiny-cpu.yaml"),
           "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--use_cpu", "false", "--bf16", "true",
           "--use_peft", "true", "--lora_target_modules", "all-linear", "--vllm_mode", "colocate",
           "--vllm_gpu_memory_utilization", "0.2", "--max_steps", "2", "--eval_max_samples", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["global_step"] == 2 and summary["generation"] == "vllm-colocate" and summary["peft"]
    assert Path(summary["saved"]["merged"]).is_dir()


@pytest.mark.gpu
def test_eight_pass_verification_on_gpu(tiny_model: Path) -> None:
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "verify", "--model", str(tiny_model), "--problem",
           "Let x_0 = 3 and x_1 = x_0 * 2. Prove that x_1 = 6.", "--proof",
           "<step>x_1 = x_0 * 2 = 3 * 2 = 6.</step><step>Hence x_1 = 6.</step>", "--passes", "8", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["decision"] in ("accept", "reject") and len(result["passes"]) == 8
