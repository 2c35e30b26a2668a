"""Trainer callbacks: k-pass held-out verification during training, and the run history.

`VerifierEvalCallback` verifies the held-out proofs with the trainer's own generation
(`proofcheck.train.eval_generation`): the colocated vLLM engine (one `n=k` request per proof; a
sleeping engine woken and put back), the `trl vllm-serve` server through the trainer's client, or
sampled `model.generate` (`num_return_sequences=k`); the tokenizer's chat template either way. It
parses every pass with the core protocol (`proofcheck.verification.parse_pass`), grades it with the
reward package's structural grader, and logs through `trainer.log`: `eval_verify/reward_mean`,
`eval_verify/rough_bal_f1`, `eval_verify/first_error_step_accuracy`, `eval_verify/valid_rate`,
`eval_verify/rough_tpr`, `eval_verify/rough_tnr`.
Every process verifies an equal, padded share of the proofs, so all ranks make the same
collective calls (`proofcheck.train.distributed` has the rules: padding, `synced_gpus`, sleep
mode, tensor-parallel groups); the results are gathered in row order so all ranks log the same
numbers. Every evaluation uses the same sampling seeds, so "before" (at step 0, with `at_start`)
and "after" see the same tasks with the same seeds; HF sampling uses a forked RNG, so evaluating
never changes the training run. Metrics come with standard errors over proofs
(`proofcheck.metrics.eval_metrics`: the core computes them, so bench and the reports can too).

`RunHistoryCallback` keeps (step, reward) and the eval results for `run_summary.json` (restored
from the checkpoint on resume: `proofcheck.train.checkpoints`). `StepTimer`, which splits each GRPO
step into generation, weight sync, reward and the rest, is in `proofcheck.train.step_timer`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

from proofcheck.metrics import eval_metrics, paired_gain
from proofcheck.train.eval_generation import (
    eos_ids,
    eval_backend,
    generate_hf,
    generate_vllm,
    grade_row,
    prompt_ids,
    template_kwargs,
)

EVAL_PREFIX = "eval_verify/"


class VerifierEvalCallback(TrainerCallback):
    """Every `every_steps` optimizer steps (0 = never), at the end, and with `at_start` before the
    first step, verify the eval rows with k passes.

    Distributed (every rank calls `evaluate`; `proofcheck.train.distributed` has the rules): each
    rank takes rows `rank::world` padded to the same count, so every rank makes the same
    collective and `generate` calls the same number of times; HF generation runs with
    `synced_gpus` under ZeRO-3 and FSDP; a sleeping colocated engine is woken (weights re-pushed,
    KV cache) and put back to sleep; a tensor-parallel group gathers its prompts as TRL's
    generation does; in server mode the main process sends every prompt to the server. The
    results are gathered in row order, so all ranks log the same numbers.

    Example:
        >>> cb = VerifierEvalCallback(trainer, eval_rows, passes=4, every_steps=50)  # doctest: +SKIP
        >>> trainer.add_callback(cb)  # doctest: +SKIP
    """

    def __init__(self, trainer: Any, rows: list[dict], *, passes: int = 4, every_steps: int = 0,
                 max_new_tokens: int = 256, temperature: float = 1.0, batch_size: int = 4, seed: int = 0,
                 at_start: bool = False, constrain_format: bool = False, collectives: Any = None,
                 curve_samples: int = 0, grade: Callable[[dict, list[tuple[str, str]]], dict] = grade_row):
        self.trainer = trainer
        self.grade = grade  # a row's passes -> its graded result (the uncertainty pool scores by the run's reward)
        # the learning curve: the periodic evaluations verify only the first `curve_samples` rows
        # (0 = all); the full ones (start, end) contribute the same rows' metrics to the curve
        self.curve_samples = curve_samples if 0 < curve_samples < len(rows) else len(rows)
        self.curve: list[dict[str, Any]] = []
        self.timeline: list[tuple[str, float]] = []  # ("full" | "curve", seconds) of every evaluation, in order
        self.constrain_format = constrain_format
        self.at_start = at_start
        self.rows = rows
        self.passes = passes
        self.every_steps = every_steps
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.batch_size = batch_size
        self.seed = seed
        self.collectives = collectives  # None: accelerate / torch.distributed (tests pass a recorder)
        self.history: list[dict[str, Any]] = []
        self.last_results: list[dict] = []
        self.first_results: list[dict] | None = None  # this run's first full evaluation: the base of `paired_gain`
        self.first_step: int | None = None
        self._last_step: int | None = None

    def evaluate(self, step: int, curve_only: bool = False) -> dict[str, Any]:
        """Run the k-pass evaluation now (all processes must call it); log and return the metrics.

        A full evaluation (all rows) goes into `history` and gives the curve its point from the first
        `curve_samples` rows; `curve_only` verifies just those rows and adds only the curve point."""
        from proofcheck.train.family_eval import per_family_metrics

        trainer = self.trainer
        n_rows = self.curve_samples if curve_only else len(self.rows)
        backend = eval_backend(trainer)
        t0 = time.perf_counter()
        was_training = trainer.model.training
        try:
            results = self.verify_now(n_rows)
            metrics = eval_metrics(results)
            seconds = round(time.perf_counter() - t0, 3)
            metrics["seconds"] = seconds
            metrics["generation"] = backend
            if by_family := per_family_metrics(results, self.rows):  # rows of known proof families
                metrics["by_family"] = by_family  # kept in the history and summary, not logged as a scalar
            prefix = f"{EVAL_PREFIX}curve_" if curve_only else EVAL_PREFIX
            logs = {f"{prefix}{k}": float(v) for k, v in metrics.items()
                    if isinstance(v, int | float) and not math.isnan(v)}
            trainer.log(logs)  # in eval mode: GRPOTrainer.log flushes only eval-mode metrics
        finally:
            if was_training:
                trainer.model.train()
        self.timeline.append(("curve" if curve_only else "full", seconds))
        point = metrics if curve_only or n_rows == self.curve_samples else eval_metrics(results[:self.curve_samples])
        # a run stopped early by its time budget may have had a curve point at its last step: the final one replaces it
        self.curve = [c for c in self.curve if c["step"] != step]
        self.curve.append({"step": step, **{k: v for k, v in point.items() if k != "by_family"}})
        self.last_results = results  # per-proof trials of this evaluation (for callers and tests)
        entry = {"step": step, **metrics}
        if curve_only:
            return entry
        if self.first_results is None:
            self.first_results, self.first_step = results, step
        else:  # the change since this run's first full evaluation, with the paired standard errors
            entry["paired_gain"] = {"since_step": self.first_step, **paired_gain(self.first_results, results)}
        self._last_step = step
        self.history.append(entry)
        return entry

    def verify_now(self, n_rows: int) -> list[dict]:
        """The first `n_rows` rows verified with k passes on the trainer's generation and graded, in row
        order, the same on every process (all processes must call it); the model is left in eval mode."""
        from proofcheck.train.distributed import Collectives, shard

        trainer = self.trainer
        coll = self.collectives or Collectives(trainer.accelerator)
        part = shard(n_rows, coll.rank, coll.world)
        backend = eval_backend(trainer)
        trainer.model.eval()
        if backend == "vllm-colocate":
            passes = self._colocate(coll, part.indices)
        elif backend == "vllm-server":
            passes = self._server(coll, part.indices)
        else:
            passes = self._transformers(coll, part.indices)
        local = [(i, self.grade(self.rows[i], p)) for i, p in zip(part.indices[:part.real], passes, strict=False)]
        return [r for _, r in sorted((x for got in coll.gather(local) for x in got), key=lambda t: t[0])]

    def _colocate(self, coll: Any, indices: list[int]) -> list[list[tuple[str, str]]]:
        """This rank's rows on the colocated engine. With tensor parallelism > 1 the ranks of a TP
        group share one engine and must submit the same prompts: the group gathers its prompts
        (as TRL's generation does), generates all of them and each rank keeps its own slice."""
        from proofcheck.train.distributed import colocated_engine_ready, restore_engine_sleep

        trainer = self.trainer
        vg = trainer.vllm_generation
        prompts = [(i, prompt_ids(trainer.processing_class, self.rows[i], template_kwargs(trainer))) for i in indices]
        tp = int(getattr(vg, "tensor_parallel_size", 1) or 1)
        if tp > 1:
            every = [p for got in coll.gather_group(prompts, vg.tp_group, tp) for p in got]
            pos = coll.group_rank(vg.tp_group)
        else:
            every, pos = prompts, 0
        asleep = colocated_engine_ready(trainer)
        try:
            if tp > 1:
                coll.barrier()  # as TRL: let the data-parallel collectives drain before vLLM's TP ones
            outs = generate_vllm(vg.llm, every, self.rows, passes=self.passes, max_new_tokens=self.max_new_tokens,
                                 temperature=self.temperature, seed=self.seed,
                                 constrain_format=self.constrain_format)
        finally:
            if asleep:
                restore_engine_sleep(trainer)
        m = len(prompts)
        return outs[pos * m:(pos + 1) * m]

    def _server(self, coll: Any, indices: list[int]) -> list[list[tuple[str, str]]]:
        """This rank's rows through the trainer's `trl vllm-serve` client: the weights are pushed if
        the step moved (a collective), the main process sends every rank's prompts in one request
        and broadcasts the completions."""
        from proofcheck.parsing import finish_reason_from_ids

        trainer = self.trainer
        vg = trainer.vllm_generation
        if trainer.state.global_step != trainer._last_loaded_step:
            vg.sync_weights()
            trainer._last_loaded_step = trainer.state.global_step
        tok = trainer.processing_class
        mine = [prompt_ids(tok, self.rows[i], template_kwargs(trainer)) for i in indices]
        every = [p for got in coll.gather(mine) for p in got]
        ids = None
        if coll.rank == 0:
            ids = vg.vllm_client.generate(prompts=every, n=self.passes, temperature=self.temperature, top_p=1.0,
                                          top_k=0, max_tokens=self.max_new_tokens,
                                          generation_kwargs={"seed": self.seed})["completion_ids"]
        ids = coll.broadcast(ids)
        k, m = self.passes, len(mine)
        eos = eos_ids(trainer.model, tok)
        out = []
        for j in range(m):
            row_passes = []
            for seq in ids[(coll.rank * m + j) * k:(coll.rank * m + j + 1) * k]:
                finish = finish_reason_from_ids(seq, eos, self.max_new_tokens)
                text = tok.decode(seq[:-1] if finish == "stop" and seq and seq[-1] in eos else seq,
                                  skip_special_tokens=True)
                row_passes.append((text, finish))
            out.append(row_passes)
        return out

    def _transformers(self, coll: Any, indices: list[int]) -> list[list[tuple[str, str]]]:
        """This rank's rows with `model.generate` (ZeRO-3 parameters gathered by TRL's unwrap, FSDP1
        ones summoned; `synced_gpus` whenever parameters are sharded)."""
        from contextlib import nullcontext

        from trl.models.utils import unwrap_model_for_generation

        from proofcheck.train.distributed import hf_generate_synced

        trainer = self.trainer
        dist = getattr(trainer, "_dist", None)
        summon = dist.summon_full_params(trainer.model_wrapped, recurse=False) if dist is not None else nullcontext()
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=getattr(trainer.args, "ds3_gather_for_generation",
                                                                          True)) as model, summon:
            return generate_hf(model, trainer.processing_class, [self.rows[i] for i in indices], passes=self.passes,
                               max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                               batch_size=self.batch_size, seed=self.seed + 7919 * coll.rank,
                               synced_gpus=hf_generate_synced(dist, coll.world),
                               chat_template_kwargs=template_kwargs(trainer))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.rows and self.at_start and state.global_step == 0:
            self.evaluate(0)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.rows and self.every_steps and state.global_step % self.every_steps == 0 \
                and state.global_step < state.max_steps:  # the last step gets the full evaluation at the end
            # trainer.log() clears control.should_log; keep it so this step's training log still happens
            should_log = control.should_log
            self.evaluate(state.global_step, curve_only=self.curve_samples < len(self.rows))
            control.should_log = should_log

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.rows and self._last_step != state.global_step:
            self.evaluate(state.global_step)


