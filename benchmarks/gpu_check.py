"""GPU check for one H200 (about 10 minutes): real-size shapes, random weights, no downloads.

    bash benchmarks/gpu_check.sh            # or: python benchmarks/gpu_check.py --out runs/gpu_check

1. Build a Qwen3-8B-shaped model (36 layers, hidden 4096, GQA 32/8, MLP 12288) with random bf16
   weights on the GPU and our tiny tokenizer (its small vocabulary changes nothing that matters
   for throughput: the body holds ~7B parameters).
2. 8-pass verification throughput with vLLM: 64 proofs x n=8, fixed-length outputs
   (`ignore_eos`), decode tokens/s against the memory-bandwidth roofline
   (concurrent sequences x bandwidth / weight bytes per decode step).
3. GRPO steps with TRL + vLLM colocate + LoRA on the same model (`train/grpo.py`), seconds per step.
Prints one Markdown table. Skips (exit 0, says why) when no CUDA device is present.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
H200_BANDWIDTH = 4.8e12  # bytes/s (HBM3e)


def build_model(out: Path) -> int:
    """Random Qwen3-8B-shaped model in bf16; returns the parameter count."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from proofcheck.tiny_model import build_tiny_model

    tiny = build_tiny_model(out.parent / "tiny-tokenizer-source")
    tok = AutoTokenizer.from_pretrained(tiny)
    config = Qwen3Config(vocab_size=len(tok), hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
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


def throughput(model_dir: Path, n_params: int, proofs: int, passes: int, tokens: int) -> dict:
    from vllm import LLM, SamplingParams

    from proofcheck.data.synth import make_tasks
    from proofcheck.protocol import verifier_messages

    llm = LLM(model=str(model_dir), dtype="bfloat16", gpu_memory_utilization=0.85, max_model_len=4096, seed=0)
    convs = [verifier_messages(t["problem"], t["steps"], t["reference_solution"]) for t in make_tasks(proofs, seed=1)]
    params = SamplingParams(n=passes, max_tokens=tokens, temperature=1.0, ignore_eos=True, seed=0)
    llm.chat(convs[:2], params, use_tqdm=False)  # warm-up
    t0 = time.perf_counter()
    outs = llm.chat(convs, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    generated = sum(len(c.token_ids) for o in outs for c in o.outputs)
    concurrent = proofs * passes
    roofline = concurrent * H200_BANDWIDTH / (2 * n_params)
    return {"wall_s": wall, "tokens": generated, "tok_s": generated / wall, "roofline_tok_s": roofline,
            "verifications_s": proofs / wall}


def grpo(model_dir: Path, out: Path, steps: int) -> dict:
    cmd = [sys.executable, str(REPO / "train/grpo.py"), "--config", str(REPO / "configs/grpo/qwen3-8b-lora-1gpu.yaml"),
           "--model_name_or_path", str(model_dir), "--output_dir", str(out), "--expert_files",
           str(REPO / "data/samples/annotated.jsonl"), "--synthetic_count", "64", "--max_steps", str(steps),
           "--max_completion_length", "256", "--report_to", "none", "--save_strategy", "no",
           "--eval_max_samples", "0", "--save_merged", "false", "--save_adapter", "false",
           "--logging_steps", "1"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"GRPO failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "run_summary.json").read_text())
    return {"wall_s": wall, "train_runtime_s": summary["train_runtime_s"], "steps": summary["global_step"],
            "s_per_step": summary["train_runtime_s"] / max(1, summary["global_step"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/gpu_check", help="work folder (the model is ~15 GB)")
    ap.add_argument("--proofs", type=int, default=64)
    ap.add_argument("--passes", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=512, help="fixed output length per pass")
    ap.add_argument("--grpo-steps", type=int, default=5)
    ap.add_argument("--stage", choices=("all", "build", "throughput", "grpo"), default="all")
    ap.add_argument("--quick", action="store_true", help="accepted for make bench; same as the default")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: skipped (no CUDA device on this machine)")
        return 0
    out = Path(args.out)
    model_dir = out / "qwen3-8b-shaped"
    # each stage in its own process so GPU memory is returned between them
    if args.stage == "all":
        rows = {}
        for stage in ("build", "throughput", "grpo"):
            proc = subprocess.run([sys.executable, __file__, "--stage", stage, "--out", str(out), "--proofs",
                                   str(args.proofs), "--passes", str(args.passes), "--tokens", str(args.tokens),
                                   "--grpo-steps", str(args.grpo_steps)], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"stage {stage} failed:\n{proc.stderr[-3000:]}")
                return 1
            rows[stage] = json.loads(proc.stdout.strip().splitlines()[-1])
        n, tp, g = rows["build"]["params"], rows["throughput"], rows["grpo"]
        print(f"| measurement | value | baseline | ratio |\n|---|---:|---:|---:|\n"
              f"| model | {n / 1e9:.2f} B params (Qwen3-8B shape, random bf16) | | |\n"
              f"| 8-pass decode tok/s ({args.proofs} proofs x n={args.passes}, {args.tokens} tokens, ignore_eos) "
              f"| {tp['tok_s']:.0f} | roofline {tp['roofline_tok_s']:.0f} | {tp['tok_s'] / tp['roofline_tok_s']:.2f} |\n"
              f"| verifications/s (8 passes each) | {tp['verifications_s']:.2f} | | |\n"
              f"| GRPO s/step (LoRA, vLLM colocate, 256-token completions) | {g['s_per_step']:.1f} | | |")
        return 0
    if args.stage == "build":
        print(json.dumps({"params": build_model(model_dir)}))
    elif args.stage == "throughput":
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(model_dir)
        n = (cfg.num_hidden_layers * (cfg.hidden_size * cfg.head_dim * (cfg.num_attention_heads * 2 +
             cfg.num_key_value_heads * 2) + 3 * cfg.hidden_size * cfg.intermediate_size) +
             2 * cfg.vocab_size * cfg.hidden_size)
        print(json.dumps(throughput(model_dir, n, args.proofs, args.passes, args.tokens)))
    else:
        print(json.dumps(grpo(model_dir, out / "grpo", args.grpo_steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
