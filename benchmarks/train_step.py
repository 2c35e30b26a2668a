"""GRPO step time on the tiny model: plain transformers generation vs vLLM colocate (CPU).

Each step is split into generation (vLLM: plus the weight sync, shown apart), reward
(`_calculate_rewards`: meta_verifier + format) and the rest (old/ref log-probs, loss, backward,
optimizer step: "optimisation"). Times come from wrapping the trainer instance's methods; the
first step (warm-up, vLLM compilation) is left out. Same data, seed, batch and lengths for
both backends, measured in one run; ratios are against transformers generation.

    .venv/bin/python benchmarks/train_step.py [--quick] [--steps N] [--completion-length L]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import fmean
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _timed(obj: Any, name: str, bucket: dict[str, float], key: str) -> None:
    """Replace obj.name by a wrapper that adds its wall time to bucket[key]."""
    fn = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            bucket[key] += time.perf_counter() - t0

    setattr(obj, name, wrapper)


def run_backend(model_dir: Path, out: Path, backend: str, steps: int, completion_length: int) -> dict[str, float]:
    """Train `steps` steps with one backend; per-step means (seconds) of each part, warm-up step excluded."""
    from transformers import TrainerCallback

    from proofcheck.app.launch import SyntheticTasks, grpo_args
    from proofcheck.train.args import parse
    from proofcheck.train.run import build_trainer, shutdown_colocated_vllm

    flags: dict[str, Any] = {
        "use_cpu": True, "bf16": False, "report_to": "none", "eval_max_samples": 0,
        "include_reference_solution": False, "max_steps": steps + 1, "save_strategy": "no",
        "per_device_train_batch_size": 8, "num_generations": 8, "max_completion_length": completion_length,
        "logging_steps": 1, "seed": 0, "reward_weights": (1.0, 0.1)}
    if backend == "vllm-colocate":
        flags.update(use_vllm=True, vllm_mode="colocate", vllm_max_model_length=2048)
    trainer, _, _, _ = build_trainer(*parse(grpo_args(None, model_dir, out, SyntheticTasks(64), flags)))
    current: dict[str, float] = defaultdict(float)
    per_step: list[dict[str, float]] = []
    _timed(trainer, "_generate", current, "generation")
    _timed(trainer, "_calculate_rewards", current, "reward")
    if backend == "vllm-colocate":
        _timed(trainer.vllm_generation, "sync_weights", current, "sync")

    class StepClock(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            current.clear()
            current["t0"] = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            total = time.perf_counter() - current.pop("t0")
            per_step.append({**current, "total": total})

    trainer.add_callback(StepClock())
    try:
        trainer.train()
    finally:
        shutdown_colocated_vllm(trainer)
    measured = per_step[1:]  # drop the warm-up step
    out_row = {k: fmean(s.get(k, 0.0) for s in measured) for k in ("generation", "sync", "reward", "total")}
    out_row["generation"] -= out_row["sync"]  # sync runs inside _generate: report it apart
    out_row["optimisation"] = out_row["total"] - out_row["generation"] - out_row["sync"] - out_row["reward"]
    out_row["steps"] = len(measured)
    return out_row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 measured steps, 16-token completions")
    ap.add_argument("--steps", type=int, default=8, help="measured steps per backend (after 1 warm-up step)")
    ap.add_argument("--completion-length", type=int, default=64, help="max_completion_length")
    args = ap.parse_args()
    steps, length = (3, 16) if args.quick else (args.steps, args.completion_length)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from proofcheck.models.tiny_model import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="bench-train-step-"))
    model_dir = build_tiny_model(REPO / "benchmarks" / "out" / "tiny-model")
    rows = {b: run_backend(model_dir, work / b, b, steps, length) for b in ("transformers", "vllm-colocate")}
    base = rows["transformers"]
    print(f"\n### GRPO step time, tiny model on CPU: mean of {steps} steps after a warm-up step; per step "
          f"1 prompt x 8 generations, max_completion_length {length}\n")
    print("| backend | generate s | weight sync s | reward s | optimisation s | total s/step | total vs HF "
          "| generate vs HF |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['generation']:.3f} | {r['sync']:.3f} | {r['reward']:.4f} | {r['optimisation']:.3f} "
              f"| {r['total']:.3f} | {r['total'] / base['total']:.2f}x | {r['generation'] / base['generation']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
