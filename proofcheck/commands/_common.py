"""Helpers shared by the CLI subcommands (all light: no heavy imports)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows defaults and keeps the description's line breaks."""


def add_command(sub: Any, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """Add a subcommand parser with our formatter."""
    return sub.add_parser(name, help=help, description=description or help, formatter_class=HelpFormatter)


def fail(message: str, code: int = 1) -> int:
    """Print an error for the user on stderr and return the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False))
