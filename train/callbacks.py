"""Trainer callbacks: k-pass held-out verification during training, and the run history.

`VerifierEvalCallback` verifies the held-out proofs with the trainer's own model (sampled
`model.generate`, `num_return_sequences=k`, the tokenizer's chat template), parses every pass
with the core protocol (`proofcheck.verification.parse_pass`), grades it with the reward
package's structural grader, and logs through `trainer.log`:
`eval_verify/reward_mean`, `eval_verify/rough_bal_f1`, `eval_verify/first_error_step_accuracy`,
`eval_verify/valid_rate`, `eval_verify/rough_tpr`, `eval_verify/rough_tnr`.
Every process verifies its share of the proofs (DeepSpeed ZeRO-3 parameters are gathered for
generation by TRL's `unwrap_model_for_generation`); the results are gathered so all ranks log
the same numbers. Sampling uses a forked RNG, so evaluating never changes the training run.

`RunHistoryCallback` keeps (step, reward) and the eval results for `run_summary.json`.
"""

from __future__ import annotations

import math
import time
from typing import Any

from transformers import TrainerCallback

EVAL_PREFIX = "eval_verify/"


def _finish_and_text(tokenizer: Any, ids: list[int], eos_ids: set[int]) -> tuple[str, str]:
    """(text, finish_reason) of one generated sequence: "stop" iff it contains an EOS token.

    `generate` fills a finished sequence with padding after its EOS, so cutting at the first
    EOS is exact; a sequence without one ran out of `max_new_tokens` ("length").
    """
    out: list[int] = []
    finish = "length"
    for t in ids:
        if t in eos_ids:
            finish = "stop"
            break
        out.append(t)
    return tokenizer.decode(out, skip_special_tokens=True), finish


def verify_rows(model: Any, tokenizer: Any, rows: list[dict], *, passes: int, max_new_tokens: int,
                temperature: float, batch_size: int, seed: int) -> list[dict]:
    """Generate k passes for each row and grade them. Returns one dict per row (JSON-ready)."""
    import torch

    from proofcheck.reward.structural import grade_structural
    from proofcheck.verification import parse_pass

    eos = model.generation_config.eos_token_id if model.generation_config is not None else None
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        eos_ids.add(tokenizer.eos_token_id)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    results = []
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            for start in range(0, len(rows), batch_size):
                batch = rows[start:start + batch_size]
                texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
                         for r in batch]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                out = model.generate(**enc, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                     num_return_sequences=passes, max_new_tokens=max_new_tokens,
                                     pad_token_id=pad_id)
                gen = out[:, enc["input_ids"].shape[1]:].tolist()
                for i, row in enumerate(batch):
                    trials = []
                    for seq in gen[i * passes:(i + 1) * passes]:
                        text, finish = _finish_and_text(tokenizer, seq, eos_ids)
                        p = parse_pass(text, row["n_steps"], finish)
                        g = grade_structural(text, row["n_steps"], row["annotation"], finish)
                        trials.append({"valid": p.status == "valid", "first_error_step": p.first_error_step,
                                       "score": g.score, "invalid_reason": p.invalid_reason})
                    results.append({"proof_id": row["proof_id"], "is_correct": bool(row["is_correct"]),
                                    "first_error_step": int(row["first_error_step"]), "domain": row["domain"],
                                    "trials": trials})
    finally:
        tokenizer.padding_side = old_side
    return results


def eval_metrics(results: list[dict]) -> dict[str, float | None]:
    """Reward mean and VerifierBench metrics (rough Balanced F1, first-error-step accuracy...)."""
    from proofcheck.metrics import ProofTrials, Trial, verifier_metrics

    proofs = [ProofTrials(r["proof_id"], r["is_correct"], r["first_error_step"], r["domain"],
                          [Trial(t["valid"], t["first_error_step"]) for t in r["trials"]]) for r in results]
    m = verifier_metrics(proofs)
    scores = [t["score"] for r in results for t in r["trials"] if t["score"] is not None]
    return {
        "reward_mean": sum(scores) / len(scores) if scores else None,
        "rough_bal_f1": m["rough_bal_f1"],
        "rough_tpr": m["rough_tpr"],
        "rough_tnr": m["rough_tnr"],
        "first_error_step_accuracy": m["first_error_step_accuracy"],
        "valid_rate": m["verifier_valid_rate"],
        "n_proofs": len(results),
        "n_passes": sum(len(r["trials"]) for r in results),
    }


class VerifierEvalCallback(TrainerCallback):
    """Every `every_steps` optimizer steps (0 = never) and at the end, verify the eval rows with k passes.

    Example:
        >>> cb = VerifierEvalCallback(trainer, eval_rows, passes=4, every_steps=50)  # doctest: +SKIP
        >>> trainer.add_callback(cb)  # doctest: +SKIP
    """

    def __init__(self, trainer: Any, rows: list[dict], *, passes: int = 4, every_steps: int = 0,
                 max_new_tokens: int = 256, temperature: float = 1.0, batch_size: int = 4, seed: int = 0):
        self.trainer = trainer
        self.rows = rows
        self.passes = passes
        self.every_steps = every_steps
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.batch_size = batch_size
        self.seed = seed
        self.history: list[dict[str, Any]] = []
        self._last_step: int | None = None

    def evaluate(self, step: int) -> dict[str, Any]:
        """Run the k-pass evaluation now (all processes must call it); log and return the metrics."""
        from trl.models.utils import unwrap_model_for_generation

        trainer = self.trainer
        acc = trainer.accelerator
        mine = self.rows[acc.process_index::acc.num_processes]
        t0 = time.perf_counter()
        was_training = trainer.model.training
        trainer.model.eval()
        try:
            with unwrap_model_for_generation(trainer.model_wrapped, acc) as model:
                local = verify_rows(model, trainer.processing_class, mine, passes=self.passes,
                                    max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                    batch_size=self.batch_size, seed=self.seed + 1000 * step + acc.process_index)
            if acc.num_processes > 1:
                from accelerate.utils import gather_object

                gathered = gather_object([local])
                results = [r for part in gathered for r in part]
            else:
                results = local
            metrics = eval_metrics(results)
            metrics["seconds"] = round(time.perf_counter() - t0, 3)
            logs = {f"{EVAL_PREFIX}{k}": float(v) for k, v in metrics.items()
                    if v is not None and not (isinstance(v, float) and math.isnan(v))}
            trainer.log(logs)  # in eval mode: GRPOTrainer.log flushes only eval-mode metrics
        finally:
            if was_training:
                trainer.model.train()
        self._last_step = step
        entry = {"step": step, **metrics}
        self.history.append(entry)
        return entry

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.rows and self.every_steps and state.global_step % self.every_steps == 0:
            # trainer.log() clears control.should_log; keep it so this step's training log still happens
            should_log = control.should_log
            self.evaluate(state.global_step)
            control.should_log = should_log

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.rows and self._last_step != state.global_step:
            self.evaluate(state.global_step)


class RunHistoryCallback(TrainerCallback):
    """Keeps the logged training reward per step and the wall time, for the run summary."""

    def __init__(self) -> None:
        self.rewards: list[tuple[int, float]] = []
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

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.t_end = time.perf_counter()

    @property
    def wall_time_s(self) -> float | None:
        if self.t_start is None or self.t_end is None:
            return None
        return round(self.t_end - self.t_start, 3)
