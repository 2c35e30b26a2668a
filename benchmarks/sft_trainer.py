"""Benchmark: the SFT warm-up on TRL's SFTTrainer (`train/sft_trainer.py`, answer-only vocabulary projection)
against the hand-written loop it replaced (`_sft_hand.py`, the baseline), side by side in one run.

Both train SmolLM2-135M-Instruct from the same folder on the same synthetic tasks (the demo's warm-up settings:
arithmetic chains, compact prompts, LoRA r=16 on every layer, lr 1e-3, batches of 8, the compute dtype
`proofcheck.precision` picks for this CPU) for the same number of steps, one after the other in this process;
then each trained model verifies the same held-out proofs (drawn with another seed) with sampled `model.generate`
passes, graded by the structural meta-verifier (`train/eval_generation.verify_rows`).

Prints a Markdown table: median seconds per step (the first step left out: it pays for warm-up allocations),
last loss, held-out rough Balanced F1 +- SE and the step-time ratio SFTTrainer / hand loop; and the paired
difference of the held-out Balanced F1 (SFTTrainer - hand loop, bootstrap SE over the same proofs).

    flock /tmp/heavy.lock .venv/bin/python benchmarks/sft_trainer.py [--steps 24] [--eval-tasks 64] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from _figures import emit, real_model


def held_out(n: int, style: str) -> list[dict[str, Any]]:
    """`n` held-out synthetic proofs (seed 4242, away from the training draw's seed 1000) as evaluation rows."""
    from proofcheck.train.data import add_prompts, synthetic_rows

    return add_prompts(synthetic_rows(n, seed=4242), with_reference=False, style=style)


def evaluate(model: Path, rows: list[dict[str, Any]], passes: int, bf16: bool) -> list[dict[str, Any]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from proofcheck.train.eval_generation import verify_rows

    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(model)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        return verify_rows(net, tok, rows, passes=passes, max_new_tokens=128, temperature=1.0, batch_size=16, seed=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="SmolLM2 folder (default runs/smollm2, built if missing)")
    ap.add_argument("--work", default="runs/bench-sft-trainer", help="where the two trained models go")
    ap.add_argument("--steps", type=int, default=24, help="training steps of each arm")
    ap.add_argument("--tasks", type=int, default=256, help="synthetic training tasks")
    ap.add_argument("--eval-tasks", type=int, default=64, help="held-out proofs")
    ap.add_argument("--passes", type=int, default=2, help="sampled passes per held-out proof")
    ap.add_argument("--quick", action="store_true", help="the tiny random model, 3 steps, 8 held-out proofs")
    args = ap.parse_args()
    from _sft_hand import hand_warmup

    from proofcheck.data.synth import balanced_tasks
    from proofcheck.metrics import eval_metrics, paired_gain
    from proofcheck.precision import choose_dtype
    from proofcheck.train.sft import warmup

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.quick:
        from proofcheck.models.tiny_model import build_tiny_model

        model = work / "tiny"
        if not (model / "config.json").is_file():
            build_tiny_model(model)
        args.steps, args.eval_tasks, args.tasks = 3, 8, 32
    else:
        model = real_model(args.model)
    choice = choose_dtype(device="cpu")
    style, lr, lora_r, batch = "compact", 1e-3, 16, 8
    tasks = balanced_tasks(args.tasks, seed=1000)
    print(f"model {model}, dtype {choice.short} ({choice.reason}), {args.steps} steps x {batch} tasks, LoRA r={lora_r}, "
          f"lr {lr}", flush=True)
    arms: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    hand = hand_warmup(model, work / "hand", tasks, steps=args.steps, lr=lr, lora_r=lora_r, batch_size=batch, seed=0,
                       bf16=choice.bf16, style=style)
    arms["hand loop (baseline)"] = {"step_s": hand["step_s"], "last_loss": hand["losses"][-1], "out": work / "hand",
                                    "wall_s": time.perf_counter() - t0}
    said: list[str] = []
    t0 = time.perf_counter()
    out = work / "sft-trainer"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    warmup(model, out, tasks=tasks, steps=args.steps, seed=0, learning_rate=lr, batch_size=batch, dtype=choice.dtype,
           lora_r=lora_r, prompt_style=style, log=lambda m: (said.append(m), print(m, flush=True)))
    plan = json.loads((out / "sft_plan.json").read_text())
    losses = [float(m.split(" loss ")[1].split()[0]) for m in said if " loss " in m]
    arms["SFTTrainer (answer-only head)"] = {"step_s": plan["step_s"], "last_loss": losses[-1], "out": out,
                                             "wall_s": time.perf_counter() - t0}
    rows = held_out(args.eval_tasks, style)
    for arm in arms.values():
        arm["results"] = evaluate(arm["out"], rows, args.passes, choice.bf16)
        arm["metrics"] = eval_metrics(arm["results"])
        arm["median_s"] = statistics.median(arm["step_s"][1:] or arm["step_s"])
    base, new = arms["hand loop (baseline)"], arms["SFTTrainer (answer-only head)"]
    print(f"\n### SFT warm-up step: SFTTrainer vs the hand loop ({model.name}, {choice.short}, {args.steps} steps, "
          f"held-out {args.eval_tasks} proofs x {args.passes} passes)\n")
    print("| arm | median s/step (steps 2..) | mean s/step | last loss | held-out rough Bal-F1 +- SE | valid rate | "
          "ratio vs hand loop |")
    print("|---|---|---|---|---|---|---|")
    for name, arm in arms.items():
        m = arm["metrics"]
        print(f"| {name} | {arm['median_s']:.2f} | {statistics.mean(arm['step_s']):.2f} | {arm['last_loss']:.4f} | "
              f"{m['rough_bal_f1']:.3f} +- {m['rough_bal_f1_se'] or 0:.3f} | {m['valid_rate']:.3f} | "
              f"{arm['median_s'] / base['median_s']:.2f}x |")
    gain = paired_gain(base["results"], new["results"])
    print(f"\nheld-out rough Bal-F1, SFTTrainer - hand loop (paired): {gain['rough_bal_f1_gain']:+.3f} +- "
          f"{gain['rough_bal_f1_gain_se'] or 0:.3f}")
    emit({"sft.trainer_vs_hand_step_ratio": round(new["median_s"] / base["median_s"], 3),
          "sft.hand_median_step_s": round(base["median_s"], 2), "sft.trainer_median_step_s": round(new["median_s"], 2),
          "sft.trainer_minus_hand_bal_f1": gain["rough_bal_f1_gain"]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
