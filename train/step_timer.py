"""`StepTimer`: each GRPO step's wall time split into generation, weight sync, reward and the rest
(log-probs, loss and backward, optimizer), the held-out evaluation left out."""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback


class StepTimer(TrainerCallback):
    """Splits every GRPO step's wall time into generation, weight sync, reward and the rest.

    Times the trainer's own methods on this trainer instance (TRL 1.16 names):
    `_generate_single_turn` (generation, which includes vLLM's `sync_weights`),
    `vllm_generation.sync_weights` and `_calculate_rewards`. "train" is what remains of the
    step: log-probs, loss, backward and the optimizer step. Work that runs inside the step's
    callbacks but is not training (the held-out evaluation: `exclude(eval_cb, "evaluate")`) is
    left out of the step entirely, weight syncs it makes included; its seconds are kept apart as
    `excluded` (the uncertainty pool's refresh, at a step's beginning, is left out the same way:
    `exclude(pool, "refresh")`). `split()` gives the median seconds of each part over the steps timed
    (the first step, which warms caches, excluded when there are more), and each step's excluded seconds.
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
                           "reward": c["reward"], "train": total - c["generation"] - c["reward"],
                           "excluded": c["excluded"]})
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
        out["excluded_s"] = [round(s["excluded"], 3) for s in self.steps]  # per step: evaluations, pool refreshes
        return out
