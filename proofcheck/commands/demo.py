"""`proofcheck demo`: the whole pipeline on CPU (SmolLM2-135M by default, `--quick`: the tiny model)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from proofcheck.commands._common import add_command, fail

# flag -> DemoConfig field; unset flags keep the default of the chosen mode (real or --quick)
SIZES = {"--sft-steps": "sft_steps", "--grpo-steps": "grpo_steps", "--sft-tasks": "sft_tasks",
         "--grpo-tasks": "grpo_tasks", "--eval-tasks": "eval_tasks", "--eval-passes": "eval_passes",
         "--passes": "passes", "--repeats": "repeats", "--max-tokens": "max_tokens"}


def register(sub: Any) -> None:
    p = add_command(sub, "demo", "Run the embedded default end to end on CPU: SmolLM2-135M-Instruct (built from "
                    "the PyPI wheel, no download), a synthetic curriculum, SFT warm-up, GRPO (TRL + vLLM "
                    "colocate) with the held-out evaluation before and after, the verification service, 8-pass "
                    "ProverBench scoring and VerifierBench evaluation on the shipped samples. About 20 minutes "
                    "on 2 cores; --quick runs the same stages on the tiny random model in a few. Re-runs reuse "
                    "what is built in --workdir; writes <workdir>/summary.json.")
    p.add_argument("--quick", action="store_true", help="the tiny random model instead of SmolLM2: a pipeline "
                   "check whose numbers say nothing about verification")
    p.add_argument("--workdir", help="where the demo keeps what it builds (default: runs/demo, "
                   "runs/demo-quick with --quick)")
    p.add_argument("--seed", type=int, default=0, help="seed for everything")
    for flag, name in SIZES.items():
        p.add_argument(flag, type=int, dest=name, help=f"override the mode's {name.replace('_', ' ')}")
    p.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from proofcheck.demo import DemoConfig, StageFailed, run_demo

    sizes = {name: getattr(args, name) for name in SIZES.values() if getattr(args, name) is not None}
    bad = [f"{flag}={sizes[name]}" for flag, name in SIZES.items() if name in sizes and sizes[name] < 1]
    if bad:
        return fail(f"{', '.join(bad)}: sizes must be >= 1")
    workdir = Path(args.workdir or ("runs/demo-quick" if args.quick else "runs/demo"))
    make = DemoConfig.quick if args.quick else DemoConfig
    cfg = make(workdir=workdir, seed=args.seed, **sizes)
    try:
        run_demo(cfg)
    except StageFailed as e:
        return fail(str(e))
    return 0
