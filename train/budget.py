"""Fit a GRPO run to a wall-clock budget: stop after the last step that leaves time to finish.

`time_budget_s` (ProofcheckScriptArguments) is the time the whole training process may take,
counted from the process's start, so model loading, the vLLM engine start and the evaluation
before the first step count too. After every step the callback predicts the end of the run if it
took one more step: now + the median step so far + the uncertainty pool's refresh when that step begins
with one (as long as the last refresh took) + what follows the last step (the final held-out evaluation, as
long as the last one took, and saving). When that passes the budget it stops
training at this step; `max_steps` stays the most it will ever run. The plan (steps run, step
time, why it stopped) goes into the run summary and is printed as `[proofcheck] budget ...` lines.

Under several processes the decision is the main process's, broadcast to every rank, so all
ranks stop at the same step (a rank that stopped alone would leave the others waiting in a
collective).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from transformers import TrainerCallback

from proofcheck.time_budget import units_that_fit

# Merging LoRA into the weights and saving after the last step (SmolLM2-135M: 5-15 s on 2 cores),
# plus shutting vLLM down.
SAVE_RESERVE_S = 30.0


def process_age_s() -> float:
    """Seconds since this process started (its creation time, as the OS records it)."""
    import psutil

    return time.time() - psutil.Process().create_time()


class TimeBudgetCallback(TrainerCallback):
    """Stops training once one more step would not leave time to evaluate and save within the budget."""

    def __init__(self, budget_s: float, eval_cb: Any = None, accelerator: Any = None,
                 clock: Any = process_age_s, save_reserve_s: float = SAVE_RESERVE_S,
                 timer: Any = time.perf_counter, pool: Any = None) -> None:
        self.budget_s = budget_s
        self.pool = pool  # an uncertainty pool: the next step may begin with its refresh
        self.eval_cb = eval_cb
        self.accelerator = accelerator
        self.clock = clock
        self.save_reserve_s = save_reserve_s
        self.timer = timer
        self.step_s: list[float] = []
        self.stopped_at: int | None = None
        self.reason: str | None = None
        self._t0: float | None = None
        self._evals_seen = 0

    def _eval_seconds(self) -> list[float]:
        return [float(s) for _, s in getattr(self.eval_cb, "timeline", None) or []]

    def _last_full_eval_s(self) -> float:
        """The final evaluation is a full one: as long as the last full one took."""
        full = [s for scope, s in getattr(self.eval_cb, "timeline", None) or [] if scope == "full"]
        return float(full[-1]) if full else 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t0 = self.timer()
        self._evals_seen = len(self._eval_seconds())

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self._t0 is None:
            return control
        evals = self._eval_seconds()
        in_step_eval = sum(evals[self._evals_seen:])  # a periodic evaluation is not step time
        self.step_s.append(self.timer() - self._t0 - in_step_eval)
        self._t0 = None
        if state.global_step >= state.max_steps:
            return control
        # the next step, and the pool refresh it begins with (a refresh is not step time: StepTimer.exclude)
        step = statistics.median(self.step_s) + (self.pool.next_refresh_s(state.global_step) if self.pool else 0.0)
        tail = self._last_full_eval_s() + self.save_reserve_s
        now = self.clock()
        # one more step, then the final evaluation and save, must fit in what is left
        stop = units_that_fit(self.budget_s - now, step, fixed_s=tail) < 1
        if self._broadcast(stop):
            control.should_training_stop = True
            self.stopped_at = state.global_step
            self.reason = (f"at {now:.0f} s one more step ({step:.1f} s) and the final evaluation and save "
                           f"({tail:.0f} s) would pass the {self.budget_s:.0f} s budget")
            if state.is_world_process_zero:
                print(f"[proofcheck] budget: stopping after step {state.global_step} of at most "
                      f"{state.max_steps}: {self.reason}", flush=True)
        elif state.is_world_process_zero and len(self.step_s) == 1:
            fit = units_that_fit(self.budget_s - now, step, fixed_s=tail, already=state.global_step,
                                 at_most=state.max_steps)
            print(f"[proofcheck] budget plan: first step {step:.1f} s, {now:.0f} s of {self.budget_s:.0f} s used "
                  f"-> about {fit} of at most {state.max_steps} steps", flush=True)
        return control

    def _broadcast(self, stop: bool) -> bool:
        """The main process's decision, on every rank."""
        acc = self.accelerator
        if acc is None or acc.num_processes == 1:
            return stop
        from accelerate.utils import broadcast_object_list

        box = [stop]
        broadcast_object_list(box, from_process=0)
        return bool(box[0])

    def plan(self) -> dict[str, Any]:
        """What the run summary records."""
        return {"time_budget_s": self.budget_s, "steps_timed": len(self.step_s),
                "median_step_s": round(statistics.median(self.step_s), 2) if self.step_s else None,
                "stopped_early_at": self.stopped_at, "reason": self.reason}
