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


EXIT_USAGE = 2  # bad configuration found before any request (argparse uses 2 as well)
EXIT_INCOMPLETE = 3  # the run finished or stopped without every result: endpoint errors, missing outputs


class UsageError(ValueError):
    """A configuration error found before any request; the CLI exits with `EXIT_USAGE`."""


def api_key(env_name: str | None) -> str | None:
    """The API key in the environment variable `env_name` (None when no variable is named).

    A named variable that is unset or empty is a `UsageError`: sending no key would only turn
    every request into a 401 later.
    """
    import os

    if not env_name:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise UsageError(f"--api-key-env {env_name}: the variable {env_name} is not set (or empty); "
                         f"export {env_name}=<key> first, or drop --api-key-env for an endpoint without a key")
    return key


def fail(message: str, code: int = 1) -> int:
    """Print an error for the user on stderr and return the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False))
