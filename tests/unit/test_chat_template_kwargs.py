"""The chat template's switches (Qwen3 `enable_thinking`) reach every prompt: CLI, remote engine, eval."""

from __future__ import annotations

import argparse
import asyncio
from types import SimpleNamespace

import pytest

from proofcheck.app.commands._common import chat_template_kwargs
from proofcheck.serve.engines import RemoteEngine
from proofcheck.serve.scripted import Reply, ScriptedServer
from proofcheck.serve.verifier import make_verifier

VERDICT = "<assessment>ok</assessment>\n<errors>None</errors>\n<first_error_step>-1</first_error_step>"


@pytest.mark.parametrize("text, expected", [
    ('{"enable_thinking": true}', {"enable_thinking": True}),
    ('{"enable_thinking": false, "x": 1}', {"enable_thinking": False, "x": 1}),
    ("{}", {}),
])
def test_cli_value_parses_a_json_object(text: str, expected: dict) -> None:
    assert chat_template_kwargs(text) == expected


@pytest.mark.parametrize("text", ["enable_thinking=true", "[1]", '"on"', "{'a': 1}"])
def test_cli_value_rejects_anything_else_with_an_example(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="enable_thinking"):
        chat_template_kwargs(text)


@pytest.mark.parametrize("kwargs, sent", [({"enable_thinking": False}, {"enable_thinking": False}), (None, None)])
def test_remote_engine_sends_them_as_vllm_chat_template_kwargs(kwargs: dict | None, sent: dict | None) -> None:
    with ScriptedServer(lambda req, i: Reply([VERDICT] * int(req.get("n") or 1))) as srv:
        async def run() -> None:
            engine = RemoteEngine(srv.url, "scripted", chat_template_kwargs=kwargs)
            try:
                await engine.sample([{"role": "user", "content": "hi"}], 2, temperature=1.0, max_tokens=8, seed=0)
            finally:
                await engine.aclose()

        asyncio.run(run())
        assert srv.calls and srv.calls[0].get("chat_template_kwargs") == sent


def test_a_proofcheck_service_takes_them_at_start_not_per_client() -> None:
    with pytest.raises(ValueError, match="--chat-template-kwargs"):
        make_verifier(endpoint="http://127.0.0.1:9", kind="service", chat_template_kwargs={"enable_thinking": True})


@pytest.mark.parametrize("trainer_kwargs, expected", [
    ({"enable_thinking": True}, {"enable_thinking": True}),
    ({"enable_thinking": False}, {"enable_thinking": False}),
    ({}, {}),  # GRPOTrainer sets `args.chat_template_kwargs or {}`
])
def test_evaluation_uses_the_training_template_switches(trainer_kwargs: dict, expected: dict) -> None:
    from proofcheck.train.eval_generation import template_kwargs

    trainer = SimpleNamespace(chat_template_kwargs=trainer_kwargs)
    assert template_kwargs(trainer) == expected


def test_score_verifier_sends_them_on_every_pass_and_records_them_for_resume(tmp_path) -> None:
    import json

    from proofcheck.app.cli import main
    from proofcheck.data.loaders import SAMPLES_DIR

    data = tmp_path / "two.jsonl"
    data.write_text("".join((SAMPLES_DIR / "annotated.jsonl").read_text().splitlines(keepends=True)[:2]))
    with ScriptedServer(lambda req, i: Reply([VERDICT] * int(req.get("n") or 1))) as srv:
        rc = main(["score", "verifier", "--data", str(data), "--endpoint", srv.url, "--endpoint-model", "scripted",
                   "--repeats", "1", "--out", str(tmp_path / "run"), "--chat-template-kwargs",
                   '{"enable_thinking": false}'])
        calls = [c for c in srv.calls if "messages" in c]
    assert rc == 0
    assert calls and all(c.get("chat_template_kwargs") == {"enable_thinking": False} for c in calls)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "enable_thinking" in json.dumps(manifest)
