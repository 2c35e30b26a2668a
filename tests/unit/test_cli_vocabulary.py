"""One CLI vocabulary (docs/cli.md, "Command-line vocabulary"), checked on every subcommand's parser:
each shared flag has one meaning and one help text everywhere, every command that ends with a
summary takes --json, the exit codes mean the same in every command, old spellings still work
(hidden, with a warning) for one release, `proofcheck --version` answers, and every command and
flag shown in a code block of the README, CONTRIBUTING.md or docs/ exists (deprecated ones are not shown)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from proofcheck.app.cli import build_parser, main
from proofcheck.app.commands import _common as c

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
    "--endpoint-api-key-env": ("VAR", "environment variable holding the API key sent to "),
    "--judge-api-key-env": ("VAR", "environment variable holding the API key sent to --judge-endpoint"),
    "--require-api-key-env": ("VAR", c.REQUIRE_KEY_HELP),
    "--served-model-name": ("NAME", "with --model: the name this service publishes"),
    "--json": (None, c.JSON_HELP),
    "--prompt-style": ("STYLE", c.PROMPT_STYLE_HELP),
    "--rule": ("RULE", c.RULE_HELP),
}
OLD_SPELLINGS = {"--api-key-env", "--api-key", "--base-url", "--cache-dir"}  # hidden, deprecated
# old spellings of one command only (the same name means something else in other commands)
OLD_IN = {("proofcheck grade", "--max-tokens")}
# (command, flag) whose meaning is the command's own: the demo trains its model, so its --prompt-style
# chooses the style to train with (and record), and `data distill`'s the style of the SFT rows it writes, where
# the others override a trained model's style
OWN_MEANING = {("proofcheck demo", "--prompt-style"), ("proofcheck data distill", "--prompt-style")}


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
        if flag in OLD_SPELLINGS or (path, flag) in OLD_IN:
            assert action.help == argparse.SUPPRESS, f"{path} {flag}: an old spelling must be hidden"
            assert isinstance(action, c._Deprecated), f"{path} {flag}: an old spelling must warn"


@pytest.mark.parametrize("path", sorted(set(LEAVES) - NO_SUMMARY))
def test_every_command_with_a_summary_takes_json(path: str) -> None:
    assert "--json" in options(LEAVES[path]), f"{path} has no --json"


def test_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and re.fullmatch(r"proofcheck \S+\n", proc.stdout)


def test_the_cli_reference_documents_the_vocabulary_and_the_exit_codes() -> None:
    reference = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    section = reference[reference.index("## Command-line vocabulary"):]
    section = section[:section.index("\n## ", 3)]
    for flag in [*VOCABULARY, "--served-model-name", "--version", "--with-reference"]:
        assert f"`{flag}" in section, flag
    for code in c.EXIT_CODES:
        assert re.search(rf"^\| {code} \|", section, re.M), f"exit code {code} is not in docs/cli.md's table"
    for old in OLD_SPELLINGS:
        assert f"{old} " in section, f"docs/cli.md must say what {old} became"


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
    (["grade", "--data", "d", "--outputs", "o", "--out", "g", "--cache-dir", "c"], "judge_cache_dir", "c",
     "--judge-cache-dir"),
    (["grade", "--data", "d", "--outputs", "o", "--out", "g", "--max-tokens", "64"], "judge_max_tokens", 64,
     "--judge-max-tokens"),
]


@pytest.mark.parametrize(("argv", "dest", "value", "new"), DEPRECATED, ids=[f"{a[0]} {a[-2]}" for a, *_ in DEPRECATED])
def test_old_spellings_work_for_one_release(argv: list[str], dest: str, value: str, new: str,
                                            capsys: pytest.CaptureFixture) -> None:
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    err = capsys.readouterr().err
    assert f"warning: {argv[-2]} is deprecated" in err and f"use {new}" in err


def test_generate_model_with_endpoint_means_the_served_name_for_one_release(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "generate", "--problems", "missing.jsonl",
                           "--endpoint", "http://127.0.0.1:9/v1", "--model", "prover", "--out", "o.jsonl"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert "warning: --model NAME with --endpoint is deprecated" in proc.stderr and "--endpoint-model" in proc.stderr
    assert proc.returncode == 1 and "missing.jsonl" in proc.stderr  # went on to read the problems


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_help_names_only_options_the_command_has(path: str) -> None:
    """A help text that says "sent to --endpoint" in a command without --endpoint sends the reader nowhere."""
    parser = LEAVES[path]
    own = set(options(parser))
    for action in parser._actions:
        if action.help in (None, argparse.SUPPRESS):
            continue
        for named in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", action.help):
            if parser.get_default("passthrough") and "_" in named:
                continue  # `proofcheck train` hands accelerate's and train/grpo.py's options on
            assert named in own, f"{path} {action.option_strings}: help names {named}, which {path} does not have"


@pytest.mark.parametrize("flag", ["--judge-endpoint", "--judge-model", "--judge-api-key-env", "--judge-prompt-file",
                                  "--judge-cache-dir"])
def test_grade_and_score_verifier_judge_options_agree(flag: str) -> None:
    grade, score = options(LEAVES["proofcheck grade"]), options(LEAVES["proofcheck score verifier"])
    assert grade[flag].metavar == score[flag].metavar
    if flag != "--judge-cache-dir":  # where answers are cached by default differs: grade has no run folder
        assert grade[flag].help == score[flag].help
    assert LEAVES["proofcheck grade"].get_default("scale") == "benchmark"  # score verifier's meta metrics' scale


def test_help_texts_end_with_a_whole_sentence() -> None:
    """Every command's one-line summary in `proofcheck --help` ends like a sentence, not cut mid-way."""
    text = build_parser().format_help()
    assert "in a few." not in " ".join(text.split())
    for action in build_parser()._subparsers._group_actions[0]._choices_actions:
        assert action.help.rstrip().endswith((".", ")")), action.help


