"""train/uncertainty.py without a model: the disagreement rank, the balanced pairing, the sampler's layout."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from proofcheck.train.config import ConfigError, ProofcheckScriptArguments
from proofcheck.train.pool_queue import ChunkPlan, PoolQueues
from proofcheck.train.uncertainty import (
    ClassDraw,
    UncertaintySampler,
    class_splits,
    disagreement,
    rank_rows,
    splits,
)


def row(ok: bool, passes: list[int | None], scores: list[float] | None = None) -> dict[str, Any]:
    """A graded row: each pass is a first-error step (-1 = accept) or None (invalid)."""
    scores = scores or [1.0] * len(passes)
    return {"is_correct": ok, "trials": [{"outcome": "invalid" if p is None else "accept" if p == -1 else "reject",
                                          "score": s} for p, s in zip(passes, scores, strict=True)]}


@pytest.mark.parametrize(("r", "expected"), [
    (row(True, [-1, -1, -1, -1]), (False, 0.0, 0.0)),            # all accept: no signal
    (row(True, [-1, -1, 2, 3], [1, 1, 0, 0]), (True, 1.0, 1.0)),  # half accept: the most uncertain
    (row(False, [2, 2, 2, -1], [1, 1, 1, 0]), (True, 0.5, 1.0)),  # one accept in four
    (row(False, [2, 3, 3, 3], [1, .25, .25, .25]), (True, 0.0, 0.75)),  # all reject, located differently
    (row(False, [None, None, 2, 2], [0, 0, 1, 1]), (True, 0.0, 1.0)),   # invalid vs reject
    (row(False, [None, None], [0, 0]), (False, 0.0, 0.0)),        # all invalid: no signal
])
def test_disagreement(r: dict[str, Any], expected: tuple[bool, float, float]) -> None:
    assert disagreement(r) == pytest.approx(expected)


def test_rank_puts_disagreeing_rows_first_and_pairs_classes() -> None:
    results = [row(True, [-1, -1]), row(False, [2, -1], [1, 0]), row(True, [-1, 2], [1, 0]),
               row(False, [2, 2]), row(True, [2, 2], [0, 0]), row(False, [2, 3], [1, .25])]
    idx = [10, 11, 12, 13, 14, 15]
    # keys: 10 (F,0,0) 11 (T,1,1) 12 (T,1,1) 13 (F,0,0) 14 (F,0,0) 15 (T,0,.75)
    assert rank_rows(results, idx, balanced=False) == [11, 12, 15, 10, 13, 14]
    # valid by rank: 12, 10, 14; flawed: 11, 15, 13 -> pairs (12, 11), (10, 15), (14, 13)
    assert rank_rows(results, idx, balanced=True) == [12, 11, 10, 15, 14, 13]


class QueuePool:
    """What the sampler reads of a pool: its queues."""

    def __init__(self, queued: list[int], order: list[int]) -> None:
        self.queues = PoolQueues(order)
        self.queues.add(0, queued)


def test_sampler_serves_the_queue_first_in_repeat_sampler_layout() -> None:
    pool = QueuePool([7, 5, 3], [0, 1, 2, 3, 4, 5, 6, 7])
    s = UncertaintySampler(pool, num_samples=8, mini_repeat_count=2, batch_size=2, repeat_count=2)
    got = list(s)
    assert len(got) == len(s) == 4 * 2 * 2 * 2
    # chunk 1 = queued 7, 5 (each twice, the chunk twice); chunk 2 = queued 3 then the fallback's first
    assert got[:8] == [7, 7, 5, 5, 7, 7, 5, 5]
    assert got[8:16] == [3, 3, 0, 0, 3, 3, 0, 0]
    assert got[16:20] == [1, 1, 2, 2]
    assert [(d["queued"], d["fallback"]) for d in pool.queues.draws] == [(2, 0), (1, 1), (0, 2), (0, 2)]


def test_a_refresh_serves_the_chunks_from_the_first_not_yet_drawn() -> None:
    pool = QueuePool([], [0, 1, 2, 3])
    it = iter(UncertaintySampler(pool, num_samples=4, mini_repeat_count=1, batch_size=1, repeat_count=1))
    assert next(it) == 0
    pool.queues.add(pool.queues.drawn, [3])  # a refresh between two chunks
    assert next(it) == 3


# (grad_accum, micro-batches per chunk = num_iterations x steps_per_generation) -> the chunk holding each step's
# first micro-batch, and the chunks drawn when each step begins (its own micro-batches and one ahead)
@pytest.mark.parametrize(("ga", "r", "chunk_of", "drawn_at"), [
    (1, 1, [0, 1, 2, 3, 4], [2, 3, 4, 5, 6]),
    (2, 2, [0, 1, 2, 3, 4], [2, 3, 4, 5, 6]),    # steps_per_generation = gradient_accumulation_steps
    (1, 2, [0, 0, 1, 1, 2], [1, 2, 2, 3, 3]),    # num_iterations 2: a chunk serves two steps
    (2, 8, [0, 0, 0, 0, 1], [1, 1, 1, 2, 2]),    # steps_per_generation 4 with num_iterations 2
])
def test_chunk_plan(ga: int, r: int, chunk_of: list[int], drawn_at: list[int]) -> None:
    plan = ChunkPlan(prompts_per_chunk=2, micro_per_chunk=r, grad_accum=ga, max_steps=0)
    assert [plan.chunk_of_step(s) for s in range(1, 6)] == chunk_of
    assert [plan.drawn_at_begin(s) for s in range(1, 6)] == drawn_at


def test_the_first_cycle_is_full_and_the_last_refresh_stops_at_max_steps() -> None:
    plan = ChunkPlan(prompts_per_chunk=1, micro_per_chunk=1, grad_accum=1, max_steps=6)
    # before step 1: chunks 0-3 (steps 1-4), since steps 3 and 4 are drawn before the refresh at step 3 begins
    assert plan.chunks_until(0, 2) == 4
    assert plan.chunks_until(plan.drawn_at_begin(3), 4) == 2   # at step 3's begin: chunks 4, 5 (steps 5, 6)
    assert plan.chunks_until(plan.drawn_at_begin(5), 6) == 0   # at step 5's begin: nothing left to train


def test_a_restored_pool_draws_what_the_uninterrupted_one_draws() -> None:
    """Save after step 3 (every = 2: a refresh came at step 3's begin, after chunk 3 was drawn ahead), restore
    into a fresh pool that skips the trained chunks: chunks 3-5 are the same rows."""
    plan = ChunkPlan(prompts_per_chunk=2, micro_per_chunk=1, grad_accum=1, max_steps=6)
    order = list(range(20, 30))
    run = PoolQueues(order)
    run.add(0, [1, 2, 3, 4, 5, 6, 7])          # one row short of four chunks: chunk 3 takes a fallback row
    drawn = [run.chunk(k, 2) for k in range(4)]  # steps 1-3, and step 4's chunk ahead
    run.add(run.drawn, [8, 9, 10, 11])          # the refresh at step 3's begin, for chunks 4 and 5
    saved = json.loads(json.dumps(run.state_at(plan.chunk_of_step(4))))
    drawn += [run.chunk(k, 2) for k in range(4, 6)]

    resumed = PoolQueues(order)
    resumed.restore(saved)
    start = resumed.epoch_start(chunks_per_epoch=5)
    assert start == 0
    again = [resumed.chunk(k, 2) for k in range(6)]
    assert again[3:] == drawn[3:] == [[7, 20], [8, 9], [10, 11]]
    assert resumed.fallback == run.fallback


@pytest.mark.parametrize(("scale", "spread"), [("training", True), ("polarity", False)])
def test_pool_disagreement_follows_the_runs_reward(scale: str, spread: bool) -> None:
    """Two rejections of a flawed proof, one at its error (EXACT) and one elsewhere (POOR): they disagree on the
    training scale (1 vs 0.25) and agree when the run rewards polarity alone."""
    import torch

    from proofcheck.data.synth import balanced_tasks
    from proofcheck.parsing import format_verdict
    from proofcheck.reward.functions import FormatReward, MetaVerifierReward
    from proofcheck.train.uncertainty import RunReward, _scored

    task = next(t for t in balanced_tasks(4, seed=1) if not t["is_correct"])
    f, n = task["first_error_step"], len(task["steps"])
    row = {"proof_id": task["proof_id"], "prompt": "p", "annotation": json.dumps(task["annotation"]), "n_steps": n,
           "is_correct": False, "first_error_step": f, "domain": "ugd"}
    fmt = FormatReward()
    trainer = SimpleNamespace(reward_funcs=[MetaVerifierReward(scale=scale), fmt],
                              reward_weights=torch.tensor([1.0, 0.2]), state=None, async_loop=None)
    passes = [(format_verdict("bad", [(f, "x")], f), "stop"), (format_verdict("bad", [((f + 1) % n, "x")], (f + 1) % n),
                                                                "stop")]
    result = _scored(row, passes, RunReward(trainer))
    assert disagreement(result)[0] is spread
    assert sum(fmt.counts.values()) == 0  # the pool's passes are not counted as training completions


def test_pool_size_is_checked_against_one_count_of_a_generations_prompts() -> None:
    """The config check counts what the sampler serves: generation_batch_size // num_generations, all processes."""
    from trl import GRPOConfig, ModelConfig

    from proofcheck.train.config import check_compatible

    training = GRPOConfig(output_dir="x", use_cpu=True, bf16=False, per_device_train_batch_size=4, num_generations=4,
                          steps_per_generation=4, report_to="none")
    assert training.generation_batch_size // training.num_generations == 4
    with pytest.raises(ConfigError, match="not larger than the 4 prompts of a generation batch"):
        check_compatible(ProofcheckScriptArguments(synthetic_count=8, uncertainty_pool=4), training, ModelConfig())


@pytest.mark.parametrize(("kw", "match"), [
    ({"uncertainty_pool": -1}, "uncertainty_pool=-1"),
    ({"uncertainty_pool": 8, "uncertainty_passes": 1}, "uncertainty_passes=1"),
    ({"uncertainty_every": 0}, "uncertainty_every=0"),
    ({"uncertainty_draw": "flawed"}, "uncertainty_draw='flawed': choose one of pairs, by_split"),
    ({"uncertainty_pool": 8, "uncertainty_draw": "by_split"}, "needs balanced_batches: true"),
])
def test_bad_pool_settings_are_refused_with_the_fix(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProofcheckScriptArguments(synthetic_count=8, **kw)


def _trials(*outcomes: str) -> dict[str, Any]:
    return {"trials": [{"outcome": o} for o in outcomes]}


@pytest.mark.parametrize(("valid", "flawed", "share"), [
    # a verifier that rejects too often: its valid proofs split, its flawed ones rarely -> draw more flawed
    ((4, 4), (0, 4), 0.75),
    ((3, 4), (1, 4), 0.6667),
    ((2, 4), (2, 4), 0.5),
    # one that accepts too often: the other way
    ((0, 4), (4, 4), 0.25),
    # nothing split on either side: no reason to move
    ((0, 4), (0, 4), 0.5),
])
def test_by_split_draws_more_of_the_class_that_splits_less(valid: tuple[int, int], flawed: tuple[int, int],
                                                          share: float) -> None:
    rows = [{"is_correct": i % 2 == 0} for i in range(40)]
    draw = ClassDraw(rows, seed=3)
    candidates = draw.next(8)
    assert sorted(rows[i]["is_correct"] for i in candidates) == [False] * 4 + [True] * 4
    hits = {True: valid[0], False: flawed[0]}
    results = []
    for i in candidates:
        c = rows[i]["is_correct"]
        results.append({"is_correct": c, **(_trials("accept", "reject") if hits[c] > 0 else _trials("reject", "reject"))})
        hits[c] -= 1
    assert class_splits(results) == {True: valid, False: flawed}
    draw.update(class_splits(results))
    assert draw.flawed_share == share
    nxt = draw.next(12)
    assert sum(not rows[i]["is_correct"] for i in nxt) == round(12 * share)
    assert not set(nxt) & set(candidates)   # each class's order goes on where the last draw stopped


def test_by_split_walks_each_class_once_before_repeating_and_restores() -> None:
    rows = [{"is_correct": i < 6} for i in range(12)]     # 6 valid, 6 flawed
    draw = ClassDraw(rows, seed=0)
    draw.flawed_share = 0.75
    first = draw.next(8)                                   # 6 flawed, 2 valid
    assert sum(not rows[i]["is_correct"] for i in first) == 6
    assert [rows[i]["is_correct"] for i in first] == [True, False, True, False] + [False] * 4   # pairs first
    again = ClassDraw(rows, seed=0)
    again.restore(json.loads(json.dumps(draw.state())))
    assert again.next(8) == draw.next(8)
    assert sorted(i for i in first if not rows[i]["is_correct"]) == list(range(6, 12))   # every flawed row once


def test_splits_is_polarity_not_location() -> None:
    assert splits(_trials("accept", "reject"))
    assert not splits(_trials("reject", "reject", "invalid"))
    assert not splits(_trials("accept", "invalid"))
