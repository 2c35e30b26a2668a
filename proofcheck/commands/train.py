"""`proofcheck train`: GRPO training with `accelerate launch` on the packaged `train/grpo.py`.

An installed package trains without the repository checkout: the entry script is found inside
the installed `proofcheck.train` package. Everything after the options below goes to
train/grpo.py unchanged (TRL's GRPOConfig, ModelConfig and our script arguments).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from proofcheck.commands._common import EXIT_ERROR, EXIT_USAGE, add_command, fail

DESCRIPTION = """\
Train a verifier with TRL's GRPOTrainer: runs

  accelerate launch [--config_file ACCELERATE_YAML] [--num_processes N] <installed train/grpo.py> \\
      --config RECIPE.yaml [train/grpo.py options ...]

Options after --config go to train/grpo.py unchanged, e.g. `--model_name_or_path DIR --max_steps 50`;
`proofcheck train --config R.yaml --help-all` lists every one of them (TRL's GRPOConfig and ModelConfig,
and proofcheck's data, reward and evaluation arguments). Recipes: configs/grpo/*.yaml in the repository.
The run writes <output_dir>/run_summary.json and the model (merged/ and/or adapter/), each folder with
proofcheck_prompt.json (the prompt setting `score verifier` compares with its own)."""


def grpo_script() -> Path:
    """Path of the installed `proofcheck.train.grpo` module (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("proofcheck.train.grpo")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("proofcheck.train.grpo is not installed; reinstall proofcheck (make install)")
    return Path(spec.origin)


def launch_command(args: argparse.Namespace) -> list[str]:
    """The `accelerate launch` command line this invocation runs."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if args.accelerate_config:
        cmd += ["--config_file", args.accelerate_config]
    if args.num_processes is not None:
        cmd += ["--num_processes", str(args.num_processes)]
    return [*cmd, str(grpo_script()), "--config", args.config, *args.grpo_args]


def register(sub: Any) -> None:
    p = add_command(sub, "train", "Train a verifier with GRPO: `accelerate launch` on the packaged train/grpo.py "
                    "with a YAML recipe and any TRL / proofcheck overrides.", DESCRIPTION)
    p.usage = "proofcheck train --config RECIPE.yaml [options] [train/grpo.py options ...]"
    p.add_argument("--config", required=True, metavar="RECIPE.yaml", help="the training recipe, e.g. "
                   "configs/grpo/qwen3-8b-lora-1gpu.yaml (TRL's GRPOConfig + ModelConfig + proofcheck's arguments)")
    p.add_argument("--accelerate-config", metavar="YAML", help="accelerate's config file (multi-GPU, DeepSpeed "
                   "ZeRO, FSDP, multi-node), e.g. configs/accelerate/zero3.yaml; default: accelerate's own")
    p.add_argument("--num-processes", type=int, help="processes to launch (accelerate's --num_processes)")
    p.add_argument("--print-command", action="store_true", help="print the command and exit without running it")
    # every other option goes to train/grpo.py as given (proofcheck.cli collects them: `passthrough`)
    p.set_defaults(handler=_train, passthrough="grpo_args", grpo_args=[])


def _train(args: argparse.Namespace) -> int:
    if not Path(args.config).is_file():
        return fail(f"--config {args.config}: no such file (recipes live in configs/grpo/ in the repository)",
                    EXIT_USAGE)
    if args.accelerate_config and not Path(args.accelerate_config).is_file():
        return fail(f"--accelerate-config {args.accelerate_config}: no such file", EXIT_USAGE)
    if args.num_processes is not None and args.num_processes < 1:
        return fail("--num-processes must be >= 1", EXIT_USAGE)
    try:
        cmd = launch_command(args)
    except FileNotFoundError as e:
        return fail(str(e))
    print(shlex.join(cmd), file=sys.stderr if not args.print_command else sys.stdout, flush=True)
    if args.print_command:
        return 0
    rc = subprocess.call(cmd)
    if rc == 0:
        return 0
    # train/grpo.py exits 2 for a configuration or data error found before loading anything
    return EXIT_USAGE if rc == EXIT_USAGE else EXIT_ERROR
