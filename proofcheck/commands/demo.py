"""`proofcheck demo`: the whole pipeline on CPU with the tiny local model and shipped data."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from proofcheck.commands._common import add_command, fail


def register(sub: Any) -> None:
    p = add_command(sub, "demo", "Run the embedded default end to end on CPU: tiny model, training set, SFT "
                    "warm-up, GRPO (TRL + vLLM), before/after evaluation, the verification service, 8-pass "
                    "ProverBench scoring and VerifierBench evaluation on the shipped samples. Re-runs reuse "
                    "what is built in --workdir.")
    p.add_argument("--workdir", default="runs/demo", help="where the demo keeps what it builds")
    p.add_argument("--seed", type=int, default=0, help="seed for everything")
    p.add_argument("--sft-steps", type=int, default=300, help="supervised warm-up steps")
    p.add_argument("--grpo-steps", type=int, default=40, help="GRPO steps")
    p.add_argument("--synthetic", type=int, default=160, help="synthetic tasks in the training set")
    p.add_argument("--eval-tasks", type=int, default=24, help="held-out synthetic tasks for before/after")
    p.add_argument("--passes", type=int, default=8, help="verification passes per proof when scoring")
    p.add_argument("--repeats", type=int, default=2, help="verifier repeats per annotated proof")
    p.add_argument("--max-tokens", type=int, default=96, help="max tokens per verifier pass")
    p.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from proofcheck.demo import DemoConfig, StageFailed, run_demo

    if min(args.sft_steps, args.grpo_steps, args.passes, args.repeats, args.eval_tasks) < 1:
        return fail("step counts, --passes, --repeats and --eval-tasks must be >= 1")
    cfg = DemoConfig(workdir=Path(args.workdir), seed=args.seed, synthetic=args.synthetic, sft_steps=args.sft_steps,
                     grpo_steps=args.grpo_steps, eval_tasks=args.eval_tasks, passes=args.passes,
                     repeats=args.repeats, max_tokens=args.max_tokens)
    try:
        run_demo(cfg)
    except StageFailed as e:
        return fail(str(e))
    return 0
