"""GRPO prompts drawn where the current model is uncertain: a refreshed pool and the sampler that serves it.

GRPO learns only from groups whose completions earn different rewards: a proof the model always gets
right (or always wrong, or always writes invalid output for) gives every completion the same reward,
an advantage of zero, and a step spent on nothing. `UncertaintyPool` spends a little generation to
avoid that, the way `proofcheck data select` picks proofs for annotation (passes that disagree):

- every `every` optimizer steps (and before the first) it takes the next `pool` training proofs,
  verifies each with `passes` sampled passes on the trainer's own generation (the colocated vLLM
  engine, `trl vllm-serve` or `model.generate`: `VerifierEvalCallback.verify_now`, the same on every
  process), and grades them;
- it ranks them by disagreement: first those whose passes differ (in outcome: accept / reject /
  invalid, or in graded score), then by how evenly their passes split between accept and reject;
- a pass's score is the run's own reward (every reward function of the trainer, with its weights:
  `RunReward`), so "disagree" means what GRPO's advantage sees, whatever `reward_scale` or mix the run uses;
- the top ones go to a queue that `UncertaintySampler` (TRL's `RepeatSampler` layout: each prompt
  `num_generations` times, `repeat_count` times a chunk) serves before the dataset's own order. With
  `balanced_batches` the queue keeps valid/flawed pairs, so batches stay half valid;
- which candidates a refresh verifies (`ClassDraw`): half valid, half flawed (`pairs`), or (`by_split`) more of
  the class whose passes split between accept and reject less often. A verifier that rejects more than it
  should splits on many valid proofs and few flawed ones: from equal halves the queue's valid proofs then teach
  acceptance while its flawed ones mostly differ only in where the rejection points, and GRPO moves the verifier
  toward accepting (the demo of 2026-12-06: TPR +0.18, TNR -0.09).

The sampler is TRL's only by subclassing `GRPOTrainer._get_train_sampler` (`train/trainer.py`); the loop,
generation, loss and optimizer stay TRL's. What the sampler serves is counted in chunks (one generation
batch, `pool_queue.ChunkPlan`), not in time: the Trainer fetches a step's batches before the step begins and
the DataLoader one batch ahead, so a refresh serves the chunks from the first one not yet drawn, and it
queues exactly as many as will be drawn until the next refresh (none served from the fallback order while
the pool has rows). The queues are saved with each checkpoint and restored on resume (`pool_queue.
PoolQueues`), so a resumed run trains on the same prompts as an uninterrupted one. Each refresh's numbers
(seconds, share of the pool with a signal, the chunks it serves) go to `history` and the run summary
(`uncertainty`); its time is not a step's (`StepTimer.exclude`), and the time budget counts the next one.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from proofcheck.io import write_json_atomic
from proofcheck.train.config import UNCERTAINTY_DRAWS
from proofcheck.train.pool_queue import ChunkPlan, PoolQueues

POOL_FILE = "proofcheck_uncertainty.json"  # the pool's state in a checkpoint folder


def disagreement(result: dict[str, Any]) -> tuple[bool, float, float]:
    """How uncertain the model is on one graded row (`eval_generation.grade_row`, each trial's `score` the run's
    reward: `RunReward`): (its passes differ in outcome or score, 1 - |2 x accept share - 1|, score spread).
    Higher sorts first; a pass whose grade failed (score None) adds no spread.

    >>> disagreement({"trials": [{"outcome": "accept", "score": 1.0}, {"outcome": "reject", "score": 0.0}]})
    (True, 1.0, 1.0)
    """
    outcomes = [t["outcome"] for t in result["trials"]]
    scores = [t["score"] for t in result["trials"] if t["score"] is not None]
    spread = max(scores) - min(scores) if scores else 0.0
    accepts = outcomes.count("accept") / max(1, len(outcomes))
    return (len(set(outcomes)) > 1 or spread > 0, 1.0 - abs(2 * accepts - 1), spread)


def rank_rows(results: list[dict[str, Any]], indices: list[int], balanced: bool) -> list[int]:
    """`indices` (the rows `results` grade, in order) most uncertain first; with `balanced`, as
    (valid, flawed) pairs of the most uncertain of each class, the rest dropped.

    >>> r = lambda ok, outs: {"is_correct": ok, "trials": [{"outcome": o, "score": 1.0} for o in outs]}
    >>> rank_rows([r(True, ["accept"] * 2), r(True, ["accept", "reject"]), r(False, ["reject"] * 2)], [7, 8, 9],
    ...           balanced=True)
    [8, 9]
    """
    order = sorted(range(len(results)), key=lambda j: disagreement(results[j]), reverse=True)
    if not balanced:
        return [indices[j] for j in order]
    valid = [indices[j] for j in order if results[j]["is_correct"]]
    flawed = [indices[j] for j in order if not results[j]["is_correct"]]
    return interleave(valid, flawed)


def interleave(valid: list[int], flawed: list[int], keep_rest: bool = False) -> list[int]:
    """(valid, flawed) pairs while both last; then, with `keep_rest`, the longer list's remainder.

    >>> interleave([1, 2, 3], [7]), interleave([1, 2, 3], [7], keep_rest=True)
    ([1, 7], [1, 7, 2, 3])
    """
    pairs = [i for pair in zip(valid, flawed, strict=False) for i in pair]
    return pairs + valid[len(flawed):] + flawed[len(valid):] if keep_rest else pairs


def class_orders(rows: list[dict[str, Any]], rng: random.Random) -> dict[bool, list[int]]:
    """Each class's row indices (True: valid), shuffled by `rng`, the valid ones first."""
    orders = {c: [i for i, r in enumerate(rows) if bool(r["is_correct"]) == c] for c in (True, False)}
    for order in orders.values():
        rng.shuffle(order)
    return orders


