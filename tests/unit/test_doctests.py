"""Every example in a docstring (`>>> ...`) runs and shows what it says it shows.

The examples are the API's documentation, read before the code; nothing ran them, so one could go stale
unseen (`data.heldout.varied_training`'s showed the sizes of a family filter removed a day before). Each module
of the installed packages (pyproject's `package-dir`) that holds an example is one case; ELLIPSIS and
NORMALIZE_WHITESPACE are on, as the examples use `...` for what varies.
"""

from __future__ import annotations

import doctest
import importlib
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def modules_with_examples() -> list[str]:
    """Import names of the package modules whose source holds `>>>`."""
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    names = []
    for package, folder in dirs.items():   # the folders are siblings: none holds another's package
        for path in sorted((REPO / folder).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                parts = path.relative_to(REPO / folder).with_suffix("").parts
                names.append(".".join([package, *(p for p in parts if p != "__init__")]))
    return names


MODULES = modules_with_examples()


def test_the_examples_are_found_and_run() -> None:
    assert {"proofcheck.parsing", "proofcheck.data.heldout", "proofcheck.data.families"} <= set(MODULES)
    assert doctest.testmod(importlib.import_module("proofcheck.data.heldout")).attempted > 0


@pytest.mark.parametrize("module", MODULES)
def test_the_examples_run(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS |
                             doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, capsys.readouterr().out   # (a module whose examples are all +SKIP attempts none)
