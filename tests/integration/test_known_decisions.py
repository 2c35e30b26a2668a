"""Decisions known independently of the responses: vLLM structured outputs constrain the real
engine's answers (`proofcheck.protocol.answer_regex`), so the expected verdict comes from the
constraint, not from the text under test.

- `-1` forced: every pass is a valid accept -> unanimous accept; VerifierBench TPR 1, TNR 0.
- `0` forced: every pass rejects at step 0 -> reject (early: the first finished pass decides);
  VerifierBench TPR 0, TNR 1, and first-error-step accuracy is exactly the share of flawed
  proofs whose first error is step 0.
- any verdict valid for the proof ("steps"), sampled at temperature 1: accepts and rejects both
  occur, every pass valid.
Through the vLLM server (session fixture), and through `proofcheck serve --constrain-format`
in front of it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx
import pytest

from proofcheck.data.synth import balanced_tasks
from proofcheck.process import ServiceProcess, free_port
from proofcheck.serve.verifier import make_verifier

TASKS = balanced_tasks(8, seed=21)  # 4 valid, 4 flawed


def _verify_all(url: str, verdicts: str, all_passes: bool = False) -> list:
    async def run() -> list:
        v = make_verifier(endpoint=url, kind="vllm", model="tiny", max_tokens=1500, constrain=verdicts, passes=8)
        try:
            return [await v.verify(t["problem"], t["steps"], seed=i, all_passes=all_passes)
                    for i, t in enumerate(TASKS)]
        finally:
            await v.aclose()
    return asyncio.run(run())


def test_forced_accept_is_a_unanimous_accept(vllm_server) -> None:
    for r in _verify_all(vllm_server.url, "-1"):
        assert r.decision == "accept"
        assert r.votes["accept"] == 8 and all(p.status == "valid" for p in r.passes)


def test_forced_reject_decides_at_the_first_pass(vllm_server) -> None:
    for r in _verify_all(vllm_server.url, "0"):
        assert r.decision == "reject"
        assert r.first_error_step_votes.get("0", 0) >= 1
        assert any(p.status == "cancelled" for p in r.passes)  # early reject stopped the rest


def test_sampled_verdicts_give_both_decisions_all_valid(vllm_server) -> None:
    results = _verify_all(vllm_server.url, "steps", all_passes=True)
    outcomes = [p.outcome for r in results for p in r.passes]
    assert {"accept", "reject"} <= set(outcomes)
    assert all(p.status == "valid" for r in results for p in r.passes)
    assert {r.decision for r in results} <= {"accept", "reject"}


@pytest.mark.parametrize(("verdicts", "tpr", "tnr"), [("-1", 1.0, 0.0), ("0", 0.0, 1.0)])
def test_verifierbench_metrics_follow_the_constraint(vllm_server, tmp_path: Path, verdicts: str, tpr: float,
                                                     tnr: float) -> None:
    from proofcheck.bench.scoring import score_verifier

    data = tmp_path / "annotated.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    verifier = make_verifier(endpoint=vllm_server.url, kind="vllm", model="tiny", max_tokens=1500,
                             constrain=verdicts)
    s = score_verifier(str(data), verifier, "tiny-constrained", tmp_path / "run", repeats=2, concurrency=4)
    assert s["rough_tpr"] == tpr and s["rough_tnr"] == tnr and s["verifier_valid_rate"] == 1.0
    if verdicts == "0":
        flawed = [t for t in TASKS if not t["is_correct"]]
        at_zero = sum(t["first_error_step"] == 0 for t in flawed)
        assert s["first_error_step_accuracy_incorrect"] == pytest.approx(at_zero / len(flawed))


@pytest.mark.parametrize(("verdicts", "decision"), [("-1", "accept"), ("0", "reject")])
def test_service_constrain_format(vllm_server, tmp_path: Path, verdicts: str, decision: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "serve", "--endpoint", vllm_server.url, "--endpoint-model", "tiny",
           "--port", str(port), "--max-tokens", "1500", "--constrain-format", verdicts, "--log-level", "warning"]
    with ServiceProcess(cmd, url + "/health", tmp_path / "serve.log"):
        for t in TASKS[:4]:
            r = httpx.post(url + "/v1/verify", json={"problem": t["problem"], "steps": t["steps"], "seed": 1},
                           timeout=300).json()
            assert r["decision"] == decision, r