# -- every command and flag the documentation shows exists ---------------------------------------
DOC_FILES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
# what `proofcheck train` hands on besides its own options: train/grpo.py's memory-plan flags and --help-all
TRAIN_ENTRY_FLAGS = {"--plan_accelerate", "--plan_gpu_gib", "--plan_prompt_tokens", "--help-all"}


def documented_commands() -> list[tuple[str, list[str]]]:
    from doc_blocks import code_blocks, proofcheck_commands

    return [(doc.relative_to(REPO).as_posix(), argv) for doc in DOC_FILES
            for _, body in code_blocks(doc.read_text(encoding="utf-8")) for argv in proofcheck_commands(body)]


DOCUMENTED = documented_commands()


def train_passthrough() -> set[str]:
    """Options `proofcheck train` hands on: accelerate launch's and train/grpo.py's (both spellings)."""
    from accelerate.commands.launch import launch_command_parser

    from proofcheck.train.args import make_parser

    names = {s for p in (launch_command_parser(), make_parser()) for a in p._actions for s in a.option_strings}
    return names | {n.replace("_", "-") for n in names} | TRAIN_ENTRY_FLAGS


def test_the_docs_show_commands_at_all() -> None:
    docs = {doc for doc, _ in DOCUMENTED}
    assert {"README.md", "docs/serving.md", "docs/training.md", "docs/scoring.md", "docs/curation.md",
            "docs/mcq.md"} <= docs
    assert any(argv[:1] == ["train"] and "--num_machines" in argv for _, argv in DOCUMENTED)  # SLURM, through train


@pytest.mark.parametrize(("doc", "argv"), DOCUMENTED, ids=[f"{d}: {' '.join(a[:3])}" for d, a in DOCUMENTED])
def test_documented_commands_and_flags_exist(doc: str, argv: list[str]) -> None:
    parser, path, rest = build_parser(), "proofcheck", list(argv)
    while rest and (subs := [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]):
        if rest[0] not in subs[0].choices:
            break
        parser, path = subs[0].choices[rest[0]], f"{path} {rest.pop(0)}"
    assert parser.get_default("handler") is not None, f"{doc}: `proofcheck {' '.join(argv)}` names no command"
    own = set(options(parser))
    allowed = own | (train_passthrough() if parser.get_default("passthrough") else set())
    for token in rest:
        flag = token.split("=", 1)[0]
        if flag.startswith("--"):
            assert flag in allowed, f"{doc}: `{path}` has no option {flag}"
            action = options(parser).get(flag)
            assert action is None or action.help != argparse.SUPPRESS, f"{doc}: shows the deprecated {flag}"
