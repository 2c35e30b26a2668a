"""Supervised warm-up: teach a fresh model the verifier's output format before GRPO.

A randomly initialised model almost never writes a parsable verdict, so every GRPO sample
scores 0 and there is no advantage to learn from. A short run of TRL's SFTTrainer on
synthetic tasks with gold verifications (exact labels, `data.synth`) fixes the format; GRPO
then has rewards that differ within a group.

    python -m proofcheck.train.sft --model runs/tiny-model --out runs/sft --tasks 512 --steps 200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def sft_rows(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conversational prompt/completion rows: the verifier prompt (as GRPO renders it, reference
    solution included) and the gold verification."""
    from proofcheck.protocol import verifier_messages

    return [{"prompt": verifier_messages(t["problem"], t["steps"], t.get("reference_solution")),
             "completion": [{"role": "assistant", "content": t["gold_verification"]}]} for t in tasks]


def warmup(model: str | Path, out: str | Path, *, tasks: int = 512, steps: int = 200, seed: int = 0,
           learning_rate: float = 1e-3, batch_size: int = 8) -> Path:
    """Fine-tune `model` on `tasks` synthetic gold verifications for `steps` steps; save to `out`."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from proofcheck.data.synth import make_tasks

    out = Path(out)
    ds = datasets.Dataset.from_list(sft_rows(make_tasks(tasks, seed=seed + 1000)))
    tok = AutoTokenizer.from_pretrained(model)
    config = SFTConfig(output_dir=str(out / "trainer"), max_steps=steps, per_device_train_batch_size=batch_size,
                       learning_rate=learning_rate, lr_scheduler_type="cosine", warmup_steps=max(1, steps // 20),
                       logging_steps=max(1, steps // 20), save_strategy="no", report_to="none", use_cpu=True,
                       bf16=False, seed=seed, max_length=2048, completion_only_loss=True, disable_tqdm=True)
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(model, dtype="float32"), args=config,
                         train_dataset=ds, processing_class=tok)
    trainer.train()
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model folder to start from")
    ap.add_argument("--out", required=True, help="where to save the warmed-up model")
    ap.add_argument("--tasks", type=int, default=512, help="synthetic tasks to train on")
    ap.add_argument("--steps", type=int, default=200, help="optimisation steps")
    ap.add_argument("--lr", type=float, default=1e-3, help="learning rate")
    ap.add_argument("--seed", type=int, default=0, help="seed")
    args = ap.parse_args(argv)
    warmup(args.model, args.out, tasks=args.tasks, steps=args.steps, seed=args.seed, learning_rate=args.lr)
    print(f"warmed-up model saved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
