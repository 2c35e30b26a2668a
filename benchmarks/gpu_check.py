"""GPU check for one H200, every stage under a time limit (the whole check inside 10 minutes).

    bash benchmarks/gpu_check.sh            # or: python benchmarks/gpu_check.py --out runs/gpu_check

Stages, each a child process group killed as a whole (vLLM engine processes included) when it
outruns its limit, with a message naming the stage, its limit and its log; a later stage still runs
when an earlier optional one fails:
1. build (limit 180 s): a Qwen3-8B-shaped model (36 layers, hidden 4096, GQA 32/8 of 128, MLP 12288)
   with random bf16 weights and our tiny tokenizer, no downloads;
2. plan (60 s): `train/grpo.py --plan` for the training stage's exact recipe and overrides on this
   GPU's memory: the estimate printed beside what the training stage measures;
3. train (`--train-timeout`, default 330 s; each GRPO run limited too): `train_real.py` on
   `configs/grpo/qwen3-8b-lora-1gpu.yaml` as shipped, LoRA with vLLM colocated **in sleep mode**:
   the GRPO step split, HF generate vs vLLM colocate, the held-out evaluation on HF `generate` vs
   the trainer's sleeping vLLM engine (16 proofs x 4 passes: the path that hung before the
   evaluation woke the KV cache), `torch.cuda.max_memory_allocated` and vLLM's KV blocks;
4. serve (the time left, at least 120 s, else skipped with a message): `serve_real.py` at a small
   size: engine vs `proofcheck serve` vs a naive loop, early reject, decode vs roofline.
Writes `<out>/gpu_check.json` with the keys `run_all.py --json` writes and prints the Markdown tables.
Skips (exit 0, says why) when no CUDA device is present; exit 1 when a stage failed or timed out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "benchmarks"


def build_model(out: Path) -> int:
    """Random Qwen3-8B-shaped model in bf16 (saved with the tiny tokenizer); returns the parameter count."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from proofcheck.models.tiny_model import build_tiny_model

    tiny = build_tiny_model(out.parent / "tiny-tokenizer-source")
    tok = AutoTokenizer.from_pretrained(tiny)
    config = Qwen3Config(vocab_size=len(tok), hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=20480,
                         tie_word_embeddings=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         dtype="bfloat16")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return n


