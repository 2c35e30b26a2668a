"""What a model was trained with travels with it: the card's chat template options and completion
length are the defaults of `serve`, `verify` and `score verifier` (an explicit flag wins; a smaller
limit or other template options than the card's are warned about)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proofcheck.prompt_card import CARD_FILE, generation_defaults, read_prompt_card, write_prompt_card

THINKING = {"enable_thinking": True}
QWEN3_CARD = {"with_reference": False, "prompt_style": "full", "chat_template_kwargs": THINKING,
              "max_completion_length": 8192}  # what the Qwen3 recipes' training writes
OLD_CARD = {"with_reference": False, "prompt_style": "full"}  # written before these fields existed

# card, --chat-template-kwargs, --max-tokens -> template options, tokens per pass, engine context, warnings
TABLE = [
    (QWEN3_CARD, None, None, THINKING, 8192, 12288, []),
    (QWEN3_CARD, None, 16384, THINKING, 16384, 20480, []),  # more room than training: no warning
    (QWEN3_CARD, None, 1024, THINKING, 1024, 4096, ["trained with completions of up to 8192 tokens"]),
    (QWEN3_CARD, {"enable_thinking": False}, None, {"enable_thinking": False}, 8192, 12288,
     ["trained with chat template options"]),
    (QWEN3_CARD, THINKING, 8192, THINKING, 8192, 12288, []),  # the same values, given explicitly
    (OLD_CARD, None, None, {}, 1024, 4096, []),
    (OLD_CARD, THINKING, 2048, THINKING, 2048, 6144, []),  # nothing recorded: nothing to warn about
    (None, None, None, {}, 1024, 4096, []),
]


@pytest.mark.parametrize(("card", "ctk", "max_tokens", "want_ctk", "want_tokens", "want_len", "warns"), TABLE)
def test_flag_then_card_then_default(card: dict | None, ctk: dict | None, max_tokens: int | None, want_ctk: dict,
                                     want_tokens: int, want_len: int, warns: list[str]) -> None:
    gen = generation_defaults(card, ctk, max_tokens)
    assert (gen.chat_template_kwargs, gen.max_tokens, gen.max_model_len) == (want_ctk, want_tokens, want_len)
    assert len(gen.warnings) == len(warns) and all(w.startswith(s) for w, s in zip(gen.warnings, warns, strict=True))


def test_training_writes_what_serving_reads(tmp_path: Path) -> None:
    write_prompt_card(tmp_path, False, chat_template_kwargs=THINKING, max_completion_length=8192)
    card = read_prompt_card(tmp_path)
    assert card["chat_template_kwargs"] == THINKING and card["max_completion_length"] == 8192
    with pytest.raises(ValueError, match="max_completion_length"):
        write_prompt_card(tmp_path, False, max_completion_length=0)


def test_serve_defaults_from_the_card_and_the_flag_wins(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`proofcheck serve --model DIR`'s settings, as build_service starts the engine with them (no engine here)."""
    from proofcheck.serve.server import ServeConfig, check_config, served_card, served_generation

    (tmp_path / CARD_FILE).write_text(json.dumps(QWEN3_CARD))
    cfg = ServeConfig(model=str(tmp_path))
    gen, model_len = served_generation(cfg, served_card(cfg))
    assert (gen.chat_template_kwargs, gen.max_tokens, model_len) == (THINKING, 8192, 12288)
    assert capsys.readouterr().err == ""
    cfg = ServeConfig(model=str(tmp_path), max_tokens=512, chat_template_kwargs={"enable_thinking": False})
    gen, model_len = served_generation(cfg, served_card(cfg))
    assert (gen.chat_template_kwargs, gen.max_tokens, model_len) == ({"enable_thinking": False}, 512, 4096)
    err = capsys.readouterr().err
    assert "up to 8192 tokens, run with --max-tokens 512" in err and "trained with chat template options" in err
    with pytest.raises(ValueError, match="raise --max-model-len to at least 12288"):
        check_config(ServeConfig(model=str(tmp_path), max_model_len=4096))
    # fronting a vLLM server: no card, the defaults
    gen, _ = served_generation(ServeConfig(endpoint="http://127.0.0.1:9/v1"), None)
    assert (gen.chat_template_kwargs, gen.max_tokens) == ({}, 1024)


def test_health_reports_the_template_options() -> None:
    from proofcheck.serve.engines import RemoteEngine
    from proofcheck.serve.service import VerificationService
    from proofcheck.serve.verifier import Verifier

    engine = RemoteEngine("http://127.0.0.1:9/v1", "m", chat_template_kwargs=THINKING)
    service = VerificationService(Verifier(engine, max_tokens=8192, model="m"), engine_kind="remote", model_names=["m"])
    health = service.health()
    assert health.chat_template_kwargs == THINKING and health.max_tokens == 8192


@pytest.mark.parametrize("command", [["serve", "--model"], ["verify", "--problem", "p", "--proof", "q", "--model"],
                                     ["score", "verifier", "--data", "d", "--out", "o", "--model"]])
def test_help_says_where_the_defaults_come_from(command: list[str]) -> None:
    from proofcheck.app.cli import build_parser

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command[0]]
    if command[0] == "score":
        sub = sub._subparsers._group_actions[0].choices["verifier"]
    text = " ".join(sub.format_help().split())
    assert "proofcheck_prompt.json" in text and "--max-tokens" in text


def test_serve_help_explains_the_card() -> None:
    proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "serve", "--help"], capture_output=True, text=True,
                          timeout=60)
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0
    assert "proofcheck_prompt.json" in text and "enable_thinking" in text and "An explicit flag wins" in text
