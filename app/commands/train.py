"""`proofcheck train`: GRPO training with `accelerate launch` on the packaged `train/grpo.py`, or the supervised
stage on `train/supervised.py` for a recipe with `stage: sft` (configs/sft/).

An installed package trains without the repository checkout: the entry script is found inside
the installed `proofcheck.train` package, and the shipped recipes and accelerate configurations
(`configs/`, packaged as `proofcheck.configs`) are found by name. The options after
`proofcheck train`'s own are split: those `accelerate launch` knows (`--num_machines`,
`--machine_rank`, `--main_process_ip`, ... in either spelling) go to accelerate, every other one
to train/grpo.py unchanged (TRL's GRPOConfig, ModelConfig and our script arguments).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from proofcheck.allocator import choose_allocator
from proofcheck.app.commands._common import EXIT_ERROR, EXIT_USAGE, add_command, fail
from proofcheck.app.launch import grpo_script, resolve_config, shipped_names

RECIPE_KINDS = ("grpo", "sft")  # the shipped recipe folders, searched in this order for a name

DESCRIPTION = """\
Train a verifier with TRL's GRPOTrainer: runs

  accelerate launch [--config_file ACCELERATE_YAML] [accelerate options] <installed train/grpo.py> \\
      --config RECIPE.yaml [train/grpo.py options ...]

Every option accelerate launch knows goes to it, in either spelling: --num_processes, --num_machines,
--machine_rank, --main_process_ip, --main_process_port, --rdzv_backend, --same_network,
--mixed_precision, --gpu_ids, --multi_gpu, ... (`accelerate launch --help`). The few that
train/grpo.py also has (--gradient_accumulation_steps, --debug) keep train/grpo.py's meaning: set
them in the accelerate config. Every other option goes to train/grpo.py unchanged, e.g.
`--model_name_or_path DIR --max_steps 50`; `proofcheck train --config R.yaml --help-all` lists them
(TRL's GRPOConfig and ModelConfig, and proofcheck's data, reward and evaluation arguments).

