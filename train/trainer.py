"""The GRPOTrainer the recipes run: TRL's loop, generation, loss and optimizer, with four methods extended.

- `_calculate_rewards`: a failed grade is never a score. TRL drops a row (no advantage, out of its group's
  baseline) only when every reward function returns None; a recipe pairs the meta-verifier with `format`,
  which never does, so a judge failure would train as 0.2 x format, like a wrong-polarity answer. Here a
  row whose grade failed (None from a reward function marked `grades = True`) is made unscorable for every
  function, counted (`grader_failure_rows`, logged as `checking/grader_failure_rows`), and left out.
  The checking diagnostics `checking/zero_spread_*` are computed here, on the weighted total of every reward
  (the reward GRPO's advantage is computed from), not on one function's.
- `_get_per_token_logps_and_entropies`: with `completion_logits`, the completion-only projection of
  `train/logprobs.py` (CPU), with the model's head (`HeadSpec`); TRL's own method wherever that does not
  apply, said once in the log.
- `_get_train_sampler`: the uncertainty pool's sampler (`train/uncertainty.py`) when `uncertainty` is set.
"""

from __future__ import annotations

from typing import Any

from proofcheck.train.uncertainty import UncertaintyPool, UncertaintySampler


def failure_columns(reward_funcs: list[Any]) -> list[int]:
    """Indices of the reward functions whose None means a failed grade (`grades = True`)."""
    return [i for i, fn in enumerate(reward_funcs) if getattr(fn, "grades", False)]


def drop_failed_grades(rewards_per_func: Any, columns: list[int]) -> tuple[Any, int]:
    """(`rewards_per_func` with every row whose grade failed, NaN in one of `columns`, set to NaN in every
    column, so TRL gives it no advantage and leaves it out of its group's mean; how many rows that was).

    >>> import torch
    >>> r, n = drop_failed_grades(torch.tensor([[1.0, 1.0], [float("nan"), 1.0]]), [0])
    >>> r.isnan().tolist(), n
    ([[False, False], [True, True]], 1)
    """
    import torch

    if not columns:
        return rewards_per_func, 0
    failed = torch.isnan(rewards_per_func[:, columns]).any(dim=1)
    out = rewards_per_func.clone()
    out[failed] = torch.nan
    return out, int(failed.sum())


def trainer_class() -> type:
    """GRPOTrainer with the extensions in the module docstring (each off unless its attribute is set)."""
    from trl import GRPOTrainer

    class ProofcheckGRPOTrainer(GRPOTrainer):
        uncertainty: UncertaintyPool | None = None
        completion_logits: bool = False   # the recipes' `completion_logits` (train/run.py sets it)
        share_prompt: bool = True         # the recipes' `completion_logits_shared_prompt`
        flush_denormal: bool | None = None  # whether train/run.py flushed denormals (None: not asked)
        grader_failure_rows: int = 0      # rows whose grade failed, left without advantage (all ranks' rows)
        _said: frozenset[str] = frozenset()

        def _say_once(self, message: str) -> None:
            if message not in self._said:
                self._said = self._said | {message}
                self.accelerator.print(f"[proofcheck] {message}")

        def _calculate_rewards(self, inputs: list[dict], prompts: list, completions: list,
                               completion_ids_list: list) -> Any:
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            rewards, failed = drop_failed_grades(rewards, failure_columns(self.reward_funcs))
            mode = "train" if self.model.training else "eval"
            self.grader_failure_rows += failed if mode == "train" else 0
            self._metrics[mode]["checking/grader_failure_rows"].append(float(failed))
            self._log_zero_spread(inputs, rewards, mode)
            return rewards

        def _log_zero_spread(self, inputs: list[dict], rewards: Any, mode: str) -> None:
            """`checking/zero_spread_*` on the weighted total reward, groups as TRL forms them (consecutive rows
            of every rank's gathered batch)."""
            import torch
            from accelerate.utils import gather_object

            from proofcheck.reward.diagnostics import PREFIX, annotation_facts, zero_spread_shares

            if any("annotation" not in row for row in inputs):
                return
            flawed = gather_object([annotation_facts(row["annotation"])[0] for row in inputs])
            totals = (rewards * self.reward_weights.to(rewards.device).unsqueeze(0)).nansum(dim=1)
            totals[torch.isnan(rewards).all(dim=1)] = torch.nan
            size = self.num_generations if mode == "train" else self.num_generations_eval
            groups = [str(i // size) for i in range(totals.numel())]
            for key, value in zero_spread_shares(totals.tolist(), groups, flawed).items():
                self._metrics[mode][PREFIX + key].append(value)

        def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                               logits_to_keep: int, batch_size: int | None = None,
                                               compute_entropy: bool = False, compute_aux_loss: bool = False,
                                               **extra: Any) -> tuple[Any, Any, Any]:
            from proofcheck.train.logprobs import (
                HeadSpec,
                completion_logps,
                dropout_active,
                sharded_parameters,
                why_not,
            )

            reason = why_not(input_ids.device.type, compute_aux_loss, self._entropy_bonus_enabled, extra,
                             sharded_parameters(self.accelerator)) if self.completion_logits else "off"
            if reason is not None:
                if self.completion_logits:
                    self._say_once(f"completion_logits steps aside: {reason}; TRL's fused head computes the "
                                   "log-probabilities")
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                    compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)
            unwrapped = self.accelerator.unwrap_model(model)
            share = self.share_prompt and not self.args.gradient_checkpointing
            if share and dropout_active(model):
                self._say_once("completion_logits: dropout is active, so each row is forwarded with its own "
                               "prompt (its own dropout masks, as in TRL's batch)")
            logps, entropies = completion_logps(
                model, unwrapped.get_output_embeddings(), input_ids, attention_mask, logits_to_keep,
                rows=min(batch_size or self.num_generations, self.num_generations), temperature=self.temperature,
                autocast=self.accelerator.autocast, compute_entropy=compute_entropy, share_prompt=share,
                head=HeadSpec.of(unwrapped.config, self.args.cast_lm_head_to_fp32))
            return logps, entropies, None

        def _get_train_sampler(self, dataset: Any = None) -> Any:
            if self.uncertainty is None:
                return super()._get_train_sampler(dataset)
            dataset = dataset if dataset is not None else self.train_dataset
            return UncertaintySampler(self.uncertainty, len(dataset), self.num_generations,
                                      self.args.generation_batch_size // self.num_generations,
                                      self.num_iterations * self.args.steps_per_generation)

    return ProofcheckGRPOTrainer
