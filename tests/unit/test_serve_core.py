"""serve/: result assembly, early-stop callback, schemas, flags and stream accounting (no model)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from pydantic import ValidationError

from proofcheck.decision import decide
from proofcheck.parsing import format_verdict
from proofcheck.serve.engine_args import engine_kwargs, lora_rank, on_cpu
from proofcheck.serve.engines import Generation, PassOutput, _Stream, endpoint_root
from proofcheck.serve.schemas import BatchRequest, VerifyRequest, VerifyResponse
from proofcheck.serve.server import ServeConfig, parse_engine_args, parse_key_value, reserve_port
from proofcheck.serve.verifier import assemble, stop_rule

N_STEPS = 3
ACCEPT = format_verdict("all steps check out", [], -1)
REJECT1 = format_verdict("step 1 is wrong", [(1, "2 + 2 is not 5")], 1)
GARBAGE = "lorem ipsum"


def out(kind: str, i: int = 0) -> PassOutput:
    """A PassOutput of a kind: accept / reject / garbage / length / error / cancelled / unfinished."""
    return {
        "accept": PassOutput(i, ACCEPT, "stop", 20),
        "reject": PassOutput(i, REJECT1, "stop", 22),
        "garbage": PassOutput(i, GARBAGE, "stop", 5),
        "length": PassOutput(i, ACCEPT, "length", 30),
        "error": PassOutput(i, "", None, 0, error="HTTP 500: boom"),
        "cancelled": PassOutput(i, "<assess", None, 7, cancelled=True),
        "unfinished": PassOutput(i, "<assess", None, 3),
    }[kind]


@pytest.mark.parametrize("kinds, rule, decision, votes", [
    (["accept"] * 8, "unanimous", "accept", (8, 0, 0, 0, 0)),
    (["accept"] * 7 + ["reject"], "unanimous", "reject", (7, 1, 0, 0, 0)),
    (["accept"] * 7 + ["garbage"], "unanimous", "reject", (7, 0, 1, 0, 0)),
    (["accept"] * 7 + ["length"], "unanimous", "reject", (7, 0, 1, 0, 0)),
    (["accept"] * 7 + ["error"], "unanimous", "reject", (7, 0, 0, 0, 1)),  # an endpoint error: no verdict
    (["accept"] * 7 + ["unfinished"], "unanimous", "reject", (7, 0, 0, 0, 1)),
    (["reject"] + ["cancelled"] * 7, "unanimous", "reject", (0, 1, 0, 7, 0)),
    (["accept"] * 5 + ["reject"] * 3, "majority", "accept", (5, 3, 0, 0, 0)),
    (["accept"] * 4 + ["garbage"] * 4, "majority", "reject", (4, 0, 4, 0, 0)),
    (["accept"] + ["reject"] * 7, "any", "accept", (1, 7, 0, 0, 0)),
    (["error"] * 8, "any", "reject", (0, 0, 0, 0, 8)),
])
def test_assemble_decision_and_votes(kinds: list[str], rule: str, decision: str, votes: tuple) -> None:
    gen = Generation([out(k, i) for i, k in enumerate(kinds)], prompt_tokens=100)
    r = assemble(gen, N_STEPS, rule, latency_s=0.5)
    assert r.decision == decision == decide([p.outcome for p in r.passes], rule)
    assert tuple(r.votes[k] for k in ("accept", "reject", "invalid", "cancelled", "error")) == votes
    assert r.prompt_tokens == 100 and r.latency_s == 0.5
    assert r.completion_tokens == sum(out(k).completion_tokens for k in kinds)  # cancelled tokens count too
    assert len(r.passes) == len(kinds)


def test_assemble_pass_fields() -> None:
    r = assemble(Generation([out("reject"), out("error", 1), out("cancelled", 2), out("accept", 3)]), N_STEPS,
                 "majority", 0.0)
    rej, err, can, acc = r.passes
    assert (rej.status, rej.verdict, rej.first_error_step, rej.flagged_steps) == ("valid", "reject", 1, [1])
    assert (err.status, err.verdict, err.error) == ("error", None, "HTTP 500: boom")
    assert (can.status, can.verdict, can.completion_tokens) == ("cancelled", None, 7)
    assert (acc.verdict, acc.first_error_step) == ("accept", -1)
    assert r.first_error_step_votes == {"-1": 1, "1": 1}


@pytest.mark.parametrize("finished, rule, n, decided", [
    (["accept"], "unanimous", 8, False),
    (["accept"] * 7, "unanimous", 8, False),
    (["accept", "reject"], "unanimous", 8, True),
    (["garbage"], "unanimous", 8, True),
    (["error"], "unanimous", 8, True),
    (["length"], "unanimous", 8, True),
    (["accept"] * 5, "majority", 8, True),
    (["reject"] * 4, "majority", 8, True),
    (["reject"] * 3, "majority", 8, False),
    (["accept"], "any", 8, True),
    (["reject"] * 7, "any", 8, False),
])
def test_stop_rule(finished: list[str], rule: str, n: int, decided: bool) -> None:
    assert stop_rule(N_STEPS, n, rule)([out(k, i) for i, k in enumerate(finished)]) is decided


@pytest.mark.parametrize("body, ok", [
    ({"problem": "p", "proof": "a"}, True),
    ({"problem": "p", "steps": ["a", "b"], "passes": 8, "rule": "majority", "seed": 3}, True),
    ({"problem": "p", "proof": "a", "steps": ["a"]}, False),
    ({"problem": "p"}, False),
    ({"problem": "p", "steps": []}, False),
    ({"problem": "p", "steps": ["a", "  "]}, False),
    ({"problem": "", "proof": "a"}, False),
    ({"problem": "p", "proof": "a", "passes": 0}, False),
    ({"problem": "p", "proof": "a", "passes": 65}, False),
    ({"problem": "p", "proof": "a", "rule": "vibes"}, False),
    ({"problem": "p", "proof": "a", "unknown": 1}, False),
    ({"problem": "p", "proof": "a", "passes": "eight"}, False),
])
def test_verify_request_validation(body: dict, ok: bool) -> None:
    if ok:
        VerifyRequest.model_validate(body)
    else:
        with pytest.raises(ValidationError):
            VerifyRequest.model_validate(body)


def test_batch_needs_items_and_response_shape() -> None:
    with pytest.raises(ValidationError):
        BatchRequest.model_validate({"items": []})
    r = assemble(Generation([out("accept"), out("cancelled", 1)], 9), N_STEPS, "unanimous", 1.25)
    resp = VerifyResponse.from_result(r, "tiny").model_dump()
    assert resp["usage"] == {"prompt_tokens": 9, "completion_tokens": 27, "total_tokens": 36}
    assert resp["votes"] == {"accept": 1, "reject": 0, "invalid": 0, "cancelled": 1, "error": 0}
    assert [p["status"] for p in resp["passes"]] == ["valid", "cancelled"]
    assert set(resp["passes"][0]) >= {"status", "verdict", "first_error_step", "flagged_steps", "invalid_reason",
                                      "text", "completion_tokens"}


@pytest.mark.parametrize("items, expected", [
    ([], {}),
    (["tensor_parallel_size=8", "gpu-memory-utilization=0.9"], {"tensor_parallel_size": 8,
                                                                 "gpu_memory_utilization": 0.9}),
    (["enforce_eager=true", "dtype=bfloat16"], {"enforce_eager": True, "dtype": "bfloat16"}),
])
def test_parse_engine_args(items: list[str], expected: dict) -> None:
    assert parse_engine_args(items) == expected


@pytest.mark.parametrize("item", ["noequals", "=x", "x=", " = "])
def test_parse_key_value_rejects(item: str) -> None:
    with pytest.raises(ValueError, match="--lora"):
        parse_key_value(item, "--lora")


@pytest.mark.parametrize("kwargs, match", [
    ({}, "--model PATH"),
    ({"model": "m", "endpoint": "http://x"}, "--model PATH"),
    ({"endpoint": "http://x", "lora": ("a", "b")}, "--lora"),
])
def test_serve_config_rejects(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ServeConfig(**kwargs)


@pytest.mark.parametrize("url, root", [
    ("http://h:1/v1", "http://h:1"), ("http://h:1/v1/", "http://h:1"), ("http://h:1", "http://h:1"),
    ("http://h/openai/v1", "http://h/openai"),
])
def test_endpoint_root(url: str, root: str) -> None:
    assert endpoint_root(url) == root


def test_stream_accounting_uses_continuous_usage() -> None:
    slots = [PassOutput(0), PassOutput(1)]
    s = _Stream(slots)
    chunk = {"choices": [{"index": 1, "delta": {"content": "ab"}, "finish_reason": None}],
             "usage": {"prompt_tokens": 50, "completion_tokens": 3}}
    assert s.apply_chunk(chunk) == []
    done = s.apply_chunk({"choices": [{"index": 1, "delta": {"content": "c"}, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 50, "completion_tokens": 4}})
    assert done == [slots[1]] and slots[1].text == "abc" and slots[1].completion_tokens == 4
    assert s.prompt_tokens == 50 and not slots[0].finished


def test_engine_kwargs_lora(tmp_path) -> None:
    (tmp_path / "adapter_config.json").write_text('{"r": 12}')
    assert lora_rank(str(tmp_path)) == 16
    kw = engine_kwargs(lora=("ad", str(tmp_path)), max_model_len=65536, dtype="float32")
    assert kw["enable_lora"] is True and kw["max_lora_rank"] == 16 and kw["dtype"] == "float32"
    if on_cpu():  # whole-prompt prefill (no chunking) needs a token budget >= max_model_len
        assert kw["enable_chunked_prefill"] is False and kw["max_num_batched_tokens"] >= 65536
    assert engine_kwargs(max_lora_rank=8, enforce_eager=False)["enforce_eager"] is False  # explicit args win
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        lora_rank(str(tmp_path / "missing"))


def test_reserve_port_holds_the_port() -> None:
    sock = reserve_port("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
    finally:
        sock.close()


def test_serve_on_a_busy_port_exits_before_loading_the_model(tmp_path) -> None:
    """The port is taken before the engine: the error names it and the fix, and no model is read."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "serve", "--model", str(tmp_path / "absent"),
                               "--port", str(port)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "--port" in proc.stderr, proc.stderr