def class_splits(results: list[dict[str, Any]]) -> dict[bool, tuple[int, int]]:
    """Per class (True: valid), how many graded rows' passes split (`splits`) and how many rows there are."""
    return {c: (sum(splits(r) for r in results if bool(r["is_correct"]) == c),
                sum(bool(r["is_correct"]) == c for r in results)) for c in (True, False)}


def splits(result: dict[str, Any]) -> bool:
    """Whether a graded row's passes split between accepting and rejecting (the polarity, not the location).

    >>> splits({"trials": [{"outcome": "accept"}, {"outcome": "reject"}, {"outcome": "invalid"}]})
    True
    >>> splits({"trials": [{"outcome": "reject"}, {"outcome": "reject"}, {"outcome": "invalid"}]})
    False
    """
    outcomes = {t["outcome"] for t in result["trials"]}
    return {"accept", "reject"} <= outcomes


class ClassDraw:
    """The `by_split` draw: which training rows a refresh verifies, `pool` at a time, from a shuffled order of
    each class (each wraps around on its own).

    A share `flawed_share` of them is flawed, chosen so that both classes are expected to yield as many rows
    whose passes split (`splits`): share = s_valid / (s_valid + s_flawed), each s the class's split rate at the
    last refresh with one split and one non-split added (a class the refresh drew little of moves it little),
    clamped to [1/4, 3/4]; 1/2 before the first refresh.

    >>> d = ClassDraw([{"is_correct": i % 2 == 0} for i in range(16)], seed=0)
    >>> first = d.next(8); sum(i % 2 for i in first)
    4
    >>> d.update({True: (4, 4), False: (0, 4)}); d.flawed_share   # every valid row split, no flawed one
    0.75
    """

    MIN_SHARE, MAX_SHARE = 0.25, 0.75

    def __init__(self, rows: list[dict[str, Any]], seed: int) -> None:
        self.orders = class_orders(rows, random.Random(seed))
        self.cursors = {True: 0, False: 0}
        self.flawed_share = 0.5

    def next(self, pool: int) -> list[int]:
        """The next `pool` candidates (each class's order wraps around), valid and flawed alternating while both last."""
        flawed = min(len(self.orders[False]), round(pool * self.flawed_share))
        take = {False: flawed, True: min(len(self.orders[True]), pool - flawed)}
        drawn = {}
        for c, n in take.items():
            order, start = self.orders[c], self.cursors[c]
            drawn[c] = [order[(start + k) % len(order)] for k in range(n)]
            self.cursors[c] = (start + n) % max(1, len(order))
        return interleave(drawn[True], drawn[False], keep_rest=True)

    def update(self, counts: dict[bool, tuple[int, int]]) -> None:
        """The next refresh's flawed share from this refresh's `class_splits` (splitting rows, rows per class)."""
        rate = {c: (hits + 1) / (n + 2) for c, (hits, n) in counts.items()}
        share = rate[True] / (rate[True] + rate[False])
        self.flawed_share = round(min(self.MAX_SHARE, max(self.MIN_SHARE, share)), 4)

    def state(self) -> dict[str, Any]:
        return {"cursors": {"valid": self.cursors[True], "flawed": self.cursors[False]},
                "flawed_share": self.flawed_share}

    def restore(self, saved: dict[str, Any]) -> None:
        self.cursors = {True: int(saved["cursors"]["valid"]), False: int(saved["cursors"]["flawed"])}
        self.flawed_share = float(saved["flawed_share"])


