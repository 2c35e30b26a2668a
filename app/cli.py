"""The `proofcheck` command line.

Each subcommand lives in a light module listed in `COMMANDS` that defines
`register(subparsers)`; handlers import heavy libraries (torch, vLLM, TRL) only when they
run, so `proofcheck --help` and every `--help` answer at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand group -> module defining `register(subparsers)`; order is the --help order.
COMMANDS: tuple[str, ...] = (
    "proofcheck.app.commands.data",
    "proofcheck.app.commands.metrics",
    "proofcheck.app.commands.grade",
    "proofcheck.app.commands.train",
    "proofcheck.app.commands.score",
    "proofcheck.app.commands.calibrate",
    "proofcheck.app.commands.serve",
    "proofcheck.app.commands.model",
    "proofcheck.app.commands.bench",
    "proofcheck.app.commands.annotate",
    "proofcheck.app.commands.demo",
)

DESCRIPTION = """\
proofcheck: train, serve and use proof verifiers.

A verifier reads a stepped proof and answers <assessment>, <errors> and <first_error_step>
(-1 = valid). Eight sampled passes give a pessimistic decision: accept only if all accept.
Run `proofcheck <command> --help` for the options of each command. Training is
`proofcheck train --config RECIPE.yaml` (accelerate launch on the packaged train/grpo.py).

Exit codes, the same for every command: 0 success; 1 error (bad input data or a failure
while running); 2 usage (a bad option or configuration, found before any request);
3 incomplete (the run ended without every result: rerun with --resume)."""


def version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("proofcheck")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="proofcheck", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"proofcheck {version()}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for module in COMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the chosen handler; returns the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # only a command that hands its other options on (`proofcheck train`) accepts them
        if getattr(args, "passthrough", None) is None:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        setattr(args, args.passthrough, [*getattr(args, args.passthrough), *extra])
    handler = getattr(args, "handler", None)
    if handler is None:  # a group such as `proofcheck data` without its subcommand
        parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "--help"])
        return 2
    if getattr(args, "json", False):  # stdout carries the JSON alone; every log goes to stderr
        from proofcheck.app.commands._common import json_only_stdout

        with json_only_stdout():
            return int(handler(args) or 0)
    return int(handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
