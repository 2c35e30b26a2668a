"""One CLI vocabulary (README, "Command-line vocabulary"), checked on every subcommand's parser:
each shared flag has one meaning and one help text everywhere, every command that ends with a
summary takes --json, the exit codes mean the same in every command, old spellings still work
(hidden, with a warning) for one release, and `proofcheck --version` answers."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from proofcheck.cli import build_parser, main
from proofcheck.commands import _common as c

REPO = Path(__file__).resolve().parents[2]


def leaves(parser: argparse.ArgumentParser, path: str = "proofcheck"):
    """(command path, parser) of every command that runs something."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if parser.get_default("handler") is not None:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaves(sub, f"{path} {name}")


LEAVES = dict(leaves(build_parser()))
# commands that do not end with a summary: long-running servers, and runs that stream another
# program's logs and write their summary files (train: run_summary.json; demo: report.md)
NO_SUMMARY = {"proofcheck serve", "proofcheck annotate", "proofcheck train", "proofcheck demo"}

# flag -> (metavar, text its help starts with or contains): one meaning everywhere
VOCABULARY = {
    "--model": ("PATH_OR_ID", c.MODEL_HELP),
    "--endpoint-model": ("NAME", c.ENDPOINT_MODEL_HELP),
    "--endpoint-api-key-env": ("VAR", "environment variable holding the API key sent to --endpoint"),
    "--judge-api-key-env": ("VAR", "environment variable holding the API key sent to --judge-endpoint"),
    "--require-api-key-env": ("VAR", c.REQUIRE_KEY_HELP),
    "--served-model-name": ("NAME", "with --model: the name this service publishes"),
    "--json": (None, c.JSON_HELP),
    "--prompt-style": ("STYLE", c.PROMPT_STYLE_HELP),
}
OLD_SPELLINGS = {"--api-key-env", "--api-key", "--base-url"}  # hidden, deprecated
# (command, flag) whose meaning is the command's own: the demo trains its model, so its --prompt-style
# chooses the style to train with (and record), where the others override a trained model's style
OWN_MEANING = {("proofcheck demo", "--prompt-style")}


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def test_the_commands_are_seen() -> None:
    assert {"proofcheck score verifier", "proofcheck generate", "proofcheck bench mcq", "proofcheck data select",
            "proofcheck serve", "proofcheck verify", "proofcheck train", "proofcheck grade"} <= set(LEAVES)
    assert len(LEAVES) >= 20


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_shared_flags_keep_one_meaning(path: str) -> None:
    for flag, action in options(LEAVES[path]).items():
        if flag in VOCABULARY and action.help != argparse.SUPPRESS and (path, flag) not in OWN_MEANING:
            metavar, text = VOCABULARY[flag]
            assert action.metavar == metavar, f"{path} {flag}: metavar {action.metavar!r}, want {metavar!r}"
            assert text in (action.help or ""), f"{path} {flag}: help {action.help!r} does not say {text!r}"
        if flag in OLD_SPELLINGS:
            assert action.help == argparse.SUPPRESS, f"{path} {flag}: an old spelling must be hidden"
            assert isinstance(action, c._Deprecated), f"{path} {flag}: an old spelling must warn"


@pytest.mark.parametrize("path", sorted(set(LEAVES) - NO_SUMMARY))
def test_every_command_with_a_summary_takes_json(path: str) -> None:
    assert "--json" in options(LEAVES[path]), f"{path} has no --json"


def test_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "proofcheck.cli", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and re.fullmatch(r"proofcheck \S+\n", proc.stdout)


def test_readme_documents_the_vocabulary_and_the_exit_codes() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Command-line vocabulary"):]
    section = section[:section.index("\n## ", 3)]
    for flag in [*VOCABULARY, "--served-model-name", "--version", "--with-reference"]:
        assert f"`{flag}" in section, flag
    for code in c.EXIT_CODES:
        assert re.search(rf"^\| {code} \|", section, re.M), f"exit code {code} is not in the README table"
    for old in OLD_SPELLINGS:
        assert f"{old} " in section, f"the README must say what {old} became"


