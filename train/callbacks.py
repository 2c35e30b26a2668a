"""Trainer callbacks: k-pass held-out verification during training, and the run history.

`VerifierEvalCallback` verifies the held-out proofs with the trainer's own generation: the
colocated vLLM engine (one `n=k` request per proof; a sleeping engine woken and put back), the
`trl vllm-serve` server through the trainer's client, or sampled `model.generate`
(`num_return_sequences=k`); the tokenizer's chat template either way. It parses every pass with
the core protocol (`proofcheck.verification.parse_pass`), grades it with the reward package's
structural grader, and logs through `trainer.log`: `eval_verify/reward_mean`,
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
from the checkpoint on resume: `proofcheck.train.checkpoints`); `StepTimer` splits each GRPO
step into generation, weight sync, reward and the rest (log-probs, loss and backward,
optimizer), the held-out evaluation left out.
"""

from __future__ import annotations

import math
import time
from typing import Any

from transformers import TrainerCallback

from proofcheck.metrics import eval_metrics
from proofcheck.parsing import finish_reason_from_ids

EVAL_PREFIX = "eval_verify/"


def _finish_and_text(tokenizer: Any, ids: list[int], eos_ids: set[int]) -> tuple[str, str]:
    """(text, finish_reason) of one generated sequence from HF `generate`.

    `generate` fills a finished sequence with padding after its EOS, so the sequence is cut just
    after its first EOS; the finish reason is then the core rule, `finish_reason_from_ids` (no
    token limit given: a sequence without EOS ran out of `max_new_tokens`, "length"). The text is
    the decoded tokens before the EOS.
    """
    end = next((i + 1 for i, t in enumerate(ids) if t in eos_ids), len(ids))
    finish = finish_reason_from_ids(ids[:end], eos_ids, None)
    answer = ids[:end - 1] if finish == "stop" else ids[:end]
    return tokenizer.decode(answer, skip_special_tokens=True), finish


def grade_row(row: dict, passes: list[tuple[str, str]]) -> dict:
    """One row's (text, finish_reason) passes parsed and graded: a JSON-ready result."""
    from proofcheck.reward.structural import grade_structural
    from proofcheck.verification import parse_pass

    trials = []
    for text, finish in passes:
        p = parse_pass(text, row["n_steps"], finish)
        g = grade_structural(text, row["n_steps"], row["annotation"], finish)
        trials.append({"valid": p.status == "valid", "first_error_step": p.first_error_step, "outcome": p.outcome,
                       "score": g.score, "invalid_reason": p.invalid_reason})
    return {"proof_id": row["proof_id"], "is_correct": bool(row["is_correct"]),
            "first_error_step": int(row["first_error_step"]), "domain": row["domain"], "trials": trials}


def prompt_ids(tokenizer: Any, row: dict, chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """The row's verifier prompt as token ids, through the tokenizer's chat template (as TRL does)."""
    return tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True,
                                         **(chat_template_kwargs or {}))["input_ids"]


def generate_vllm(llm: Any, prompts: list[tuple[int, list[int]]], rows: list[dict], *, passes: int,
                  max_new_tokens: int, temperature: float, seed: int,
                  constrain_format: bool = False) -> list[list[tuple[str, str]]]:
    """(text, finish_reason) of k passes for each `(row index, prompt ids)`, from a vLLM `LLM` in one
    batch (one n=k request per prompt).

    Each request is seeded with `seed + row index`: a row's passes do not depend on which rank or
    batch it lands in, and the ranks of a tensor-parallel group, which generate the same prompts,
    sample the same tokens. `constrain_format` constrains every pass to the answer format with
    structured outputs (`proofcheck.protocol.answer_regex` for the row's step count).
    """
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from proofcheck.protocol import answer_regex

    params = [SamplingParams(n=passes, temperature=temperature, top_p=1.0, top_k=0, max_tokens=max_new_tokens,
                             seed=seed + i, structured_outputs=StructuredOutputsParams(regex=answer_regex(
                                 rows[i]["n_steps"])) if constrain_format else None) for i, _ in prompts]
    outs = llm.generate([{"prompt_token_ids": ids} for _, ids in prompts], params, use_tqdm=False)
    return [[(o.text, o.finish_reason) for o in out.outputs] for out in outs]