def run_stage(name: str, cmd: list[str], timeout_s: float, log: Path, env: dict[str, str] | None = None) -> str | None:
    """Run one stage in its own process group; its stdout, or None after printing why it failed
    (exit code, or killed at `timeout_s`) with the tail of its log."""
    t0 = time.monotonic()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env or dict(os.environ),
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=max(timeout_s, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            print(f"gpu_check: stage {name!r} did not finish within its {timeout_s:.0f} s limit: killed with its "
                  f"child processes. Log: {log}\n{_tail(log)}", flush=True)
            return None
    took = time.monotonic() - t0
    if proc.returncode != 0:
        print(f"gpu_check: stage {name!r} failed (exit {proc.returncode}) after {took:.0f} s. Log: {log}\n{_tail(log)}",
              flush=True)
        return None
    print(f"gpu_check: stage {name!r} done in {took:.0f} s", file=sys.stderr, flush=True)
    return "\n".join(line for line in out.splitlines() if not line.startswith("{'"))


def _tail(log: Path, n: int = 3000) -> str:
    return log.read_text(errors="replace")[-n:] if log.is_file() else ""


RECIPE = REPO / "configs/grpo/qwen3-8b-lora-1gpu.yaml"
# the training stage's sizes (one step: 16 completions of <= 256 tokens), shared with its --plan
TRAIN_SIZES = {"batch": 16, "generations": 8, "completion": 256}
TRAIN_ARGS = [f"expert_files={REPO / 'data/samples/annotated.jsonl'}",
              "mix_ratios=0.5 0.0 0.5",  # shipped expert + synthetic rows
              "gradient_accumulation_steps=1",
              "vllm_enable_sleep_mode=true"]  # as the recipe ships it; said here so no default can change it


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/gpu_check", help="work folder (the model is ~16 GB)")
    ap.add_argument("--budget", type=float, default=570, help="seconds for the whole check (default 570)")
    ap.add_argument("--train-timeout", type=float, default=330, help="seconds for the training stage")
    ap.add_argument("--proofs", type=int, default=8, help="serve_real: proofs per mode")
    ap.add_argument("--naive-proofs", type=int, default=2, help="serve_real: proofs in the naive loop")
    ap.add_argument("--tokens", type=int, default=128, help="serve_real: max tokens per pass")
    ap.add_argument("--repeats", type=int, default=2, help="serve_real: (e) repeats")
    ap.add_argument("--grpo-steps", type=int, default=3, help="train_real: steps per backend (first not timed)")
    ap.add_argument("--quick", action="store_true", help="accepted for run_all.py; same as the default")
    ap.add_argument("--stage", choices=("all", "build"), default="all", help=argparse.SUPPRESS)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: skipped (no CUDA device on this machine)")
        return 0
    deadline = time.monotonic() + args.budget
    out = Path(args.out).resolve()
    model_dir = out / "qwen3-8b-shaped"
    if args.stage == "build":
        print(json.dumps({"params": build_model(model_dir)}))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    gpu_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    py = sys.executable
    failed: list[str] = []
    if not (model_dir / "config.json").is_file():  # in its own process, so its GPU memory is returned
        if run_stage("build", [py, __file__, "--stage", "build", "--out", str(out)], min(180, args.budget),
                     out / "build.log") is None:
            return 1
    figures = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "figures.json"
    env = {**os.environ, "PROOFCHECK_BENCH_JSON": str(figures)}
    t0 = time.monotonic()
    overrides = [x for item in TRAIN_ARGS for x in (f"--{item.partition('=')[0]}", *item.partition("=")[2].split())]
    plan = run_stage("plan", [py, str(REPO / "train/grpo.py"), "--config", str(RECIPE), "--model_name_or_path",
                              str(model_dir), "--per_device_train_batch_size", str(TRAIN_SIZES["batch"]),
                              "--num_generations", str(TRAIN_SIZES["generations"]), "--max_completion_length",
                              str(TRAIN_SIZES["completion"]), *overrides, "--plan", "--plan_gpu_gib",
                              f"{gpu_gib:.0f}"], 60, out / "plan.log")
    tables = [f"### plan (estimate, `train/grpo.py --plan`, the training stage's sizes)\n\n```\n{plan}\n```"
              if plan else "plan: failed (see above)"]
    left = deadline - time.monotonic()
    train_limit = min(args.train_timeout, left - 30)
    train = run_stage("train", [py, str(HERE / "train_real.py"), "--model", str(model_dir), "--recipe", str(RECIPE),
                                "--steps", str(args.grpo_steps), "--no-full",  # full FT of 8B: > 128 GB of AdamW
                                "--eval-proofs", "16", "--batch", str(TRAIN_SIZES["batch"]), "--generations",
                                str(TRAIN_SIZES["generations"]), "--completion-length", str(TRAIN_SIZES["completion"]),
                                "--timeout", f"{max(train_limit / 2 - 5, 30):.0f}",  # one limit per GRPO run
                                *(x for item in TRAIN_ARGS for x in ("--train-arg", item))],
                      train_limit, out / "train_real.log", env)
    if train is None:
        failed.append("train")
    else:
        tables.append(train)
    left = deadline - time.monotonic()
    if left < 120:
        print(f"gpu_check: stage 'serve' skipped: {left:.0f} s left of the {args.budget:.0f} s budget (needs 120 s)")
        failed.append("serve (skipped)")
    else:
        serve = run_stage("serve", [py, str(HERE / "serve_real.py"), "--model", str(model_dir), "--proofs",
                                    str(args.proofs), "--max-tokens", str(args.tokens), "--repeats", str(args.repeats),
                                    "--naive-proofs", str(args.naive_proofs)], left - 10, out / "serve_real.log", env)
        if serve is None:
            failed.append("serve")
        else:
            tables.append(serve)
    sys.path.insert(0, str(HERE))
    from run_all import write_json

    print(f"# gpu_check: {torch.cuda.get_device_name(0)} ({gpu_gib:.0f} GiB)\n")
    print("\n\n".join(tables))
    missing = write_json(out / "gpu_check.json", figures, [HERE / "serve_real.py", HERE / "train_real.py"],
                         len(failed), time.monotonic() - t0, quick=False)
    print(f"\nJSON: {out / 'gpu_check.json'}" + (f"; failed or skipped: {', '.join(failed)}" if failed else ""))
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