# One usage error per command: exit 2, found before any request (no server is running here).
USAGE_ERRORS = [
    ["score", "prover", "--problems", "p", "--submissions", "s", "--endpoint", "http://127.0.0.1:9/v1", "--out",
     "o", "--concurrency", "0"],
    ["score", "verifier", "--data", "d", "--endpoint", "http://127.0.0.1:9/v1", "--out", "o", "--judge-endpoint",
     "http://127.0.0.1:9/v1"],
    ["score", "verifier", "--data", "d", "--endpoint", "http://127.0.0.1:9/v1", "--out", "o",
     "--endpoint-api-key-env", "PC_SURELY_UNSET_VAR"],
    ["generate", "--problems", "p", "--endpoint", "http://127.0.0.1:9/v1", "--out", "o"],
    ["verify", "--endpoint", "http://127.0.0.1:9", "--problem", "p", "--proof", "a", "--endpoint-api-key-env",
     "PC_SURELY_UNSET_VAR"],
    ["serve", "--model", "m", "--require-api-key-env", "PC_SURELY_UNSET_VAR"],
    ["data", "synth", "--n", "0", "--out", "o"],
    ["data", "select", "--proofs", "p", "--verifier", "http://127.0.0.1:9/v1", "--out", "o",
     "--endpoint-api-key-env", "PC_SURELY_UNSET_VAR"],
    ["grade", "--data", "d", "--outputs", "o", "--out", "g", "--mode", "judge"],
    ["metrics"],
    ["bench", "mcq", "--month", "209901", "--backend", "vllm", "--endpoint-model", "m"],
    ["model", "tiny", "--out", "o", "--hidden-size", "33"],
    ["train", "--config", "no-such-recipe.yaml"],
    ["annotate"],
    ["score", "verifier", "--no-such-flag"],  # argparse's own usage errors are 2 as well
]


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=[" ".join(a[:2]) for a in USAGE_ERRORS])
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    assert rc == c.EXIT_USAGE, capsys.readouterr().err
    assert "error" in capsys.readouterr().err


# old spelling -> the option it stands for, and the value it must give that option
DEPRECATED = [
    (["score", "verifier", "--data", "d", "--endpoint", "u", "--out", "o", "--api-key-env", "K"],
     "endpoint_api_key_env", "K", "--endpoint-api-key-env"),
    (["verify", "--endpoint", "u", "--problem", "p", "--proof", "x", "--api-key-env", "K"],
     "endpoint_api_key_env", "K", "--endpoint-api-key-env"),
    (["data", "repair", "--rejected", "r", "--repairer", "u", "--checker", "u", "--out", "o", "--api-key-env", "K"],
     "endpoint_api_key_env", "K", "--endpoint-api-key-env"),
    (["serve", "--model", "m", "--api-key-env", "K"], "require_api_key_env", "K", "--require-api-key-env"),
    (["bench", "mcq", "--month", "1", "--backend", "vllm", "--model", "m"], "endpoint_model", "m", "--endpoint-model"),
    (["bench", "mcq", "--month", "1", "--backend", "vllm", "--base-url", "u"], "endpoint", "u", "--endpoint"),
]


@pytest.mark.parametrize(("argv", "dest", "value", "new"), DEPRECATED, ids=[f"{a[0]} {a[-2]}" for a, *_ in DEPRECATED])
def test_old_spellings_work_for_one_release(argv: list[str], dest: str, value: str, new: str,
                                            capsys: pytest.CaptureFixture) -> None:
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    err = capsys.readouterr().err
    assert f"warning: {argv[-2]} is deprecated" in err and f"use {new}" in err


def test_generate_model_with_endpoint_means_the_served_name_for_one_release(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "proofcheck.cli", "generate", "--problems", "missing.jsonl",
                           "--endpoint", "http://127.0.0.1:9/v1", "--model", "prover", "--out", "o.jsonl"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert "warning: --model NAME with --endpoint is deprecated" in proc.stderr and "--endpoint-model" in proc.stderr
    assert proc.returncode == 1 and "missing.jsonl" in proc.stderr  # went on to read the problems
