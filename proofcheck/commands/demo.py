"""`proofcheck demo`: the whole pipeline on CPU with the tiny local model and shipped data."""

from __future__ import annotations

import argparse
from typing import Any

from proofcheck.commands._common import add_command, fail


def register(sub: Any) -> None:
    p = add_command(sub, "demo", "Run the embedded default end to end on CPU: build the tiny model, validate "
                    "the shipped data, verify sample proofs with 8 vLLM passes, print verdicts and metrics.")
    p.add_argument("--workdir", default="runs/demo", help="where the demo keeps what it builds (reused on re-run)")
    p.add_argument("--proofs", type=int, default=6, help="number of sample proofs to verify")
    p.add_argument("--passes", type=int, default=8, help="verifier passes per proof")
    p.add_argument("--max-tokens", type=int, default=256, help="max tokens per pass")
    p.add_argument("--seed", type=int, default=0, help="seed for model building and sampling")
    p.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from proofcheck.demo import StageFailed, run_demo

    try:
        run_demo(args.workdir, n_proofs=args.proofs, passes=args.passes, seed=args.seed, max_tokens=args.max_tokens)
    except StageFailed as e:
        return fail(str(e))
    return 0