def verify_rows_vllm(llm: Any, tokenizer: Any, rows: list[dict], *, passes: int, max_new_tokens: int,
                     temperature: float, seed: int, constrain_format: bool = False,
                     chat_template_kwargs: dict[str, Any] | None = None) -> list[dict]:
    """k passes per row from a vLLM `LLM` (`generate_vllm`), graded: one dict per row.

    `chat_template_kwargs` are the template's switches, as in training (see `template_kwargs`).
    """
    prompts = [(i, prompt_ids(tokenizer, r, chat_template_kwargs)) for i, r in enumerate(rows)]
    outs = generate_vllm(llm, prompts, rows, passes=passes, max_new_tokens=max_new_tokens, temperature=temperature,
                         seed=seed, constrain_format=constrain_format)
    return [grade_row(row, p) for row, p in zip(rows, outs, strict=True)]


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    gc = getattr(model, "generation_config", None)
    eos = gc.eos_token_id if gc is not None else None
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def generate_hf(model: Any, tokenizer: Any, rows: list[dict], *, passes: int, max_new_tokens: int,
                temperature: float, batch_size: int, seed: int, synced_gpus: bool = False,
                chat_template_kwargs: dict[str, Any] | None = None) -> list[list[tuple[str, str]]]:
    """(text, finish_reason) of k sampled passes per row with `model.generate`, `batch_size` rows a call.

    Sampling is seeded with `seed` in a forked RNG (`distributed.seeded_rng`): evaluating never
    changes the training run's random streams. `synced_gpus`: every rank keeps stepping until all
    have finished (needed when parameters are sharded; `distributed.hf_generate_synced`).
    """
    import torch

    from proofcheck.train.distributed import batches, seeded_rng

    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out_rows: list[list[tuple[str, str]]] = []
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        with seeded_rng(seed, getattr(model, "device", None)), torch.no_grad():
            for batch in batches(rows, batch_size):
                texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True,
                                                       **(chat_template_kwargs or {})) for r in batch]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                out = model.generate(**enc, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                     num_return_sequences=passes, max_new_tokens=max_new_tokens,
                                     pad_token_id=pad_id, synced_gpus=synced_gpus)
                gen = out[:, enc["input_ids"].shape[1]:].tolist()
                out_rows += [[_finish_and_text(tokenizer, seq, eos_ids) for seq in gen[i * passes:(i + 1) * passes]]
                             for i in range(len(batch))]
    finally:
        tokenizer.padding_side = old_side
    return out_rows


def verify_rows(model: Any, tokenizer: Any, rows: list[dict], *, passes: int, max_new_tokens: int,
                temperature: float, batch_size: int, seed: int,
                chat_template_kwargs: dict[str, Any] | None = None) -> list[dict]:
    """Generate k passes for each row with `model.generate` (`generate_hf`) and grade them (one dict per row)."""
    outs = generate_hf(model, tokenizer, rows, passes=passes, max_new_tokens=max_new_tokens, temperature=temperature,
                       batch_size=batch_size, seed=seed, chat_template_kwargs=chat_template_kwargs)
    return [grade_row(row, p) for row, p in zip(rows, outs, strict=True)]


def template_kwargs(trainer: Any) -> dict[str, Any]:
    """The chat template's switches TRL applies to every training prompt (GRPOTrainer's
    `chat_template_kwargs`, parsed from GRPOConfig's; e.g. Qwen3's `{"enable_thinking": true}`): the
    held-out evaluation uses the same, so a thinking verifier is evaluated thinking, with
    `eval_max_new_tokens` as its budget."""
    return dict(trainer.chat_template_kwargs)


