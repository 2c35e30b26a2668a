"""Benchmark: a GRPO step on the real SmolLM2-135M, HF generate vs vLLM colocate, and its MFU.

Runs `train/grpo.py --config configs/grpo/smollm2-cpu.yaml` (LoRA on the top layers, bf16
autocast) twice on the same small synthetic dataset, seed and sizes, once with plain
transformers generation (`--use_vllm false`, the baseline) and once with vLLM colocate, and
reads each run's `run_summary.json` `step_split_s` (median seconds per step of generation,
weight sync, reward and the rest: log-probs, loss, backward, optimizer; the first step excluded).
`train.colocate_vs_hf_generate` = HF generation time / vLLM generation time.
The model-FLOPs utilisation of the optimisation part: model FLOPs of forward + backward per
token (`roofline.train_flops_per_token`; LoRA: activation gradients through the trained top
layers only) x tokens per step (TRL's `num_tokens`) / its seconds / the bf16 matmul peak
measured in the same run.

    .venv/bin/python benchmarks/train_real.py [--quick] [--model DIR] [--steps N]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _figures import REPO, emit, real_model

RECIPE = REPO / "configs" / "grpo" / "smollm2-cpu.yaml"


def log_rows(stdout: str) -> list[dict[str, Any]]:
    """The trainer's printed log dicts (`{'loss': ..., 'num_tokens': ...}`), values as floats where they are."""
    rows = []
    for line in stdout.splitlines():
        if not line.startswith("{'"):
            continue
        try:
            row = ast.literal_eval(line.strip())
        except (ValueError, SyntaxError):
            continue
        out = {}
        for k, v in row.items():
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                out[k] = v
        rows.append(out)
    return rows


def recipe_lora_layers(recipe: Path) -> tuple[bool, int | None]:
    """(use_peft, lora_layers) of a recipe YAML: how far the backward pass reaches."""
    import yaml

    cfg = yaml.safe_load(recipe.read_text()) or {}
    return bool(cfg.get("use_peft")), cfg.get("lora_layers")


