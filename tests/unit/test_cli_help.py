"""Every `proofcheck ... --help`: each option's default is shown once, never as "(default: None)"."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from proofcheck.app.cli import build_parser


def parsers(parser: argparse.ArgumentParser, path: str = "proofcheck") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


ALL = list(parsers(build_parser()))


def option_helps(parser: argparse.ArgumentParser) -> list[str]:
    """The help text of each option as printed (one entry per option, whitespace collapsed)."""
    text = parser.format_help()
    return [re.sub(r"\s+", " ", chunk) for chunk in re.split(r"\n  (?=-)", text)[1:]]


@pytest.mark.parametrize(("path", "parser"), ALL, ids=[p for p, _ in ALL])
def test_defaults_shown_once_and_only_when_meaningful(path: str, parser: argparse.ArgumentParser) -> None:
    for entry in option_helps(parser):
        for empty in ("(default: None)", "(default: False)", "(default: )"):
            assert empty not in entry, f"{path}: {entry}"
        assert entry.count("(default:") <= 1, f"{path}: {entry}"


def test_a_real_default_is_still_shown() -> None:
    helps = dict(ALL)["proofcheck score prover"].format_help()
    assert re.search(r"--passes PASSES\s+verifier passes per proof \(default: 8\)", helps)
    assert re.search(r"--endpoint-model NAME\s+the model's name at --endpoint, as that server serves\s+"
                     r"it \(default: its first model\)\n", helps)
