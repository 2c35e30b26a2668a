"""GPU check for one H200 (about 10-15 minutes): the CPU benchmarks' figures, same JSON keys, on an 8B shape.

    bash benchmarks/gpu_check.sh            # or: python benchmarks/gpu_check.py --out runs/gpu_check

1. Build a Qwen3-8B-shaped model (36 layers, hidden 4096, GQA 32/8 of 128, MLP 12288) with random
   bf16 weights on the GPU and our tiny tokenizer (its small vocabulary changes little that
   matters for throughput: the body holds ~7B parameters). No downloads.
2. `serve_real.py --model` on it: raw vLLM engine vs `proofcheck serve` vs a naive loop, early
   reject, n=8 vs 8 x n=1, decode vs this GPU's roofline (bandwidth and bf16 matmul measured on
   the GPU in the same run).
3. `train_real.py --model --recipe configs/grpo/qwen3-8b-lora-1gpu.yaml --no-full`: GRPO step
   split, HF generate vs vLLM colocate (LoRA), MFU against the measured bf16 peak, and the held-out
   evaluation on HF `generate` vs the trainer's vLLM engine (16 proofs x 4 passes).
Writes `<out>/gpu_check.json` with the keys `run_all.py --json` writes (`model`,
`serve.service_vs_engine`, ..., `train.colocate_vs_hf_generate`) and prints the Markdown tables.
Skips (exit 0, says why) when no CUDA device is present.
"""

from __future__ import annotations

import argparse
import json
import os
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

    from proofcheck.tiny_model import build_tiny_model

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


def run_script(name: str, argv: list[str], env: dict[str, str], log: Path) -> str:
    """Run benchmarks/<name>.py; its Markdown (stdout) or a SystemExit with the stderr tail."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(HERE / f"{name}.py"), *argv], capture_output=True, text=True, env=env)
    log.write_text(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}) after {time.perf_counter() - t0:.0f} s; "
                         f"full log {log}:\n{proc.stderr[-3000:]}")
    return "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("{'"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/gpu_check", help="work folder (the model is ~16 GB)")
    ap.add_argument("--proofs", type=int, default=32, help="serve_real: proofs per mode")
    ap.add_argument("--naive-proofs", type=int, default=4, help="serve_real: proofs in the naive loop")
    ap.add_argument("--tokens", type=int, default=256, help="serve_real: max tokens per pass")
    ap.add_argument("--repeats", type=int, default=3, help="serve_real: (e) repeats")
    ap.add_argument("--grpo-steps", type=int, default=3, help="train_real: steps per backend (first not timed)")
    ap.add_argument("--quick", action="store_true", help="accepted for run_all.py; same as the default")
    ap.add_argument("--stage", choices=("all", "build"), default="all", help=argparse.SUPPRESS)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: skipped (no CUDA device on this machine)")
        return 0
    out = Path(args.out).resolve()
    model_dir = out / "qwen3-8b-shaped"
    if args.stage == "build":
        print(json.dumps({"params": build_model(model_dir)}))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    if not (model_dir / "config.json").is_file():  # in its own process, so its GPU memory is returned
        subprocess.run([sys.executable, __file__, "--stage", "build", "--out", str(out)], check=True)
    figures = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "figures.json"
    env = {**os.environ, "PROOFCHECK_BENCH_JSON": str(figures)}
    t0 = time.perf_counter()
    tables = [
        run_script("serve_real", ["--model", str(model_dir), "--proofs", str(args.proofs), "--max-tokens",
                                  str(args.tokens), "--repeats", str(args.repeats), "--naive-proofs",
                                  str(args.naive_proofs)], env, out / "serve_real.log"),
        run_script("train_real", ["--model", str(model_dir), "--recipe",
                                  str(REPO / "configs/grpo/qwen3-8b-lora-1gpu.yaml"), "--steps", str(args.grpo_steps),
                                  "--no-full",  # full fine-tuning of 8B with AdamW needs > 128 GB: not on one H200
                                  "--eval-proofs", "16",
                                  "--batch", "16", "--generations", "8", "--completion-length", "256",
                                  "--train-arg", f"expert_files={REPO / 'data/samples/annotated.jsonl'}",
                                  "--train-arg", "mix_ratios=0.5 0.0 0.5",  # shipped expert + synthetic rows
                                  "--train-arg", "gradient_accumulation_steps=1"], env, out / "train_real.log"),
    ]
    sys.path.insert(0, str(HERE))
    from run_all import write_json

    print(f"# gpu_check: {torch.cuda.get_device_name(0)}\n")
    print("\n".join(tables))
    missing = write_json(out / "gpu_check.json", figures, [HERE / "serve_real.py", HERE / "train_real.py"], 0,
                         time.perf_counter() - t0, quick=False)
    print(f"\nJSON: {out / 'gpu_check.json'}")
    return missing


if __name__ == "__main__":
    sys.exit(main())