def run_backend(model: Path, out: Path, use_vllm: bool, steps: int, batch: int, generations: int,
                completion: int, recipe: Path = RECIPE, extra: list[str] | None = None) -> dict[str, Any]:
    """One short GRPO run; its step split and tokens per step. `extra`: more recipe overrides."""
    cmd = [sys.executable, str(REPO / "train" / "grpo.py"), "--config", str(recipe),
           "--model_name_or_path", str(model), "--output_dir", str(out), "--max_steps", str(steps),
           "--eval_max_samples", "0", "--eval_at_start", "false", "--synthetic_count", str(max(4 * batch, 32)),
           "--per_device_train_batch_size", str(batch), "--num_generations", str(generations),
           "--max_completion_length", str(completion), "--save_merged", "false", "--save_adapter", "true",
           "--use_vllm", "true" if use_vllm else "false", "--logging_steps", "1", "--disable_tqdm", "true", "--report_to", "none",
           *(extra or [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        raise SystemExit(f"GRPO run ({'vLLM colocate' if use_vllm else 'HF generate'}) failed "
                         f"({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "run_summary.json").read_text())
    seen = [r["num_tokens"] for r in log_rows(proc.stdout) if isinstance(r.get("num_tokens"), float)]
    # transformers prints floats to 4 significant digits: per-step differences are good to ~0.1%
    per_step = [b - a for a, b in zip(seen, seen[1:], strict=False)] or seen[:1]
    return {"split": summary["step_split_s"], "tokens_per_step": statistics.median(per_step) if per_step else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 steps (2 timed), 8 completions of <= 64 tokens per step")
    ap.add_argument("--model", help="model folder (default: runs/smollm2, built with `proofcheck model smollm2`)")
    ap.add_argument("--steps", type=int, help="GRPO steps per backend, the first not timed (default 5, quick 3)")
    ap.add_argument("--batch", type=int, help="completions per step (default 16, quick 8)")
    ap.add_argument("--generations", type=int, default=4, help="completions per prompt")
    ap.add_argument("--completion-length", type=int, help="max_completion_length (default 160, quick 64)")
    ap.add_argument("--recipe", default=str(RECIPE), help="GRPO recipe YAML (default: the SmolLM2 CPU recipe)")
    ap.add_argument("--train-arg", action="append", default=[], metavar="FLAG=VALUE",
                    help="more recipe overrides, repeatable, e.g. --train-arg gradient_accumulation_steps=1 "
                         "(a list: --train-arg 'mix_ratios=0.5 0.0 0.5')")
    args = ap.parse_args()
    extra = [x for item in args.train_arg for x in (f"--{item.partition('=')[0]}", *item.partition("=")[2].split())]
    steps = args.steps or (3 if args.quick else 5)
    batch = args.batch or (8 if args.quick else 16)
    completion = args.completion_length or (64 if args.quick else 160)
    from roofline import Shape, current_device, measure_machine, train_flops_per_token
    from transformers import AutoConfig

    model = real_model(args.model)
    recipe = Path(args.recipe)
    shape = Shape.from_config(AutoConfig.from_pretrained(model))
    machine = measure_machine(threads=2, quick=args.quick, device=current_device())
    work = Path(tempfile.mkdtemp(prefix="bench-train-real-"))
    rows = {name: run_backend(model, work / name, use_vllm, steps, batch, args.generations, completion, recipe, extra)
            for name, use_vllm in (("hf", False), ("vllm", True))}
    hf, vl = rows["hf"]["split"], rows["vllm"]["split"]
    ratio = hf["generation"] / vl["generation"] if vl["generation"] else None
    peft, lora_layers = recipe_lora_layers(recipe)  # LoRA on the top N layers: the backward pass stops there
    mfu: dict[str, float | None] = {}
    for name, r in rows.items():
        tok = r["tokens_per_step"]
        if tok and r["split"]["train"]:
            seq = tok / batch
            flops = tok * train_flops_per_token(shape, seq / 2, backprop_layers=lora_layers if peft else None,
                                                weight_grads=not peft)
            mfu[name] = flops / r["split"]["train"] / machine["matmul_bf16_flop_s"]
        else:
            mfu[name] = None
    emit({"train.colocate_vs_hf_generate": round(ratio, 3) if ratio else None,
          "train.hf_step_split_s": hf, "train.vllm_step_split_s": vl,
          "train.tokens_per_step": rows["vllm"]["tokens_per_step"],
          "train.mfu_hf": round(mfu["hf"], 4) if mfu["hf"] is not None else None,
          "train.mfu_vllm": round(mfu["vllm"], 4) if mfu["vllm"] is not None else None})
    depth = ("full fine-tuning" if not peft else f"LoRA on the top {lora_layers} layers" if lora_layers
             else "LoRA on every layer")
    print(f"\n### train_real: GRPO on {model.name} ({shape.params / 1e6:.0f} M params; {recipe.name}: {depth}); "
          f"median of {max(steps - 1, 1)} step(s) after a warm-up; {batch} completions of <= {completion} tokens per step\n")
    print("| generation | generation s | weight sync s | reward s | log-probs+backward+optimizer s | total s "
          "| tokens/step | MFU of the optimisation part | generation vs vLLM |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, label in (("hf", "HF generate (baseline)"), ("vllm", "vLLM colocate")):
        s, r = rows[name]["split"], rows[name]
        m = f"{mfu[name]:.3f}" if mfu[name] is not None else "n/a"
        tok = f"{r['tokens_per_step']:.0f}" if r["tokens_per_step"] else "n/a"
        print(f"| {label} | {s['generation']:.2f} | {s['weight_sync']:.2f} | {s['reward']:.3f} | {s['train']:.2f} "
              f"| {s['total']:.2f} | {tok} | {m} "
              f"| {s['generation'] / vl['generation']:.2f}x |")
    print(f"\nMFU against the bf16 matmul peak measured now ({machine['matmul_bf16_flop_s'] / 1e9:.0f} GFLOP/s, "
          f"{machine['device']}); model FLOPs: forward 2/weight + attention, backward "
          + ("1/weight through the LoRA layers (activation gradients only)." if peft else "4/weight (full)."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
