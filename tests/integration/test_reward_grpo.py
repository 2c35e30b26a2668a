"""A real TRL GRPOTrainer trains with our reward functions (tiny model, CPU).

Proves the TRL contract: batched signature with dataset columns and TRL's extras, the names
TRL logs (`rewards/<__name__>/mean`), our per-level counts through `log_metric`, and an async
(judge) reward gathered on TRL's event loop next to the sync ones. The completions are scripted
(TRL's `rollout_func`): a random model never writes a valid verdict, so the judge would never be
asked; with four known verdicts per flawed proof every reward and every judge call is known by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proofcheck.data.loaders import annotated_to_dataset
from proofcheck.data.synth import balanced_tasks
from proofcheck.parsing import format_verdict
from proofcheck.protocol import verifier_messages
from proofcheck.reward.functions import AsyncMetaVerifierReward, FormatReward, MetaVerifierReward
from proofcheck.schemas import AnnotatedProof
from proofcheck.serve.scripted import Reply, ScriptedServer

FLAWED = [t for t in balanced_tasks(8, seed=3) if not t["is_correct"]]  # 4 flawed proofs


def scripted_completions(task: dict[str, Any]) -> list[str]:
    """The four completions of one flawed proof (first fatal error f, no recoverable error), with
    their structural level by hand: accept (WRONG_POLARITY), reject at f (EXACT_MATCH), reject at
    another step (POOR_MATCH: f missed), no tags (invalid)."""
    f, n = task["first_error_step"], len(task["steps"])
    other = (f + 1) % n
    return [format_verdict("fine", [], -1), format_verdict("bad", [(f, "wrong")], f),
            format_verdict("bad", [(other, "wrong")], other), "I cannot tell."]


# Rewards of the four completions, by hand. Training scale: EXACT 1, BASIC .5, POOR .25, WRONG/invalid 0.
# The judge answers BASIC_MATCH; hybrid = min(structural, judge), asked only for the two valid rejects.
META = [0.0, 1.0, 0.25, 0.0]
HYBRID = [0.0, 0.5, 0.25, 0.0]


@pytest.fixture(scope="module")
def judge() -> Iterator[ScriptedServer]:
    with ScriptedServer(lambda req, i: Reply("<level>BASIC_MATCH</level>")) as srv:
        yield srv


def tiny_dataset() -> Any:
    records = [AnnotatedProof.model_validate(t) for t in FLAWED]
    ds = annotated_to_dataset(records)
    return ds.map(lambda row: {"prompt": verifier_messages(row["problem"], row["steps"], row["reference_solution"])})


def rollout(prompts: list[list[dict[str, str]]], trainer: Any) -> dict[str, Any]:
    """TRL's rollout_func: the scripted completions of each prompt (repeated num_generations times)."""
    tok = trainer.processing_class
    seen: dict[str, int] = {}
    prompt_ids, completion_ids, logprobs = [], [], []
    for p in prompts:
        user = p[-1]["content"]
        k = seen[user] = seen.get(user, -1) + 1
        (task,) = [t for t in FLAWED if t["problem"] in user]
        text = scripted_completions(task)[k]
        ids = tok.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=False)
        prompt_ids.append(list(ids))
        completion_ids.append(tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
        logprobs.append([0.0] * len(completion_ids[-1]))
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}


def test_grpo_two_steps_with_our_rewards(tiny_model: Path, tmp_path: Path, judge: ScriptedServer,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    assert len(FLAWED) == 4 and all(t["annotation"]["recoverable_error_steps"] == [-1] for t in FLAWED)
    meta, fmt = MetaVerifierReward(), FormatReward()
    hybrid = MetaVerifierReward(mode="hybrid", judge_endpoint=judge.url, judge_model="judge",
                                name="meta_hybrid", max_retries=1, backoff_base_s=0.01)
    assert isinstance(hybrid, AsyncMetaVerifierReward)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none", max_steps=2,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=96,
                      logging_steps=1, save_strategy="no", seed=0)
    trainer = GRPOTrainer(model=str(tiny_model), reward_funcs=[meta, fmt, hybrid], args=args,
                          train_dataset=tiny_dataset(), rollout_func=rollout)
    for fn in (meta, fmt, hybrid):  # as train/run.py does: the trainer's eos ids and limit tell a cut-off
        fn.configure_truncation(trainer.eos_token_ids, args.max_completion_length)
    trainer.train()
    assert trainer.state.global_step == 2
    # one prompt a step (4 generations): the judge was asked for its two valid rejects, no more
    assert len(judge.calls) == 2 * 2
    logs = [h for h in trainer.state.log_history if "rewards/meta_verifier/mean" in h]
    assert len(logs) == 2
    for h in logs:
        assert h["rewards/meta_verifier/mean"] == pytest.approx(sum(META) / 4)
        assert h["rewards/meta_hybrid/mean"] == pytest.approx(sum(HYBRID) / 4)
        assert h["format/valid_rate"] == pytest.approx(3 / 4)
        assert (h["meta_verifier/count/EXACT_MATCH"], h["meta_verifier/count/POOR_MATCH"],
                h["meta_verifier/count/WRONG_POLARITY"], h["meta_verifier/count/invalid"]) == (1, 1, 1, 1)
        assert (h["meta_hybrid/count/BASIC_MATCH"], h["meta_hybrid/count/POOR_MATCH"]) == (1, 1)
        assert h["meta_verifier/count/grader_failure"] == h["meta_hybrid/count/grader_failure"] == 0
    # every completion was graded by each reward (4 completions a step, 2 steps), none by a failed grader
    assert sum(meta.counts.values()) == sum(fmt.counts.values()) == sum(hybrid.counts.values()) == 8
    assert meta.counts["grader_failure"] == 0 and hybrid.counts["grader_failure"] == 0


