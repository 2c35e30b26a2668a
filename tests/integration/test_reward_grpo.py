"""A real TRL GRPOTrainer trains with our reward functions (tiny model, plain HF generation, CPU).

Proves the TRL contract: batched signature with dataset columns and TRL's extras, the names
TRL logs (`rewards/<__name__>/mean`), our per-level counts through `log_metric`, and an async
(judge) reward gathered on TRL's event loop next to the sync ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_server import Reply, ScriptedServer

from proofcheck.data.loaders import annotated_to_dataset
from proofcheck.data.synth import make_tasks
from proofcheck.protocol import verifier_messages
from proofcheck.reward.functions import AsyncMetaVerifierReward, FormatReward, MetaVerifierReward
from proofcheck.schemas import AnnotatedProof


@pytest.fixture(scope="module")
def judge_url() -> Iterator[str]:
    with ScriptedServer(lambda req, i: Reply("<level>BASIC_MATCH</level>")) as srv:
        yield srv.url


def tiny_dataset(n: int = 8) -> Any:
    records = [AnnotatedProof.model_validate(t) for t in make_tasks(n, seed=3)]
    ds = annotated_to_dataset(records)
    return ds.map(lambda row: {"prompt": verifier_messages(row["problem"], row["steps"], row["reference_solution"])})


def test_grpo_two_steps_with_our_rewards(tiny_model: Path, tmp_path: Path, judge_url: str) -> None:
    from trl import GRPOConfig, GRPOTrainer

    meta, fmt = MetaVerifierReward(), FormatReward()
    hybrid = MetaVerifierReward(mode="hybrid", judge_endpoint=judge_url, judge_model="judge",
                                name="meta_hybrid", max_retries=1, backoff_base_s=0.01)
    assert isinstance(hybrid, AsyncMetaVerifierReward)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none", max_steps=2,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                      logging_steps=1, save_strategy="no", seed=0)
    trainer = GRPOTrainer(model=str(tiny_model), reward_funcs=[meta, fmt, hybrid], args=args,
                          train_dataset=tiny_dataset())
    for fn in (meta, fmt, hybrid):  # as train/run.py does: the trainer's eos ids and limit tell a cut-off
        fn.configure_truncation(trainer.eos_token_ids, args.max_completion_length)
    trainer.train()
    assert trainer.state.global_step == 2
    logs = [h for h in trainer.state.log_history if "rewards/meta_verifier/mean" in h]
    assert len(logs) == 2
    for h in logs:
        for key in ("rewards/format/mean", "rewards/meta_hybrid/mean", "meta_verifier/count/EXACT_MATCH",
                    "meta_verifier/count/invalid", "meta_verifier/count/grader_failure",
                    "meta_hybrid/count/grader_failure", "format/valid_rate"):
            assert key in h, key
        # per step: 4 completions per device batch; the counts of one call sum to the batch size
        per_call = sum(h[f"meta_verifier/count/{k}"] for k in
                       ("EXACT_MATCH", "BASIC_MATCH", "POOR_MATCH", "WRONG_POLARITY", "invalid", "grader_failure"))
        assert per_call == 4
        assert 0.0 <= h["rewards/meta_verifier/mean"] <= 1.0
    # every completion was graded by each reward (4 completions a step, 2 steps), none by a failed grader
    assert sum(meta.counts.values()) == sum(fmt.counts.values()) == sum(hybrid.counts.values()) == 8
    assert meta.counts["grader_failure"] == 0 and hybrid.counts["grader_failure"] == 0
