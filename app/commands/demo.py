"""`proofcheck demo`: the whole pipeline on CPU (SmolLM2-135M by default, `--quick`: the tiny model)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proofcheck.app.commands._common import add_command, fail
from proofcheck.data.rationale import RATIONALE_FORMS
from proofcheck.protocol import PROMPT_STYLES

if TYPE_CHECKING:
    from proofcheck.app.demo_config import DemoConfig

# flag -> DemoConfig field; unset flags keep the default of the chosen mode (real or --quick)
SIZES = {"--sft-steps": "sft_steps", "--grpo-steps": "grpo_steps", "--sft-tasks": "sft_tasks",
         "--grpo-tasks": "grpo_tasks", "--eval-tasks": "eval_tasks", "--eval-passes": "eval_passes",
         "--passes": "passes", "--repeats": "repeats", "--max-tokens": "max_tokens", "--curve-every": "curve_every",
         "--curve-tasks": "curve_tasks"}


def register(sub: Any) -> None:
    p = add_command(sub, "demo", "Run the whole pipeline on this CPU: SmolLM2-135M-Instruct in 20-30 minutes, said first "
                    "(--quick: the tiny random model in a few minutes; --full: the 90-minute recipe).",
                    "Run the embedded default end to end on CPU: SmolLM2-135M-Instruct (built from the PyPI wheel, no "
                    "download), a synthetic curriculum, SFT warm-up, GRPO (TRL + vLLM colocate) with the held-out "
                    "evaluation before and after, the verification service, 8-pass scoring of a synthetic prover of "
                    "known valid rate and of the shipped samples. Runs a 48-step warm-up and at least 40 GRPO steps; "
                    "its first line says how long that takes on this machine (fp32 where the CPU lacks native bf16); "
                    "--quick runs the same stages on the tiny random model in a few minutes. Re-runs reuse what is "
                    "built in --workdir; writes <workdir>/report.md (its path printed last), summary.json and the "
                    "plots. Every stage runs on TCMalloc where it is installed (apt-get install libtcmalloc-minimal4: "
                    "~1.4x faster training steps); PROOFCHECK_ALLOCATOR=glibc keeps glibc's.")
    p.add_argument("--quick", action="store_true", help="the tiny random model instead of SmolLM2: a pipeline "
                   "check whose numbers say nothing about verification")
    p.add_argument("--full", action="store_true", help="the long CPU training recipe (also `make train-cpu`): "
                   "90 minutes, one verifier for all six families (the recomputed rationale; 3/4 of the time to "
                   "the warm-up, a quarter of its proofs with 3x numbers or a step longer; GRPO at 1e-4 for the "
                   "rest), 192 held-out proofs (32 per family) x 4 passes before and after GRPO, a learning-curve "
                   "point every 15 GRPO steps; judged against the recipe's targets "
                   "(held-out Balanced F1 >= 0.85, >= 0.70 and TNR >= 0.70 in every family, GRPO's paired gain above "
                   "twice its SE, TNR not lower). With --families chain: the chains recipe (a 64-step warm-up, GRPO "
                   "at 2e-4 for the rest, 128 held-out chains)")
    p.add_argument("--workdir", help="where the demo keeps what it builds (default: runs/demo, "
                   "runs/train-cpu with --full, runs/demo-quick with --quick)")
    p.add_argument("--seed", type=int, default=0, help="seed for everything")
    p.add_argument("--dtype", choices=["auto", "bfloat16", "bf16", "float32", "fp32"],
                   help="compute dtype of every stage (SFT, GRPO, vLLM). Default: the PROOFCHECK_DTYPE environment "
                   "variable, else auto: bf16 only on CPUs that run it natively (avx512_bf16 / AMX), fp32 otherwise")
    p.add_argument("--budget-min", type=float, help="wall-clock budget in minutes (default: none for the demo, which "
                   "runs a 48-step warm-up and at least 40 GRPO steps and prints first how long that takes here; 20 "
                   "with --quick, 90 with --full): the SFT and GRPO step counts are sized from their first steps to "
                   "fit it (--sft-steps / --grpo-steps are the most)")
    p.add_argument("--families", help="proof families of the curriculum: `all` or a comma list (chain, prose, "
                   "linear, expand, parity, inequality; `proofcheck data synth --help`). Default: chain for the demo (its "
                   "20 minutes teach one family to check, not six), all with --full and --quick")
    p.add_argument("--prompt-style", choices=PROMPT_STYLES, help="verifier prompt for SFT, GRPO, evaluation and "
                   "serving (recorded in the model folder; serve/verify/score use it by default). Default: the "
                   "demo's, compact, the CPU recipe's choice (configs/grpo/smollm2-cpu.yaml): about half the tokens "
                   "of full, the default everywhere else")
    p.add_argument("--exclude-family", help="leave these families (comma list) out of SFT and GRPO only: the "
                   "held-out set keeps them, so the per-family table measures transfer to an unseen family")
    p.add_argument("--rationale", choices=RATIONALE_FORMS, help="the gold verification the SFT warm-up imitates "
                   "(docs/curriculum.md): checks (each family's own shorthand, some lines only assert) or recomputed "
                   "(one form in every family, each step recomputed before its verdict; about twice the tokens, so "
                   "GRPO and evaluation generate up to 400). Default: recomputed with --full on six families, checks "
                   "otherwise")
    p.add_argument("--no-score", dest="score", action="store_false", help="stop after GRPO's held-out evaluation: "
                   "no serving, no scoring of the synthetic prover or the shipped samples, and their time reserve "
                   "goes to training (benchmarks/leave_one_out.py, whose measurement is the held-out set)")
    for flag, name in SIZES.items():
        p.add_argument(flag, type=int, dest=name, help=f"override the mode's {name.replace('_', ' ')}" + (
            " (kept as given: --full otherwise cuts its held-out evaluation on a slow host to fit GRPO's time)"
            if name == "eval_tasks" else ""))
    p.set_defaults(handler=_demo)


def demo_config(args: argparse.Namespace) -> DemoConfig:
    """The `DemoConfig` the flags ask for (the mode's defaults, the flags given on top); ValueError names a bad flag."""
    from proofcheck.app.demo import DemoConfig
    from proofcheck.data.families import family_choice

    sizes = {name: getattr(args, name) for name in SIZES.values() if getattr(args, name) is not None}
    bad = [f"{flag}={sizes[name]}" for flag, name in SIZES.items() if name in sizes and sizes[name] < 1]
    if bad:
        raise ValueError(f"{', '.join(bad)}: sizes must be >= 1")
    if args.quick and args.full:
        raise ValueError("--quick and --full: choose one (--quick: the tiny model; --full: the long SmolLM2 recipe)")
    workdir = Path(args.workdir or ("runs/demo-quick" if args.quick else "runs/train-cpu" if args.full else "runs/demo"))
    make = DemoConfig.quick if args.quick else DemoConfig.full_recipe if args.full else DemoConfig
    # the default demo runs its steps and says first how long they take here; --quick / --full / --budget-min fit a budget
    budget_min = args.budget_min if args.budget_min is not None else 90.0 if args.full else 20.0 if args.quick else None
    if budget_min is not None and budget_min <= 0:
        raise ValueError(f"--budget-min={budget_min}: give a positive number of minutes, e.g. 20")
    if args.budget_min is not None or "grpo_steps" in sizes:   # the caller's size: no floor of 40 GRPO steps
        sizes.setdefault("grpo_floor", None)
    return make(workdir=workdir, seed=args.seed, dtype=args.dtype, budget_s=None if budget_min is None else budget_min * 60,
                **({} if args.families is None else  # chain alone: the historical chains (family_choice)
                   {"families": None if family_choice(args.families) is None else args.families}),
                exclude_family=args.exclude_family, score=args.score, fit_eval="eval_tasks" not in sizes,
                **({"rationale": args.rationale} if args.rationale else {}),
                **({"prompt_style": args.prompt_style} if args.prompt_style else {}), **sizes)


def _demo(args: argparse.Namespace) -> int:
    from proofcheck.allocator import choose_allocator
    from proofcheck.app.demo import StageFailed, run_demo

    try:
        choose_allocator()
        cfg = demo_config(args)
    except ValueError as e:
        return fail(str(e))
    try:
        run_demo(cfg)
    except StageFailed as e:
        return fail(str(e))
    return 0