class RunReward:
    """The run's total reward for verification passes of one training row: every reward function of the trainer
    (async ones on its event loop) with its weight, on the row's dataset columns; None where a grade failed
    (a function marked `grades = True` returned None), as GRPO would leave that row out. Reward counters are
    left as they were: the pool's passes are not training completions."""

    def __init__(self, trainer: Any) -> None:
        import torch

        if any(isinstance(fn, torch.nn.Module) for fn in trainer.reward_funcs):
            raise ValueError("uncertainty_pool ranks proofs by the run's reward functions; a reward model "
                             "(nn.Module) is not supported: set uncertainty_pool: 0")
        self.trainer = trainer

    def _call(self, fn: Any, completions: list[Any], columns: dict[str, list[Any]]) -> list[float | None]:
        counts = getattr(fn, "counts", None)
        kept = counts.copy() if counts is not None else None
        try:
            out = fn(completions=completions, **columns)
            if asyncio.iscoroutine(out):
                out = asyncio.run_coroutine_threadsafe(out, self.trainer.async_loop).result()
        finally:
            if kept is not None:
                fn.counts = kept
        return list(out)

    def __call__(self, row: dict[str, Any], passes: list[tuple[str, str]]) -> list[float | None]:
        n = len(passes)
        columns = {k: [v] * n for k, v in row.items() if k not in ("completion", "completion_ids")}
        columns["prompts"] = columns.pop("prompt", [None] * n)
        columns["finish_reason"] = [finish for _, finish in passes]
        columns["trainer_state"] = self.trainer.state
        conversational = isinstance(row.get("prompt"), list)
        completions = [[{"role": "assistant", "content": text}] if conversational else text for text, _ in passes]
        totals: list[float | None] = [0.0] * n
        weights = self.trainer.reward_weights.tolist()
        for fn, weight in zip(self.trainer.reward_funcs, weights, strict=True):
            for i, r in enumerate(self._call(fn, completions, columns)):
                if r is None or r != r:
                    totals[i] = None if getattr(fn, "grades", False) else totals[i]
                elif totals[i] is not None:
                    totals[i] += weight * r
        return totals