# What a GRPO step's log says about checking (TRL's own keys, and our reward's `checking/...`,
# proofcheck.reward.diagnostics): kept per step in run_summary.json's `step_diagnostics`.
TRL_DIAGNOSTICS = ("reward", "reward_std", "frac_reward_zero_std", "completions/mean_length",
                   "completions/clipped_ratio", "entropy")


def step_diagnostics(logs: dict[str, Any]) -> dict[str, float]:
    """The checking diagnostics of one training log row (empty for an evaluation or summary row)."""
    return {k: float(v) for k, v in logs.items()
            if (k in TRL_DIAGNOSTICS or k.startswith("checking/")) and isinstance(v, int | float)}


class RunHistoryCallback(TrainerCallback):
    """Keeps the logged training reward and checking diagnostics per step and the wall time, for the run summary."""

    def __init__(self) -> None:
        self.rewards: list[tuple[int, float]] = []
        self.diagnostics: list[dict[str, float]] = []
        self.t_start: float | None = None
        self.t_end: float | None = None
        self.start_step: int | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.t_start = time.perf_counter()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.start_step is None:
            self.start_step = state.global_step  # > 0 when resumed from a checkpoint

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if logs and isinstance(logs.get("reward"), int | float):
            self.rewards.append((state.global_step, float(logs["reward"])))
            self.diagnostics.append({"step": state.global_step, **step_diagnostics(logs)})

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.t_end = time.perf_counter()

    @property
    def wall_time_s(self) -> float | None:
        if self.t_start is None or self.t_end is None:
            return None
        return round(self.t_end - self.t_start, 3)