A recipe with `stage: sft` (configs/sft/*.yaml) runs the supervised stage instead: `accelerate launch` on the
packaged train/supervised.py (TRL's SFTTrainer; SFTConfig, ModelConfig and proofcheck's SFT arguments), e.g. on
the verifications `proofcheck data distill` kept.

--config and --accelerate-config take a path, or the name of a shipped file (configs/grpo/*.yaml,
configs/sft/*.yaml, configs/accelerate/*.yaml, also inside an installed package): `--config qwen3-8b-lora-1gpu`.
--plan prints the recipe's memory plan per GPU and its batch arithmetic without loading anything.

The run writes <output_dir>/run_summary.json and the model (merged/ and/or adapter/), each folder with
proofcheck_prompt.json: the prompt setting, chat template options and completion length it was
trained with, which serve, verify and score verifier default to."""

# accelerate launch options that train/grpo.py has too: the recipe's meaning wins (set accelerate's in its config)
GRPO_OWNS = frozenset({"debug", "gradient_accumulation_steps", "help"})


def accelerate_options() -> dict[str, int]:
    """accelerate launch's options (underscore spelling, without `--`) -> values each takes (0 or 1).

    Read from accelerate's own parser, so a newer accelerate's options pass through too (heavy
    import: called when training starts, never for --help).
    """
    from accelerate.commands.launch import launch_command_parser

    out: dict[str, int] = {}
    for action in launch_command_parser()._actions:
        takes = 0 if action.nargs == 0 else 1
        for flag in action.option_strings:
            if flag.startswith("--"):
                out[flag[2:].replace("-", "_")] = takes
    return {name: n for name, n in out.items() if name not in GRPO_OWNS}


def split_launch_args(args: list[str], options: dict[str, int]) -> tuple[list[str], list[str]]:
    """(options for accelerate launch, options for train/grpo.py) from the options given after ours.

    An option is accelerate's when its name, in either spelling, is in `options` (name -> values it
    takes); its value goes with it (`--x v` or `--x=v`). Everything else stays for train/grpo.py, in order.

    >>> split_launch_args(["--machine-rank", "1", "--max_steps", "3", "--same_network", "--main_process_ip=h"],
    ...                   {"machine_rank": 1, "same_network": 0, "main_process_ip": 1})
    (['--machine-rank', '1', '--same_network', '--main_process_ip=h'], ['--max_steps', '3'])
    """
    launch: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        item = args[i]
        name, eq, _ = item.partition("=")
        key = name[2:].replace("-", "_") if name.startswith("--") else None
        if key in options:
            takes = 0 if eq else options[key]
            launch += args[i:i + 1 + takes]
            i += 1 + takes
        else:
            rest.append(item)
            i += 1
    return launch, rest


def recipe_script(recipe: str) -> Path:
    """The entry a recipe runs: the installed train/supervised.py for `stage: sft`, else train/grpo.py."""
    import importlib.util

    import yaml

    raw = yaml.safe_load(Path(recipe).read_text(encoding="utf-8"))
    if not (isinstance(raw, dict) and raw.get("stage") == "sft"):
        return grpo_script()
    spec = importlib.util.find_spec("proofcheck.train.supervised")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("proofcheck.train.supervised is not installed; reinstall proofcheck (make install)")
    return Path(spec.origin)


def launch_command(args: argparse.Namespace, launch_args: list[str] | None = None) -> list[str]:
    """The command line this invocation runs: `accelerate launch` on the recipe's entry (train/grpo.py, or
    train/supervised.py for `stage: sft`), or with --plan that entry alone (the plan loads nothing and reads the
    processes from the accelerate config)."""
    script = [str(recipe_script(args.config)), "--config", str(args.config), *args.grpo_args]
    if args.plan:
        plan = ["--plan", *(["--plan_accelerate", str(args.accelerate_config)] if args.accelerate_config else [])]
        return [sys.executable, *script, *plan]
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if args.accelerate_config:
        cmd += ["--config_file", str(args.accelerate_config)]
    if args.num_processes is not None:
        cmd += ["--num_processes", str(args.num_processes)]
    return [*cmd, *(launch_args or []), *script]


def register(sub: Any) -> None:
    p = add_command(sub, "train", "Train a verifier with GRPO: `accelerate launch` on the packaged train/grpo.py "
                    "with a YAML recipe, accelerate's options and any TRL / proofcheck overrides.", DESCRIPTION)
    p.usage = ("proofcheck train --config RECIPE [--accelerate-config YAML] [--plan] [accelerate options] "
               "[train/grpo.py options ...]")
    p.add_argument("--config", required=True, metavar="RECIPE", help="the training recipe: a path or a shipped "
                   "name, e.g. configs/grpo/qwen3-8b-lora-1gpu.yaml or qwen3-8b-lora-1gpu (TRL's GRPOConfig + "
                   "ModelConfig + proofcheck's arguments)")
    p.add_argument("--accelerate-config", metavar="YAML", help="accelerate's config file (multi-GPU, DeepSpeed ZeRO, "
                   "FSDP, multi-node), a path or a shipped name, e.g. configs/accelerate/zero3.yaml or zero3; "
                   "default: accelerate's own")
    p.add_argument("--num-processes", type=int, help="processes to launch (accelerate's --num_processes)")
    p.add_argument("--plan", action="store_true", help="print the memory plan per GPU (weights, gradients, "
                   "optimizer, activations, vLLM's share and KV cache) and the batch arithmetic of the recipe "
                   "under --accelerate-config, without loading anything; --plan_gpu_gib N (default 80) and "
                   "--plan_prompt_tokens N (default 2048) go with it")
    p.add_argument("--print-command", action="store_true", help="print the command and exit without running it")
    # every other option goes to accelerate or train/grpo.py (proofcheck.app.cli collects them: `passthrough`)
    p.set_defaults(handler=_train, passthrough="grpo_args", grpo_args=[])


def _resolve(args: argparse.Namespace) -> str | None:
    """Replace --config / --accelerate-config by the files they name; the error message, or None."""
    recipe = next((found for kind in RECIPE_KINDS if (found := resolve_config(args.config, kind))), None)
    if recipe is None:
        shipped = [n for kind in RECIPE_KINDS for n in shipped_names(kind)]
        return (f"--config {args.config}: no such file, and no shipped recipe of that name (shipped: "
                f"{', '.join(shipped) or 'none found'})")
    args.config = recipe
    if args.accelerate_config:
        acc = resolve_config(args.accelerate_config, "accelerate")
        if acc is None:
            return (f"--accelerate-config {args.accelerate_config}: no such file, and no shipped accelerate config "
                    f"of that name (shipped: {', '.join(shipped_names('accelerate')) or 'none found'})")
        args.accelerate_config = acc
    if args.num_processes is not None and args.num_processes < 1:
        return "--num-processes must be >= 1"
    return None


def _train(args: argparse.Namespace) -> int:
    if (msg := _resolve(args)) is not None:
        return fail(msg, EXIT_USAGE)
    try:
        launch, args.grpo_args = split_launch_args(args.grpo_args, accelerate_options())
        if args.plan and (launch or args.num_processes is not None):
            print(f"note: --plan reads the processes from --accelerate-config; not used: "
                  f"{shlex.join([*launch, *(['--num-processes'] if args.num_processes else [])])}", file=sys.stderr)
        cmd = launch_command(args, launch)
    except FileNotFoundError as e:
        return fail(str(e))
    print(shlex.join(cmd), file=sys.stderr if not args.print_command else sys.stdout, flush=True)
    if args.print_command:
        return 0
    try:
        alloc = choose_allocator()
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    print(f"allocator: {alloc.name} ({alloc.reason})", file=sys.stderr, flush=True)
    rc = subprocess.call(cmd, env={**os.environ, **alloc.env()})
    if rc == 0:
        return 0
    # train/grpo.py exits 2 for a configuration or data error found before loading anything
    return EXIT_USAGE if rc == EXIT_USAGE else EXIT_ERROR
