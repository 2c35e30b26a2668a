"""MCQ harness: request shapes per backend, reply parsing and token normalisation (no network)."""

from __future__ import annotations

import pytest

from proofcheck.bench.mcq_backends import (
    BackendSettings,
    build_request,
    normalize_usage,
    parse_anthropic,
    parse_chat,
    parse_responses,
)
from proofcheck.bench.mcq_run import RunConfig, needs_run, results_path, safe_model_name, summarize

URL_CASES = [
    (dict(backend="vllm", base_url="http://h:8000/v1/"), "http://h:8000/v1/chat/completions"),
    (dict(backend="vllm", base_url="http://h:8000/v1", use_responses_api=True), "http://h:8000/v1/responses"),
    (dict(backend="azure", base_url="https://r.openai.azure.com/", model="gpt-5.2"),
     "https://r.openai.azure.com/openai/deployments/gpt-5.2/chat/completions?api-version=2024-12-01-preview"),
    (dict(backend="azure", base_url="https://r.openai.azure.com", api_version="2025-04-01-preview",
          use_responses_api=True), "https://r.openai.azure.com/openai/responses?api-version=2025-04-01-preview"),
    (dict(backend="azure", base_url="https://r.openai.azure.com", use_responses_api=True),
     "https://r.openai.azure.com/openai/v1/responses"),
    (dict(backend="anthropic", base_url="https://api.anthropic.com"), "https://api.anthropic.com/v1/messages"),
    (dict(backend="anthropic", base_url="http://proxy:4141/v1"), "http://proxy:4141/v1/messages"),
]


@pytest.mark.parametrize(("kw", "url"), URL_CASES)
def test_urls(kw: dict, url: str) -> None:
    s = BackendSettings(**{"model": "m", "api_key": "k", **kw})
    assert build_request(s, "sys", "user")[0] == url


def test_headers_and_bodies() -> None:
    chat = BackendSettings(backend="vllm", model="m", base_url="http://h/v1", api_key="sk-1", temperature=1.0,
                           top_p=0.95, reasoning_effort="high", max_tokens=77)
    _, headers, body = build_request(chat, "S", "U")
    assert headers["authorization"] == "Bearer sk-1"
    assert body == {"model": "m", "max_completion_tokens": 77, "reasoning_effort": "high", "temperature": 1.0,
                    "top_p": 0.95, "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}
    azure = BackendSettings(backend="azure", model="d", base_url="https://r", api_key="az", use_responses_api=True,
                            reasoning_effort="xhigh", max_tokens=9)
    _, headers, body = build_request(azure, "S", "U")
    assert headers["api-key"] == "az" and "authorization" not in headers
    assert body == {"model": "d", "instructions": "S", "input": "U", "max_output_tokens": 9,
                    "reasoning": {"effort": "xhigh"}}
    claude = BackendSettings(backend="anthropic", model="c", base_url="https://a", api_key="ak", thinking_budget=500,
                             max_tokens=2000)
    _, headers, body = build_request(claude, "S", "U")
    assert headers["x-api-key"] == "ak" and headers["anthropic-version"] == "2023-06-01"
    assert body == {"model": "c", "system": "S", "max_tokens": 2000, "messages": [{"role": "user", "content": "U"}],
                    "thinking": {"type": "enabled", "budget_tokens": 500}}
    no_key = BackendSettings(backend="vllm", model="m", base_url="http://h/v1")
    assert "authorization" not in build_request(no_key, "S", "U")[1]


USAGE_CASES = [
    # (prompt, completion, total, separate, detail) -> (completion, total, reasoning)
    ((10, 20, 30, None, None), (20, 30, None)),
    ((10, 20, 30, None, 15), (20, 30, 15)),       # OpenAI/vLLM breakdown: already included
    ((10, 5, 15, 15, None), (20, 30, 15)),        # separate count (Gemini-style): added
    ((10, 5, 15, None, 15), (20, 30, 15)),        # breakdown larger than completion: was excluded
    ((10, 20, None, None, None), (20, 30, None)),  # total missing: computed
    ((None, None, None, None, None), (None, None, None)),
]


@pytest.mark.parametrize(("args", "want"), USAGE_CASES)
def test_normalize_usage(args: tuple, want: tuple) -> None:
    u = normalize_usage(*args)
    assert (u["completion_tokens"], u["total_tokens"], u["reasoning_tokens"]) == want


def test_parse_chat_responses_anthropic() -> None:
    chat = parse_chat({"choices": [{"message": {"content": "\\boxed{B}", "reasoning_content": "hmm"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12,
                                 "completion_tokens_details": {"reasoning_tokens": 4}}})
    assert (chat.text, chat.thinking, chat.completion_tokens, chat.reasoning_tokens) == ("\\boxed{B}", "hmm", 9, 4)
    resp = parse_responses({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                            "output": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
                                       {"type": "message", "content": [{"type": "output_text", "text": "A"}]}],
                            "usage": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12,
                                      "output_tokens_details": {"reasoning_tokens": 6}}})
    assert (resp.text, resp.thinking, resp.finish_reason, resp.completion_tokens) == ("A", "think", "length", 7)
    claude = parse_anthropic({"content": [{"type": "thinking", "thinking": "\\boxed{A}", "signature": "s"},
                                          {"type": "text", "text": "so \\boxed{C}"}],
                              "stop_reason": "end_turn", "usage": {"input_tokens": 8, "output_tokens": 40}})
    assert (claude.text, claude.thinking, claude.finish_reason) == ("so \\boxed{C}", "\\boxed{A}", "stop")
    assert (claude.prompt_tokens, claude.completion_tokens, claude.total_tokens) == (8, 40, 48)


@pytest.mark.parametrize(("model", "effort", "sketch", "debug", "name"), [
    ("Qwen/Qwen2.5-72B-Instruct", None, False, False, "accuracy_test_Qwen_Qwen2.5-72B-Instruct_202511_default.json"),
    ("gpt-5.4", "high", True, False, "accuracy_test_gpt-5.4_202511_high_sketch.json"),
    ("claude opus:4", "low", False, True, "accuracy_test_claude_opus_4_202511_low_debug.json"),
])
def test_results_path(model: str, effort: str | None, sketch: bool, debug: bool, name: str) -> None:
    cfg = RunConfig(months=["202511"], settings=BackendSettings(backend="vllm", model=model, base_url="http://h",
                                                                reasoning_effort=effort),
                    add_sketch=sketch, debug=debug)
    assert results_path(cfg, "202511").as_posix() == f"results/202511/{name}"
    assert "/" not in safe_model_name(model)


@pytest.mark.parametrize(("record", "rerun"), [
    ({"model_answer": "A", "error": None}, False),
    ({"model_answer": None, "error": None}, True),
    ({"model_answer": "A", "error": "HTTP 500"}, True),
    ({"model_answer": "A", "error": None, "samples": [{"error": None}, {"error": "timeout"}]}, True),
])
def test_needs_run(record: dict, rerun: bool) -> None:
    assert needs_run(record) is rerun


def test_summary_counts_unfinished_items_as_wrong() -> None:
    recs = [{"is_correct": True, "model_answer": "A", "error": None},
            {"is_correct": False, "model_answer": None, "error": "boom"}]
    s = summarize(recs, total=4, n=1)
    assert (s["correct"], s["total"], s["accuracy"], s["evaluated"], s["answered"], s["errors"]) == (1, 4, 0.25, 2, 1, 1)
