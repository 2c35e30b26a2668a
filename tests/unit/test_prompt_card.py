"""Training and evaluation agree on the reference solution: one setting, off by default on both
sides, recorded beside the trained weights, and `score verifier` warns on a mismatch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proofcheck.prompt_card import CARD_FILE, read_prompt_card, reference_mismatch, write_prompt_card
from proofcheck.train.config import ProofcheckScriptArguments
from proofcheck.train.data import build_training_data


def test_training_default_is_no_reference_like_evaluation() -> None:
    from proofcheck.app.cli import build_parser

    assert ProofcheckScriptArguments(synthetic_count=1).include_reference_solution is False
    args = build_parser().parse_args(["score", "verifier", "--data", "d", "--model", "m", "--out", "o"])
    assert args.with_reference is False


@pytest.mark.parametrize(("with_reference", "marker"), [(False, False), (True, True)])
def test_the_setting_reaches_the_prompts_and_the_summary(with_reference: bool, marker: bool) -> None:
    data = build_training_data(ProofcheckScriptArguments(synthetic_count=8, eval_fraction=0.25,
                                                         include_reference_solution=with_reference))
    assert len(data.train) > 0 and len(data.eval) > 0
    for row in data.train + data.eval:
        assert ("Reference solution" in row["prompt"][-1]["content"]) is marker
    assert data.summary()["with_reference"] is with_reference


@pytest.mark.parametrize(("card", "evaluated_with", "says"), [
    ({"with_reference": True}, True, None),
    ({"with_reference": False}, False, None),
    ({"with_reference": True}, False, "trained with the reference solution in its prompt, evaluated without it"),
    ({"with_reference": False}, True, "trained without the reference solution in its prompt, evaluated with it"),
    (None, True, None),  # not trained by proofcheck: nothing to compare
    (None, False, None),
])
def test_mismatch_table(card: dict | None, evaluated_with: bool, says: str | None) -> None:
    msg = reference_mismatch(card, evaluated_with)
    assert (msg is None) if says is None else msg.startswith(says)


def test_card_round_trip_and_bad_cards(tmp_path: Path) -> None:
    assert read_prompt_card(tmp_path) is None
    write_prompt_card(tmp_path, True)
    assert read_prompt_card(tmp_path)["with_reference"] is True
    (tmp_path / CARD_FILE).write_text('{"with_reference": "yes"}')
    assert read_prompt_card(tmp_path) is None  # unreadable cards are ignored, never guessed


@pytest.mark.parametrize(("trained_with", "flag", "warned"), [(True, [], True), (True, ["--with-reference"], False),
                                                             (False, ["--with-reference"], True)])
def test_score_verifier_warns_on_a_mismatch(tmp_path: Path, trained_with: bool, flag: list[str],
                                            warned: bool) -> None:
    model = tmp_path / "merged"
    model.mkdir()
    (model / CARD_FILE).write_text(json.dumps({"with_reference": trained_with}))
    # --concurrency 0 stops the command right after the warning, before any model is loaded
    proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "score", "verifier", "--data", "d.jsonl",
                           "--model", str(model), "--out", str(tmp_path / "run"), "--concurrency", "0", *flag],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--concurrency must be >= 1" in proc.stderr
    assert ("warning:" in proc.stderr and "evaluated with" in proc.stderr) is warned, proc.stderr


@pytest.mark.parametrize(("env", "error"), [({"PC_JUDGE_KEY": "k"}, None), ({}, "judge_api_key_env='PC_JUDGE_KEY'")])
def test_training_names_the_judge_key_like_the_cli(monkeypatch: pytest.MonkeyPatch, env: dict, error: str | None
                                                   ) -> None:
    """Training's judge key is an environment variable named in the recipe, as --judge-api-key-env."""
    from proofcheck.train.config import ConfigError

    monkeypatch.delenv("PC_JUDGE_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    kw = dict(synthetic_count=1, reward_mode="hybrid", judge_endpoint="http://127.0.0.1:9/v1", judge_model="j",
              judge_api_key_env="PC_JUDGE_KEY")
    if error is None:
        assert ProofcheckScriptArguments(**kw).reward_kwargs("meta_verifier")["api_key_env"] == "PC_JUDGE_KEY"
    else:
        with pytest.raises(ConfigError, match=error):
            ProofcheckScriptArguments(**kw)


@pytest.mark.parametrize(("served", "flag", "warned"), [(True, [], True), (True, ["--with-reference"], False),
                                                        (None, [], False)])
def test_score_verifier_reads_the_served_models_setting(tmp_path: Path, served: bool | None, flag: list[str],
                                                        warned: bool) -> None:
    """Against a proofcheck service, the setting comes from GET /health (the service reads the card)."""
    from proofcheck.serve.app import create_app
    from proofcheck.serve.engines import RemoteEngine
    from proofcheck.serve.scripted import Reply, ScriptedServer
    from proofcheck.serve.server import ServerThread
    from proofcheck.serve.service import VerificationService
    from proofcheck.serve.verifier import Verifier

    with ScriptedServer(lambda req, i: Reply("")) as upstream:
        service = VerificationService(Verifier(RemoteEngine(upstream.url, "m"), model="m"), engine_kind="remote",
                                      model_names=["m"], trained_with_reference=served)
        with ServerThread(create_app(service)) as srv:
            proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "score", "verifier", "--data", "d.jsonl",
                                   "--endpoint", srv.url, "--out", str(tmp_path / "run"), "--concurrency", "0", *flag],
                                  capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert ("warning:" in proc.stderr and "trained with the reference" in proc.stderr) is warned, proc.stderr


def test_health_has_the_field_and_the_card_its_content(tmp_path: Path) -> None:
    """/health carries the setting; `proofcheck serve --model DIR` fills it from DIR's card (serve/server.py)."""
    from proofcheck.serve.schemas import Health

    assert "trained_with_reference" in Health.model_fields
    write_prompt_card(tmp_path, True)
    assert read_prompt_card(tmp_path) == {"with_reference": True, "prompt_sha256": None, "prompt_style": "full",
                                          "written_by": "proofcheck train/grpo.py", "chat_template_kwargs": {},
                                          "max_completion_length": None}


@pytest.mark.parametrize(("adapter_style", "model_style", "expected"), [
    ("compact", "full", "compact"),   # the adapter's card first: the requests run on the adapter
    (None, "compact", "compact"),     # no adapter card: the model folder's
    (None, None, None),               # neither: not trained by proofcheck
])
def test_weights_card_reads_the_adapters_card_before_the_models(tmp_path, adapter_style, model_style,
                                                                expected) -> None:
    from proofcheck.prompt_card import weights_card, write_prompt_card

    model, adapter = tmp_path / "model", tmp_path / "adapter"
    for folder, style in ((model, model_style), (adapter, adapter_style)):
        folder.mkdir()
        if style:
            write_prompt_card(folder, False, prompt_style=style)
    card = weights_card(model, adapter)
    assert (card and card["prompt_style"]) == expected
    assert (weights_card(model) or {}).get("prompt_style") == model_style


def test_weights_folder_names_the_adapter_else_the_model() -> None:
    from proofcheck.prompt_card import weights_folder

    assert weights_folder("base", "adapter") == "adapter"
    assert weights_folder("base", None) == "base"