def eval_backend(trainer: Any) -> str:
    """Which generation the held-out evaluation uses: the trainer's own vLLM when it has one
    (`vllm-colocate`: the engine in this process; `vllm-server`: `trl vllm-serve` through TRL's
    client, on the main process), else `transformers` (`model.generate` on every rank)."""
    if not trainer.args.use_vllm:
        return "transformers"
    return "vllm-colocate" if trainer.args.vllm_mode == "colocate" else "vllm-server"


def colocated_llm(trainer: Any) -> Any:
    """The trainer's colocated vLLM `LLM`, or None (no vLLM, or server mode)."""
    return trainer.vllm_generation.llm if eval_backend(trainer) == "vllm-colocate" else None


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
                 curve_samples: int = 0):
        self.trainer = trainer
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
        local = [(i, grade_row(self.rows[i], p)) for i, p in zip(part.indices[:part.real], passes, strict=False)]
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
        eos = _eos_ids(trainer.model, tok)
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


class StepTimer(TrainerCallback):
    """Splits every GRPO step's wall time into generation, weight sync, reward and the rest.

    Times the trainer's own methods on this trainer instance (TRL 1.16 names):
    `_generate_single_turn` (generation, which includes vLLM's `sync_weights`),
    `vllm_generation.sync_weights` and `_calculate_rewards`. "train" is what remains of the
    step: log-probs, loss, backward and the optimizer step. Work that runs inside the step's
    callbacks but is not training (the held-out evaluation: `exclude(eval_cb, "evaluate")`) is
    left out of the step entirely, weight syncs it makes included; its seconds are kept apart as
    `excluded`. `split()` gives the median seconds of each part over the steps timed (the first
    step, which warms caches, excluded when there are more).
    """

    PARTS = ("generation", "weight_sync", "reward", "train")

    def __init__(self, trainer: Any) -> None:
        self.steps: list[dict[str, float]] = []
        self._current = dict.fromkeys(("generation", "weight_sync", "reward", "excluded"), 0.0)
        self._t0: float | None = None
        self._wrap(trainer, "_generate_single_turn", "generation")
        self._wrap(trainer, "_calculate_rewards", "reward")
        if getattr(trainer, "vllm_generation", None) is not None:
            self._wrap(trainer.vllm_generation, "sync_weights", "weight_sync")

    def _wrap(self, obj: Any, name: str, part: str) -> None:
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._current[part] += time.perf_counter() - t0

        setattr(obj, name, timed)

    def exclude(self, obj: Any, name: str) -> None:
        """Leave the time spent in `obj.name` (and every part timed inside it) out of the steps."""
        inner = getattr(obj, name)

        def untimed(*args: Any, **kwargs: Any) -> Any:
            before = dict(self._current)
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._current = before
                self._current["excluded"] += time.perf_counter() - t0

        setattr(obj, name, untimed)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t0 = time.perf_counter()
        self._current = dict.fromkeys(self._current, 0.0)  # an evaluation before the step is not the step's

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._t0 is None:
            return
        # callbacks run in the order they were added: an evaluation in another callback's
        # on_step_end may already have run; its time (in "excluded") is not the step's
        total = time.perf_counter() - self._t0 - self._current["excluded"]
        c = self._current
        generation = c["generation"] - c["weight_sync"]  # sync runs inside generation
        self.steps.append({"total": total, "generation": generation, "weight_sync": c["weight_sync"],
                           "reward": c["reward"], "train": total - c["generation"] - c["reward"]})
        self._current = dict.fromkeys(c, 0.0)
        self._t0 = None

    def split(self) -> dict[str, float] | None:
        """Median seconds per part and per step, and each part's share of the step."""
        import statistics

        steps = self.steps[1:] if len(self.steps) > 1 else self.steps
        if not steps:
            return None
        out = {k: round(statistics.median(s[k] for s in steps), 3) for k in ("total", *self.PARTS)}
        out.update({f"{k}_share": round(out[k] / out["total"], 3) if out["total"] else None for k in self.PARTS})
        out["steps_timed"] = len(steps)
        return out