class UncertaintyPool(TrainerCallback):
    """Refreshes the queue of uncertain training rows during GRPO (see the module docstring)."""

    def __init__(self, trainer: Any, rows: list[dict[str, Any]], *, pool: int, passes: int, every: int,
                 plan: ChunkPlan, balanced: bool, seed: int, max_new_tokens: int, temperature: float,
                 batch_size: int, draw: str = "pairs") -> None:
        from proofcheck.train.callbacks import VerifierEvalCallback

        self.rows, self.pool, self.every, self.balanced, self.plan = rows, pool, every, balanced, plan
        reward = RunReward(trainer)
        self.verifier = VerifierEvalCallback(trainer, [], passes=passes, max_new_tokens=max_new_tokens,
                                             temperature=temperature, batch_size=batch_size, seed=seed + 104729,
                                             grade=lambda row, p: _scored(row, p, reward))
        self.order = _candidate_order(rows, balanced, seed)
        self.cursor = 0
        if draw not in UNCERTAINTY_DRAWS or (draw == "by_split" and not balanced):
            raise ValueError(f"uncertainty draw {draw!r}: `pairs`, or `by_split` with balanced batches")
        self.draw = ClassDraw(rows, seed) if draw == "by_split" else None
        self.queues = PoolQueues(self.order)
        self.history: list[dict[str, Any]] = []
        self.restored_from: str | None = None

    def _next_candidates(self) -> list[int]:
        if self.draw is not None:
            return self.draw.next(self.pool)
        out = [self.order[(self.cursor + i) % len(self.order)] for i in range(min(self.pool, len(self.order)))]
        self.cursor = (self.cursor + len(out)) % len(self.order)
        return out

    def refresh(self, step: int) -> dict[str, Any] | None:
        """Verify the next pool of rows now (every process) and queue the most uncertain ones for the chunks
        drawn until the next refresh; None (nothing verified) when those chunks would all come after the
        run's last step."""
        first = self.queues.drawn
        wanted = self.plan.chunks_until(first, step + self.every) * self.plan.prompts_per_chunk
        if wanted <= 0:
            return None
        trainer = self.verifier.trainer
        t0 = time.perf_counter()
        was_training = trainer.model.training
        candidates = self._next_candidates()
        self.verifier.rows = [self.rows[i] for i in candidates]
        try:
            results = self.verifier.verify_now(len(candidates))
        finally:
            if was_training:
                trainer.model.train()
        queued = rank_rows(results, candidates, self.balanced)[:wanted]
        self.queues.add(first, queued)
        signal = sum(disagreement(r)[0] for r in results)
        counts = class_splits(results)
        entry = {"step": step, "seconds": round(time.perf_counter() - t0, 3), "pool": len(candidates),
                 "with_signal": signal, "signal_share": round(signal / max(1, len(candidates)), 4),
                 "flawed": counts[False][1], "split_valid": counts[True][0], "split_flawed": counts[False][0],
                 "from_chunk": first, "wanted": wanted, "queued": len(queued),
                 "selected": [self.rows[i].get("proof_id") for i in queued]}
        if self.draw is not None:
            self.draw.update(counts)
            entry["next_flawed_share"] = self.draw.flawed_share
        self.history.append(entry)
        return entry

    def due(self, global_step: int) -> bool:
        """Whether the step after `global_step` begins with a refresh."""
        return global_step > 0 and global_step % self.every == 0 and \
            self.plan.chunks_until(self.queues.drawn, global_step + self.every) > 0

    def next_refresh_s(self, global_step: int) -> float:
        """Seconds the next step will spend on a refresh before it trains (the last refresh's, or 0)."""
        return float(self.history[-1]["seconds"]) if self.history and self.due(global_step) else 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.restored_from is None:
            self.refresh(state.global_step)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.due(state.global_step):
            self.refresh(state.global_step)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():  # before CheckpointCallback lists the files
            chunk = self.plan.chunk_of_step(state.global_step + 1)
            draw = {"draw": self.draw.state()} if self.draw is not None else {}
            write_json_atomic(folder / POOL_FILE, {"cursor": self.cursor, "history": self.history, **draw,
                                                   **self.queues.state_at(chunk)})

    def restore(self, checkpoint: str | Path) -> bool:
        """Take the pool's state from `checkpoint` (False when it holds none: a checkpoint of a run without
        the pool, or of an older version or another draw; the pool then starts afresh at train begin)."""
        p = Path(checkpoint) / POOL_FILE
        if not p.is_file():
            return False
        saved = json.loads(p.read_text(encoding="utf-8"))
        if (self.draw is None) != ("draw" not in saved):
            return False
        if self.draw is not None:
            self.draw.restore(saved["draw"])
        self.cursor, self.history = int(saved["cursor"]), list(saved["history"])
        self.queues.restore(saved)
        self.restored_from = str(checkpoint)
        return True


def _scored(row: dict[str, Any], passes: list[tuple[str, str]], reward: RunReward) -> dict[str, Any]:
    """`grade_row` with each trial's score the run's reward (None where its grade failed)."""
    from proofcheck.train.eval_generation import grade_row

    result = grade_row(row, passes)
    for trial, score in zip(result["trials"], reward(row, passes), strict=True):
        trial["score"] = score
    return result


def _candidate_order(rows: list[dict[str, Any]], balanced: bool, seed: int) -> list[int]:
    """The order in which rows enter the pool: shuffled, and with `balanced` alternating valid / flawed."""
    rng = random.Random(seed)
    if not balanced:
        order = list(range(len(rows)))
        rng.shuffle(order)
        return order
    orders = class_orders(rows, rng)
    return interleave(orders[True], orders[False])


class UncertaintySampler:
    """TRL's `RepeatSampler` layout over chunks drawn from an `UncertaintyPool`'s queues (its queued rows first,
    then the dataset's own order): each chunk of `batch_size` prompts is yielded `repeat_count` times, each
    prompt `mini_repeat_count` times in a row. As long as RepeatSampler's epoch; the same on every process
    (the pool's refreshes are)."""

    def __init__(self, pool: UncertaintyPool, num_samples: int, mini_repeat_count: int, batch_size: int,
                 repeat_count: int) -> None:
        self.pool, self.num_samples = pool, num_samples
        self.mini_repeat_count, self.batch_size, self.repeat_count = mini_repeat_count, batch_size, repeat_count

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        chunks = self.num_samples // self.batch_size
        start = self.pool.queues.epoch_start(chunks)
        for k in range(start, start + chunks):
            chunk = self.pool.queues.chunk(k, self.batch_size)
            for _ in range(self.repeat_count):
                for index in chunk:
                    yield from [index] * self.mini_repeat_count
