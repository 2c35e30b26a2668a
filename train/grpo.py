"""GRPO training of a proof verifier: the entry for `python` and `accelerate launch`.

    accelerate launch train/grpo.py --config configs/grpo/tiny-cpu.yaml [--flag value ...]

Parses TRL's GRPOConfig + ModelConfig + ProofcheckScriptArguments (train/config.py) from the
YAML recipe and CLI overrides, then runs TRL's GRPOTrainer (train/run.py). Heavy libraries are
imported only after parsing; `--help` answers at once, `--help-all` lists every TRL option.
`--plan [--plan_accelerate configs/accelerate/X.yaml] [--plan_gpu_gib 80]` prints the per-GPU memory
plan and batch arithmetic of the recipe without loading anything (train/plan.py).
Exit codes: 0 done, 2 configuration or data error (message on stderr, nothing loaded).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, Python puts train/ first on sys.path, where config.py, data.py, ... would
# shadow top-level modules of the same names: the package is imported as proofcheck.train.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--help-all" in argv:
        from proofcheck.train.args import make_parser

        make_parser().print_help()
        return 0
    if "-h" in argv or "--help" in argv:
        from proofcheck.train.args import quick_help

        print(quick_help())
        return 0
    from proofcheck.data.loaders import DataError
    from proofcheck.train.args import parse
    from proofcheck.train.config import ConfigError
    from proofcheck.train.plan import split_plan_args

    plan, argv = split_plan_args(argv)  # --plan: the per-GPU memory plan, nothing loaded (train/plan.py)
    try:
        script, training, model = parse(argv, require_data=plan is None)
        if plan is not None:
            from proofcheck.train.plan import print_plan

            return print_plan(script, training, model, plan)
        from proofcheck.train.run import train

        train(script, training, model)
    except (ConfigError, DataError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
