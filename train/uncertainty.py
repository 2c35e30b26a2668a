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
- the top ones go to a queue that `UncertaintySampler` (TRL's `RepeatSampler` layout: each prompt
  `num_generations` times, `repeat_count` times a batch) serves before the dataset's own order. With
  `balanced_batches` the queue keeps valid/flawed pairs, so batches stay half valid.

The sampler is TRL's only by subclassing `GRPOTrainer._get_train_sampler` (`trainer_class`); the loop,
generation, loss and optimizer stay TRL's. The DataLoader draws one batch ahead, so a refresh after step
t (made when step t + 1 begins) shapes the batches from step t + 2. Each refresh's numbers (seconds, share of the pool with a
signal) go to `history` and the run summary (`uncertainty`).
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from transformers import TrainerCallback


def disagreement(result: dict[str, Any]) -> tuple[bool, float, float]:
    """How uncertain the model is on one graded row (`eval_generation.grade_row`): (its passes differ in outcome
    or score, 1 - |2 x accept share - 1|, score spread). Higher sorts first.

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
    return [i for pair in zip(valid, flawed, strict=False) for i in pair]


class UncertaintyPool(TrainerCallback):
    """Refreshes the queue of uncertain training rows during GRPO (see the module docstring)."""

    def __init__(self, trainer: Any, rows: list[dict[str, Any]], *, pool: int, passes: int, every: int,
                 prompts_per_step: int, balanced: bool, seed: int, max_new_tokens: int, temperature: float,
                 batch_size: int) -> None:
        from proofcheck.train.callbacks import VerifierEvalCallback

        self.rows, self.pool, self.every, self.balanced = rows, pool, every, balanced
        self.wanted = (every + 1) * prompts_per_step  # until the next refresh, and the batch drawn ahead
        self.verifier = VerifierEvalCallback(trainer, [], passes=passes, max_new_tokens=max_new_tokens,
                                             temperature=temperature, batch_size=batch_size, seed=seed + 104729)
        self.order = _candidate_order(rows, balanced, seed)
        self.cursor = 0
        self.queue: deque[int] = deque()
        self.history: list[dict[str, Any]] = []

    def _next_candidates(self) -> list[int]:
        out = [self.order[(self.cursor + i) % len(self.order)] for i in range(min(self.pool, len(self.order)))]
        self.cursor = (self.cursor + len(out)) % len(self.order)
        return out

    def refresh(self, step: int) -> dict[str, Any]:
        """Verify the next pool of rows now (every process) and queue the most uncertain ones."""
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
        ranked = rank_rows(results, candidates, self.balanced)
        self.queue = deque(ranked[:self.wanted])
        signal = sum(disagreement(r)[0] for r in results)
        entry = {"step": step, "seconds": round(time.perf_counter() - t0, 3), "pool": len(candidates),
                 "with_signal": signal, "signal_share": round(signal / max(1, len(candidates)), 4),
                 "queued": len(self.queue), "selected": [self.rows[i].get("proof_id") for i in self.queue]}
        self.history.append(entry)
        return entry

    def take(self) -> int | None:
        """The next queued row, or None when the queue is empty (the sampler then uses its own order)."""
        return self.queue.popleft() if self.queue else None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.refresh(state.global_step)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # at the start of the step after every `every`-th: a run that ends there (max_steps, a time budget)
        # never pays for a pool it would not train on
        if state.global_step and state.global_step % self.every == 0:
            self.refresh(state.global_step)


def _candidate_order(rows: list[dict[str, Any]], balanced: bool, seed: int) -> list[int]:
    """The order in which rows enter the pool: shuffled, and with `balanced` alternating valid / flawed."""
    rng = random.Random(seed)
    if not balanced:
        order = list(range(len(rows)))
        rng.shuffle(order)
        return order
    valid = [i for i, r in enumerate(rows) if r["is_correct"]]
    flawed = [i for i, r in enumerate(rows) if not r["is_correct"]]
    rng.shuffle(valid)
    rng.shuffle(flawed)
    return [i for pair in zip(valid, flawed, strict=False) for i in pair]


class UncertaintySampler:
    """TRL's `RepeatSampler` layout over prompts taken from an `UncertaintyPool`'s queue first, then from
    the dataset's own order: each batch of `batch_size` prompts is yielded `repeat_count` times, each
    prompt `mini_repeat_count` times in a row. As long as RepeatSampler's epoch; the same on every process
    (the pool's refreshes are)."""

    def __init__(self, pool: UncertaintyPool, num_samples: int, mini_repeat_count: int, batch_size: int,
                 repeat_count: int) -> None:
        self.pool, self.num_samples = pool, num_samples
        self.mini_repeat_count, self.batch_size, self.repeat_count = mini_repeat_count, batch_size, repeat_count

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        fallback = iter(self.pool.order * (1 + self.num_samples // max(1, len(self.pool.order))))
        for _ in range(self.num_samples // self.batch_size):
            chunk = []
            for _ in range(self.batch_size):
                nxt = self.pool.take()
                chunk.append(nxt if nxt is not None else next(fallback))
            for _ in range(self.repeat_count):
                for index in chunk:
                    yield from [index] * self.mini_repeat_count


def trainer_class() -> type:
    """GRPOTrainer whose training sampler is an `UncertaintySampler` when `trainer.uncertainty` is set, and
    whose log-probabilities are computed at the completion tokens only on CPU when `trainer.completion_logits`
    is set (`train/logprobs.py`; TRL's own method everywhere else)."""
    from trl import GRPOTrainer

    class UncertaintyGRPOTrainer(GRPOTrainer):
        uncertainty: UncertaintyPool | None = None
        completion_logits: bool = False   # the recipes' `completion_logits` (train/run.py sets it)
        share_prompt: bool = True         # the recipes' `completion_logits_shared_prompt`
        flush_denormal: bool | None = None  # whether train/run.py flushed denormals (None: not asked)

        def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                               logits_to_keep: int, batch_size: int | None = None,
                                               compute_entropy: bool = False, compute_aux_loss: bool = False,
                                               **extra: Any) -> tuple[Any, Any, Any]:
            from proofcheck.train.logprobs import applies, completion_logps

            if not (self.completion_logits and applies(input_ids.device.type, compute_aux_loss,
                                                       self._entropy_bonus_enabled, extra)):
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                    compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)
            lm_head = self.accelerator.unwrap_model(model).get_output_embeddings()
            logps, entropies = completion_logps(model, lm_head, input_ids, attention_mask, logits_to_keep,
                                                rows=min(batch_size or self.num_generations, self.num_generations),
                                                temperature=self.temperature, autocast=self.accelerator.autocast,
                                                compute_entropy=compute_entropy,
                                                share_prompt=self.share_prompt and not self.args.gradient_checkpointing)
            return logps, entropies, None

        def _get_train_sampler(self, dataset: Any = None) -> Any:
            if self.uncertainty is None:
                return super()._get_train_sampler(dataset)
            dataset = dataset if dataset is not None else self.train_dataset
            return UncertaintySampler(self.uncertainty, len(dataset), self.num_generations,
                                      self.args.generation_batch_size // self.num_generations,
                                      self.num_iterations * self.args.steps_per_generation)

    return UncertaintyGRPOTrainer