def test_a_failed_grade_gives_its_row_no_advantage(tiny_model: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48: a judge that errors on some rows. TRL drops a row only when every reward is None; `format`
    never is, so on its own TRL would train such a row as 0.2 x format (a wrong-polarity answer's reward) and
    give it an advantage. Our trainer (train/trainer.py) leaves it out: advantage exactly 0, not in its group's
    mean, counted; the other rows of the group keep TRL's advantages over the rows that were graded."""
    from trl import GRPOConfig

    from proofcheck.train.trainer import trainer_class

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    broken = [FLAWED[0]["problem"], FLAWED[1]["problem"]]  # the judge fails for these proofs, answers the others

    def responder(req: dict[str, Any], i: int) -> Reply:
        text = req["messages"][-1]["content"]
        return Reply(status=500) if any(p in text for p in broken) else Reply("<level>BASIC_MATCH</level>")

    with ScriptedServer(responder) as judge:
        hybrid = MetaVerifierReward(mode="hybrid", judge_endpoint=judge.url, judge_model="judge", max_retries=1,
                                    backoff_base_s=0.01)
        fmt = FormatReward()
        args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none", max_steps=4,
                          per_device_train_batch_size=4, num_generations=4, max_completion_length=96,
                          logging_steps=1, save_strategy="no", seed=0, reward_weights=[1.0, 0.2],
                          shuffle_dataset=False)
        trainer = trainer_class()(model=str(tiny_model), reward_funcs=[hybrid, fmt], args=args,
                                  train_dataset=tiny_dataset(), rollout_func=rollout)
        for fn in (hybrid, fmt):
            fn.configure_truncation(trainer.eos_token_ids, args.max_completion_length)
        seen: list[tuple[Any, Any]] = []
        score = trainer._generate_and_score_completions
        calc = trainer._calculate_rewards

        def rewards_then(*a: Any, **k: Any) -> Any:
            out = calc(*a, **k)
            seen.append((out.clone(), None))
            return out

        def scored(*a: Any, **k: Any) -> Any:
            out = score(*a, **k)
            seen[-1] = (seen[-1][0], out["advantages"].clone())
            return out

        trainer._calculate_rewards, trainer._generate_and_score_completions = rewards_then, scored
        trainer.train()
    assert len(seen) == 4  # one prompt (4 completions) a step, the four flawed proofs in order
    # completions: accept (WRONG_POLARITY, format 1), reject at f, reject elsewhere (both judged), invalid
    for step, (rewards, adv) in enumerate(seen):
        failed = FLAWED[step]["problem"] in broken
        assert rewards[1:3].isnan().all().item() is failed  # both judged rows, every reward function
        assert not rewards[[0, 3]].isnan().any()            # unjudged rows keep their rewards
        totals = rewards[:, 0] + 0.2 * rewards[:, 1]
        kept = [0, 3] if failed else [0, 1, 2, 3]
        mean, std = totals[kept].mean(), totals[kept].std()
        for i in range(4):
            expected = (totals[i] - mean) / (std + 1e-4) if i in kept else 0.0
            assert adv[i].item() == pytest.approx(float(expected), abs=1e-5), (step, i)
    assert trainer.grader_failure_rows == 4  # two rows in each of two steps
    logged = [h["checking/grader_failure_rows"] for h in trainer.state.log_history if "checking/grader_failure_rows" in h]
    assert logged == [2.0, 2.0, 0.0, 0.0]
    # zero-spread on the total reward: every group here has spread (accept 0.2 vs invalid 0)
    assert all(h["checking/zero_spread_groups"] == 0.0 for h in trainer.state.log_history
               if "checking/zero_spread_groups" in h)
