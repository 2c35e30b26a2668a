"""`proofcheck bench mcq` against local servers speaking the Azure OpenAI, OpenAI Responses and
Anthropic Messages wire formats (paid APIs, so fakes over real HTTP), including 429/5xx/timeouts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from mcq_fake_apis import (
    Answer,
    Call,
    FakeAPI,
    anthropic_error,
    anthropic_reply,
    chat_reply,
    letter_for,
    openai_error,
    read_results,
    responses_reply,
    user_text,
)

from proofcheck.app.cli import main
from proofcheck.bench.mcq_data import hard_set_path, load_hard_set, shuffle_options

DATA = Path(__file__).resolve().parents[1] / "data" / "lmb"
MONTH = "209901"
ITEMS = load_hard_set(hard_set_path(DATA, MONTH))
N_ITEMS = 6  # tests/data/lmb/209901 holds six items: every loop below runs six times
CORRECT = {item.id: shuffle_options(item, 42, i)[1] for i, item in enumerate(ITEMS)}
QUESTION_TO_ID = {item.mcq.question: item.id for item in ITEMS}


def item_of(call: Call) -> str:
    """Which item a request is about (the question is in the user prompt)."""
    text = user_text(call.body)
    return next(iid for q, iid in QUESTION_TO_ID.items() if q in text)


def run(tmp_path: Path, *extra: str) -> int:
    return main(["bench", "mcq", "--month", MONTH, "--data-dir", str(DATA), "--results-dir", str(tmp_path),
                 "--retry-backoff", "0.01", *extra])


def results(tmp_path: Path, model: str, effort: str = "default") -> dict:
    return read_results(tmp_path / MONTH / f"accuracy_test_{model}_{MONTH}_{effort}.json")


def check_structure(doc: dict, n_items: int = len(ITEMS)) -> None:
    assert set(doc) == {"test_info", "summary", "overall", "detailed_results"}
    assert doc["summary"]["all"] == doc["overall"]
    recs = doc["detailed_results"]
    assert len(ITEMS) == N_ITEMS and len(recs) == n_items > 0
    assert [r["id"] for r in recs] == [item.id for item in ITEMS][:n_items]  # file order, once each
    for r in recs:
        assert r["correct_answer"] == CORRECT[r["id"]]
        assert r["is_correct"] == (r["model_answer"] == r["correct_answer"])
    correct = sum(r["is_correct"] for r in recs)
    assert doc["overall"]["correct"] == correct
    assert doc["overall"]["accuracy"] == pytest.approx(correct / n_items)


def test_azure_chat_wire_format_and_usage(tmp_path: Path) -> None:
    def responder(call: Call, i: int) -> Answer:
        return Answer(chat_reply(f"Reasoning...\n\\boxed{{{letter_for(user_text(call.body))}}}",
                                 prompt=100, completion=300, reasoning_tokens=250))

    with FakeAPI(responder) as api:
        rc = run(tmp_path, "--backend", "azure", "--endpoint", api.base + "/", "--endpoint-model", "gpt-5.2",
                 "--api-key", "secret-azure-key", "--reasoning-effort", "medium", "--max-tokens", "1234")
    assert rc == 0
    assert len(api.fake_calls) == len(ITEMS)
    call = api.fake_calls[0]
    assert call.path == "/openai/deployments/gpt-5.2/chat/completions"
    assert call.query == {"api-version": "2024-12-01-preview"}
    assert call.headers["api-key"] == "secret-azure-key" and "authorization" not in call.headers
    assert call.body["max_completion_tokens"] == 1234 and call.body["reasoning_effort"] == "medium"
    assert "temperature" not in call.body and "top_p" not in call.body  # only sent when asked for
    assert [m["role"] for m in call.body["messages"]] == ["system", "user"]
    doc = results(tmp_path, "gpt-5.2", "medium")
    check_structure(doc)
    rec = doc["detailed_results"][0]
    assert (rec["prompt_tokens"], rec["completion_tokens"], rec["total_tokens"], rec["reasoning_tokens"]) == \
        (100, 300, 400, 250)
    assert rec["model_answer"] == letter_for(user_text(next(c.body for c in api.fake_calls
                                                            if item_of(c) == rec["id"])))
    assert rec["reasoning_effort"] == "medium" and rec["n_samples"] == 1 and rec["samples"] is None
    assert rec["score"] == 6 and doc["detailed_results"][2]["score"] is None  # mcq.meta.score
    info = doc["test_info"]
    assert (info["model"], info["month"], info["seed"], info["max_tokens"], info["complete"]) == \
        ("gpt-5.2", MONTH, 42, 1234, True)
    assert "secret-azure-key" not in json.dumps(doc)


@pytest.mark.parametrize(("model", "extra", "path", "query"), [
    ("gpt-5.2", ["--use-responses-api", "--api-version", "2025-04-01-preview"], "/openai/responses",
     {"api-version": "2025-04-01-preview"}),
    ("gpt-5.4-pro", [], "/openai/v1/responses", {}),  # gpt-5.4 switches to the Responses API by itself
])
def test_azure_responses_api(tmp_path: Path, model: str, extra: list[str], path: str, query: dict) -> None:
    def responder(call: Call, i: int) -> Answer:
        return Answer(responses_reply(f"\\boxed{{{CORRECT[item_of(call)]}}}", summary="weighing options",
                                      input_tokens=40, output_tokens=500, reasoning_tokens=480))

    with FakeAPI(responder) as api:
        rc = run(tmp_path, "--backend", "azure", "--endpoint", api.base, "--endpoint-model", model, "--api-key", "k",
                 "--reasoning-effort", "xhigh", *extra)
    assert rc == 0
    call = api.fake_calls[0]
    assert (call.path, call.query) == (path, query)
    assert call.body["instructions"].startswith("You are an expert mathematician")
    assert call.body["reasoning"] == {"effort": "xhigh"} and "max_output_tokens" in call.body
    doc = results(tmp_path, model, "xhigh")
    check_structure(doc)
    assert doc["overall"]["accuracy"] == 1.0
    rec = doc["detailed_results"][0]
    assert rec["raw_thinking"] == "weighing options"
    assert (rec["completion_tokens"], rec["reasoning_tokens"], rec["total_tokens"]) == (500, 480, 540)


def test_anthropic_messages_thinking_kept_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-anthropic-key")
    no_text_answer = ITEMS[1].id

    def responder(call: Call, i: int) -> Answer:
        iid = item_of(call)
        wrong = next(x for x in "ABCDE" if x != CORRECT[iid])
        text = "I am unsure." if iid == no_text_answer else f"Final: \\boxed{{{CORRECT[iid]}}}"
        return Answer(anthropic_reply(text, thinking=f"Perhaps \\boxed{{{wrong}}}", output_tokens=700))

    with FakeAPI(responder) as api:
        rc = run(tmp_path, "--backend", "anthropic", "--endpoint", api.base, "--endpoint-model", "claude-x",
                 "--thinking-budget", "4000", "--max-tokens", "8000", "--reasoning-effort", "high")
    assert rc == 0
    call = api.fake_calls[0]
    assert call.path == "/v1/messages"
    assert call.headers["x-api-key"] == "env-anthropic-key" and call.headers["anthropic-version"]
    assert call.body["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    assert call.body["max_tokens"] == 8000 and call.body["output_config"] == {"effort": "high"}
    assert call.body["system"].startswith("You are an expert mathematician")
    doc = results(tmp_path, "claude-x", "high")
    check_structure(doc)  # six records, counted
    for rec in doc["detailed_results"]:
        assert rec["raw_thinking"].startswith("Perhaps \\boxed{")  # thinking recorded, never parsed
        assert rec["completion_tokens"] == 700 and rec["total_tokens"] == 760
        if rec["id"] == no_text_answer:
            assert rec["model_answer"] is None and not rec["is_correct"]
        else:
            assert rec["model_answer"] == rec["correct_answer"]
    assert doc["overall"]["correct"] == len(ITEMS) - 1


def test_transient_failures_are_retried(tmp_path: Path) -> None:
    """Per item: 429 (Retry-After), then 529 overloaded, then a timeout, then garbage, then success."""
    seen: dict[str, int] = {}
    release = threading.Event()  # lets the timed-out handlers finish once the run is over
    script = [anthropic_error(429, "rate_limit_error", "slow down"), anthropic_error(529, "overloaded_error", "busy"),
              Answer(anthropic_reply("late"), delay_s=60, release=release), Answer(raw='{"content": [trunc'), None]

    def responder(call: Call, i: int) -> Answer:
        iid = item_of(call)
        k = seen[iid] = seen.get(iid, -1) + 1
        step = script[k]
        if k == 0:
            step.headers = {"retry-after": "0"}
        return step or Answer(anthropic_reply(f"\\boxed{{{CORRECT[iid]}}}"))

    with FakeAPI(responder) as api:
        rc = run(tmp_path, "--backend", "anthropic", "--endpoint", api.base, "--endpoint-model", "c", "--api-key", "k",
                 "--request-timeout", "2", "--concurrency", "6")
        release.set()
    assert rc == 0
    assert seen == {item.id: 4 for item in ITEMS}  # five attempts each
    doc = results(tmp_path, "c")
    check_structure(doc)
    assert doc["overall"]["accuracy"] == 1.0
    assert all(r["error"] is None and r["attempts"] == 5 for r in doc["detailed_results"])


def test_exhausted_retries_are_recorded_then_resumed(tmp_path: Path) -> None:
    broken = {ITEMS[1].id, ITEMS[4].id}

    def flaky(call: Call, i: int) -> Answer:
        if item_of(call) in broken:
            return openai_error(500, "internal failure")
        return Answer(chat_reply(f"\\boxed{{{CORRECT[item_of(call)]}}}"))

    with FakeAPI(flaky) as api:
        rc = run(tmp_path, "--backend", "openai", "--endpoint", api.base + "/v1", "--endpoint-model", "m", "--api-key", "k",
                 "--max-retries", "2")
    assert rc == 3  # incomplete, as every command says it
    assert sum(item_of(c) in broken for c in api.fake_calls) == 2 * 3  # bounded: 3 attempts each
    doc = results(tmp_path, "m")
    check_structure(doc)
    failed = {r["id"]: r for r in doc["detailed_results"] if r["error"]}
    assert set(failed) == broken and len(failed) == 2
    for r in failed.values():
        assert "gave up after 3 attempt(s)" in r["error"] and "HTTP 500" in r["error"] and "internal failure" in r["error"]
        assert r["model_answer"] is None and r["is_correct"] is False and r["attempts"] == 3
    assert doc["overall"]["errors"] == 2 and doc["overall"]["correct"] == len(ITEMS) - 2
    before = {r["id"]: r for r in doc["detailed_results"]}

    with FakeAPI(lambda call, i: Answer(chat_reply(f"\\boxed{{{CORRECT[item_of(call)]}}}"))) as api:
        rc = run(tmp_path, "--backend", "openai", "--endpoint", api.base + "/v1", "--endpoint-model", "m", "--api-key", "k",
                 "--resume")
    assert rc == 0
    assert sorted(item_of(c) for c in api.fake_calls) == sorted(broken)  # only the failed items again
    doc = results(tmp_path, "m")
    check_structure(doc)
    assert doc["overall"]["accuracy"] == 1.0 and doc["overall"]["errors"] == 0
    for r in doc["detailed_results"]:
        if r["id"] not in broken:
            assert r == before[r["id"]]


def test_client_errors_are_not_retried(tmp_path: Path) -> None:
    with FakeAPI(lambda call, i: openai_error(400, "max_completion_tokens is too large")) as api:
        rc = run(tmp_path, "--backend", "vllm", "--endpoint", api.base + "/v1", "--endpoint-model", "m")
    assert rc == 3  # every item failed: an incomplete run
    assert len(api.fake_calls) == len(ITEMS)
    assert "authorization" not in api.fake_calls[0].headers  # vllm: no key unless given
    body = api.fake_calls[0].body
    assert (body["temperature"], body["top_p"]) == (1.0, 0.95)  # the vLLM evaluator's defaults
    recs = results(tmp_path, "m")["detailed_results"]
    assert len(recs) == N_ITEMS
    for r in recs:
        assert r["error"] == "HTTP 400 (not retried): max_completion_tokens is too large"
        assert r["model_answer"] is None and r["is_correct"] is False and r["attempts"] == 1


def test_repeated_samples_and_strict_parse(tmp_path: Path) -> None:
    seen: dict[str, int] = {}

    def responder(call: Call, i: int) -> Answer:
        iid = item_of(call)
        k = seen[iid] = seen.get(iid, -1) + 1
        # the second call of each item answers unboxed: only the loose rule would read that letter
        return Answer(chat_reply(f"I think {CORRECT[iid]}" if k == 1 else f"\\boxed{{{CORRECT[iid]}}}"))

    with FakeAPI(responder) as api:
        rc = run(tmp_path, "--backend", "vllm", "--endpoint", api.base + "/v1", "--endpoint-model", "m", "--n", "3",
                 "--strict-parse", "--concurrency", "1")
    assert rc == 0
    assert len(api.fake_calls) == 3 * len(ITEMS)
    doc = results(tmp_path, "m")
    check_structure(doc)
    for r in doc["detailed_results"]:
        assert r["n_samples"] == 3 and [s["sample_idx"] for s in r["samples"]] == [0, 1, 2]
        first = r["samples"][0]
        for key in ("model_answer", "raw_response", "is_correct", "completion_tokens", "error"):
            assert r[key] == first[key]
        for s in r["samples"]:
            assert (s["model_answer"] is None) == (not s["raw_response"].startswith("\\boxed"))
    assert doc["test_info"]["n_samples"] == 3 and doc["test_info"]["strict_parse"] is True
    s = doc["summary"]["all"]
    assert s["mean_sample_accuracy"] == pytest.approx(2 / 3) and s["pass_at_n"] == 1.0


@pytest.mark.parametrize(("args", "needle"), [
    (["--backend", "azure", "--endpoint-model", "m", "--api-key", "k"], "needs --endpoint"),
    (["--backend", "vllm", "--endpoint-model", "m"], "needs --endpoint"),
    (["--backend", "anthropic", "--endpoint-model", "m"], "ANTHROPIC_API_KEY"),
    (["--backend", "vllm", "--endpoint-model", "m", "--endpoint", "http://x/v1", "--thinking-budget", "10"],
     "applies to --backend anthropic"),
    (["--backend", "anthropic", "--endpoint-model", "m", "--api-key", "k", "--thinking-budget", "9000"],
     "below --max-tokens"),
    (["--backend", "vllm", "--endpoint-model", "m", "--endpoint", "localhost:8000"], "http://"),
    (["--backend", "vllm", "--endpoint-model", "m", "--endpoint", "http://x/v1", "--n", "0"], "--n must be >= 1"),
])
def test_bad_arguments_exit_2_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture, args: list[str], needle: str) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert run(tmp_path, *args, "--max-tokens", "8000") == 2
    assert needle in capsys.readouterr().err


def test_old_spellings_still_work_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--model, --base-url and --api-key: deprecated for one release, still honoured."""
    with FakeAPI(lambda call, i: Answer(chat_reply(f"\\boxed{{{CORRECT[item_of(call)]}}}"))) as api:
        rc = run(tmp_path, "--backend", "openai", "--base-url", api.base + "/v1", "--model", "old", "--api-key", "k")
        assert api.fake_calls[0].headers["authorization"] == "Bearer k"
    err = capsys.readouterr().err
    assert rc == 0 and results(tmp_path, "old")["overall"]["accuracy"] == 1.0
    for old, new in (("--model", "--endpoint-model"), ("--base-url", "--endpoint"), ("--api-key", "--endpoint-api-key-env")):
        assert f"warning: {old} is deprecated" in err and f"use {new}" in err


def test_missing_month_and_resume_mismatch(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = ["--backend", "vllm", "--endpoint-model", "m", "--endpoint", "http://127.0.0.1:9/v1"]
    assert main(["bench", "mcq", "--month", "199001", "--data-dir", str(DATA), "--results-dir", str(tmp_path),
                 *base]) == 1
    assert "199001/hard/qaEval_199001_ge5_hard.json" in capsys.readouterr().err
    with FakeAPI(lambda call, i: Answer(chat_reply("\\boxed{A}"))) as api:
        assert run(tmp_path, "--backend", "vllm", "--endpoint-model", "m", "--endpoint", api.base + "/v1") == 0
        n_calls = len(api.fake_calls)
        assert run(tmp_path, "--backend", "vllm", "--endpoint-model", "m", "--endpoint", api.base + "/v1", "--resume",
                   "--seed", "7") == 1
        assert len(api.fake_calls) == n_calls  # refused before any request
    assert "seed=42" in capsys.readouterr().err
