"""The demo's wall clock (`proofcheck demo`): how long each stage may take on this machine.

`Plan` splits the budget before training (a reserve for serving and scoring, a share of the rest for
the SFT warm-up), then, from SFT's measured median step, sizes the held-out evaluation and the scoring
to this machine and fits them to the time left, so a slow host shrinks the work instead of running
over. The stages' costs are fixed multiples of the SFT step (below), measured on the hosts named.
Split from `demo.py` so the orchestration and the planner each stay small.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proofcheck.app.demo_report import console
from proofcheck.time_budget import units_that_fit

if TYPE_CHECKING:
    from proofcheck.app.demo_config import DemoConfig


# The stages after SFT in units of SFT's median step, measured on the 2-core AVX2 host in fp32 (demos of
# 2026-12-04: SFT step 21-27 s; a held-out pass 1.5-1.8 s and a GRPO step 121-164 s while the model still
# writes to its token limit; GRPO start + save ~35 s; `serve` start ~48 s; scoring went in waves of
# `concurrency` requests, ~0.9 steps a wave with 8-16 passes in flight, 2.2 with 32). Upper
# bounds: a faster host's model writes shorter answers, and the scoring estimate is capped by `score_reserve_s`.
EVAL_PASS_STEPS = 0.07
GRPO_STEP_STEPS = 6.2
GRPO_FIXED_STEPS = 1.5
# serving's start and the grading around the waves, by compute dtype: fp32 (AVX2 host) ~48 s at a 25 s SFT step;
# bf16 (avx512_bf16 host, the long recipe of 2026-12-05) ~37 s at a 7.2 s step (the engine's start does not
# shrink with the step: 2 steps estimated 79 s of a scoring that took 109 s)
SCORE_FIXED_STEPS = {"float32": 2.0, "bfloat16": 5.0}
# a wave of SCORE_IN_FLIGHT passes, by compute dtype and then passes per proof (the largest key <= the passes):
# fp32 (AVX2 host) 54 s at a 25 s SFT step (8-16 in flight: 0.85-0.9, 2.2 with 32). bf16 (avx512_bf16 host)
# depends on the passes, since the pessimistic decision cancels a proof's other passes at its first reject: 8
# passes (4 proofs a wave) 0.61 / 0.41 / 0.54 in three demos (171 s at 7.16 s, 121 s at 6.87 s, 126 s at 5.81 s,
# 31 waves); 4 passes (8 proofs a wave) 1.01 / 1.10 in two long recipes (109 s at 7.21 s, 99 s at 6.2 s, 10 waves).
# One value of 0.9 for both kept ~105 s of the 20-minute demo from GRPO and under-estimated the long recipe's.
SCORE_WAVE_STEPS = {"float32": {1: 2.2}, "bfloat16": {1: 1.2, 8: 0.65}}
SCORE_IN_FLIGHT = 32        # passes the scoring keeps in flight: concurrency = this / passes
PLAN_MARGIN_S = 30.0
# the long recipe's two held-out evaluations take at most this share of GRPO's time, and never fewer than
# LONG_EVAL_FLOOR proofs: 192 x 4 passes fit a bf16 host (~220 s each at a 5.7 s SFT step); on a 2-core AVX2
# host in fp32 (20.5 s) they were estimated at ~1,100 s each, more than GRPO's whole share of 90 minutes
LONG_EVAL_SHARE = 0.5
LONG_EVAL_FLOOR = 48
SCORE_STAGE = "serve the trained verifier and score through it"


def score_concurrency(passes: int) -> int:
    """Proofs the scoring sends at once: SCORE_IN_FLIGHT passes in flight (4 proofs at 8 passes, 16 at 2),
    since a wave of requests costs about the same with 8 or 32 passes in it on a CPU engine."""
    return max(1, SCORE_IN_FLIGHT // passes)


def score_wave_steps(dtype: str, passes: int) -> float:
    """SFT steps a scoring wave costs at `passes` passes a proof (`SCORE_WAVE_STEPS`: the largest key <= passes).

    >>> score_wave_steps("bfloat16", 4), score_wave_steps("bfloat16", 8), score_wave_steps("float32", 8)
    (1.2, 0.65, 2.2)
    """
    table = SCORE_WAVE_STEPS[dtype]
    return table[max(k for k in table if k <= passes)]


def _score_items() -> tuple[int, int]:
    """The shipped submissions and annotated proofs the scoring stage verifies."""
    from proofcheck.data.loaders import SAMPLES_DIR

    def count(name: str) -> int:
        return sum(1 for line in (SAMPLES_DIR / name).read_text(encoding="utf-8").splitlines() if line.strip())

    return count("submissions.jsonl"), count("annotated.jsonl")


class Plan:
    """The demo's wall clock: a deadline from the start, and what each training stage may take."""

    def __init__(self, cfg: DemoConfig, choice: Any, estimate_s: float | None = None,
                 t0: float | None = None) -> None:
        """`estimate_s`: the demo runs its steps and `cfg.budget_s` is only a guard against a hang (the steps are
        not cut to fit it); None: `cfg.budget_s` is the wall clock the steps are sized to."""
        self.cfg = cfg
        self.choice = choice
        self.estimate_s = estimate_s
        self.t0 = time.perf_counter() if t0 is None else t0
        self.record: dict[str, Any] = {"budget_s": cfg.budget_s, "dtype": choice.record(),
                                       "score_reserve_s": cfg.score_reserve_s, "sft_share": cfg.sft_share}
        if estimate_s is not None:
            self.record.update(estimate_s=round(estimate_s), budget_is_guard=True)
        self.score_plan_s, self.margin_s = cfg.score_reserve_s, 0.0

    def left(self) -> float:
        return self.cfg.budget_s - (time.perf_counter() - self.t0)

    def sft_budget(self) -> float:
        """SFT's share of the training time left after the scoring reserve."""
        return max(0.0, self.left() - self.cfg.score_reserve_s) * self.cfg.sft_share

    def scale_work(self) -> None:
        """Size the held-out evaluation and the scoring to this machine, from SFT's median step.

        On a 2-core AVX2 CPU in fp32 an SFT step is ~2.5x the reference and vLLM decodes ~50 tok/s
        for 128 verifier passes: 64 proofs x 4 passes took ~9 minutes per evaluation, twice, and
        8-pass scoring of the shipped data as long again. The speed ratio r = reference / measured
        (at most 1) shrinks the held-out proofs (even, at least 16: pairs stay balanced), and
        below 0.7 the scoring passes (8 -> 2) and repeats (2 -> 1). The median, not the first
        step: a first step slowed by other work on the machine shrank the evaluation of a whole run.

        Then both are fitted to the time left (`_fit_to_time_left`): GRPO's two evaluations, its
        first step and the scoring are estimated as fixed multiples of the SFT step, so a slow host
        shrinks them instead of running over (sized by r alone, a demo on 2026-12-04 ran GRPO 570 s
        of a 350 s budget). The long recipe (`ref_sft_step_s` 0) keeps its sizes where they fit
        (`_fit_long_evaluation`: on a slow host its evaluation is cut); its scoring is estimated the same
        way (at most its reserve), and GRPO gets the rest: a fixed 720 s reserve left 611 s (~20 GRPO steps) unused
        on the bf16 host of 2026-12-05."""
        cfg, sft = self.cfg, self.record.get("sft") or {}
        step_s = sft.get("median_step_s") or sft.get("first_step_s") or cfg.ref_sft_step_s or 1.0
        r = min(1.0, cfg.ref_sft_step_s / step_s) if cfg.ref_sft_step_s else 1.0
        self.eval_tasks = max(min(16, cfg.eval_tasks), min(cfg.eval_tasks, 2 * round(cfg.eval_tasks * r / 2)))
        self.passes = cfg.passes if r >= 0.7 else max(2, cfg.passes // 4)
        self.repeats = cfg.repeats if r >= 0.7 else 1
        if cfg.ref_sft_step_s:
            self._fit_to_time_left(step_s)
        else:   # its sizes stay where they fit; GRPO gets what the scoring is estimated to leave of its reserve
            self.score_plan_s = self._score_cost(self.passes, self.repeats, step_s, _score_items())
            self.margin_s = PLAN_MARGIN_S
            if cfg.fit_eval:
                self._fit_long_evaluation(step_s)
        self.record.update(speed_ratio=round(r, 3), eval_tasks=self.eval_tasks, passes=self.passes,
                           repeats=self.repeats, score_plan_s=round(self.score_plan_s))
        if r < 1.0 or self.eval_tasks < cfg.eval_tasks:
            where = (f"{cfg.ref_sft_step_s:.0f} s where the default sizes fit" if cfg.ref_sft_step_s else
                     f"GRPO has ~{self.grpo_budget():.0f} s, its two evaluations at most {LONG_EVAL_SHARE:.0%} of it")
            console.print(f"[bold]plan[/bold]: SFT's median step took {step_s:.0f} s ({where}): held-out evaluation "
                          f"on {self.eval_tasks} of {cfg.eval_tasks} proofs x {cfg.eval_passes} passes; scoring "
                          f"with {self.passes} passes, {self.repeats} repeat(s) in ~{self.score_plan_s:.0f} s")

    def _score_cost(self, passes: int, repeats: int, unit: float, items: tuple[int, int]) -> float:
        """Estimated serving + scoring seconds, in request waves of `score_concurrency` proofs, capped by the reserve."""
        submissions, annotated = items
        conc = score_concurrency(passes)
        waves = math.ceil(submissions / conc) + math.ceil(annotated * repeats / conc)
        fixed, wave = SCORE_FIXED_STEPS[self.choice.dtype], score_wave_steps(self.choice.dtype, passes)
        return min(self.cfg.score_reserve_s, (fixed + wave * waves) * unit)

    def _fit_to_time_left(self, unit: float) -> None:
        """Fewest cuts that fit GRPO (start, one step, two evaluations) and the scoring in the time left:
        scoring passes halve (to 2, one repeat) while the evaluation would fall under 16 proofs."""
        cfg, low, items = self.cfg, min(16, self.cfg.eval_tasks), _score_items()
        self.margin_s = PLAN_MARGIN_S
        per_task = 2 * cfg.eval_passes * EVAL_PASS_STEPS * unit
        while True:
            self.score_plan_s = self._score_cost(self.passes, self.repeats, unit, items)
            grpo_s = self.left() - self.score_plan_s - self.margin_s
            fit = units_that_fit(grpo_s, per_task, fixed_s=(GRPO_FIXED_STEPS + GRPO_STEP_STEPS) * unit)
            if fit >= low or (self.passes <= 2 and self.repeats == 1):
                break
            self.passes, self.repeats = max(2, self.passes // 2), 1
        self.eval_tasks = max(low, min(self.eval_tasks, 2 * (fit // 2)))

    def _fit_long_evaluation(self, unit: float) -> None:
        """The long recipe's held-out evaluation, cut on a slow host so that its two runs take at most
        `LONG_EVAL_SHARE` of GRPO's time (at least `LONG_EVAL_FLOOR` proofs, in whole rounds of a valid and a
        flawed proof per held-out family, as `assembly.strata_in_turn` cuts); a host where they fit keeps every
        proof, and the runs stay comparable."""
        per_task = 2 * self.cfg.eval_passes * EVAL_PASS_STEPS * unit
        fit = int(LONG_EVAL_SHARE * self.grpo_budget() / per_task)
        if fit < self.eval_tasks:
            rnd = 2 * len(self.cfg.held_out_families())
            floor = min(self.eval_tasks, rnd * math.ceil(LONG_EVAL_FLOOR / rnd))
            self.eval_tasks = max(floor, rnd * (fit // rnd))

    def grpo_budget(self) -> float:
        """Everything left but the scoring's share (the GRPO run stops its steps to fit)."""
        return max(0.0, self.left() - self.score_plan_s - self.margin_s)

    def announce(self) -> None:
        c, cfg = self.choice, self.cfg
        sft_s, left = self.sft_budget(), self.left()
        if self.estimate_s is not None:
            console.print(f"[bold]plan[/bold]: {c.reason} -> [bold]{c.short}[/bold] (source: {c.source}); SFT "
                          f"{cfg.sft_steps} steps, GRPO {cfg.grpo_floor or cfg.grpo_steps} steps or more (at most "
                          f"{cfg.grpo_steps}), sized after the warm-up; stopped only past a "
                          f"{cfg.budget_s / 60:.0f}-minute guard")
            self.record.update(left_after_setup_s=round(left))
            return
        console.print(f"[bold]plan[/bold]: {c.reason} -> [bold]{c.short}[/bold] (source: {c.source}); "
                      f"budget {cfg.budget_s / 60:.0f} min, {left:.0f} s left: SFT <= {sft_s:.0f} s (at most "
                      f"{cfg.sft_steps} steps, as many as its first step says fit), GRPO the rest, >= "
                      f"{max(0.0, left - cfg.score_reserve_s - sft_s):.0f} s, with its two held-out evaluations (at "
                      f"most {cfg.grpo_steps} steps, stopped when one more would not fit), "
                      + (f"serving and scoring ~{cfg.score_reserve_s:.0f} s" if cfg.score else "no scoring (--no-score)"))
        self.record.update(sft_budget_s=round(sft_s), left_after_setup_s=round(left))

    def sft_done(self, sft: Path) -> None:
        plan = json.loads((sft / "sft_plan.json").read_text()) if (sft / "sft_plan.json").is_file() else {}
        self.record["sft"] = {"max_steps": self.cfg.sft_steps, "steps": plan.get("steps"),
                              "first_step_s": plan.get("first_step_s"), "median_step_s": plan.get("median_step_s"),
                              "train_s": plan.get("train_s")}

    def grpo_done(self, grpo: dict[str, Any], budget_s: float) -> None:
        b = grpo.get("budget") or {}
        self.record["grpo"] = {"max_steps": self.cfg.grpo_steps, "steps": grpo.get("global_step"),
                               "budget_s": round(budget_s), "median_step_s": b.get("median_step_s"),
                               "stopped_early_at": b.get("stopped_early_at"), "precision": grpo.get("precision")}

    def finish(self, total_s: float, score_s: float | None = None, grpo_s: float | None = None) -> str:
        """The plan as carried out; over the budget, which stage ran past its share and by how much."""
        self.record.update(total_s=round(total_s, 1), within_budget=total_s <= self.cfg.budget_s,
                           score_s=None if score_s is None else round(score_s, 1),
                           grpo_s=None if grpo_s is None else round(grpo_s, 1))
        sft, grpo = self.record.get("sft", {}), self.record.get("grpo", {})
        line = (f"{self.choice.short}: SFT {sft.get('steps')} of at most {sft.get('max_steps')} steps "
                f"(median {sft.get('median_step_s')} s, first {sft.get('first_step_s')} s), "
                f"GRPO {grpo.get('steps')} of at most {grpo.get('max_steps')} steps (median {grpo.get('median_step_s')} s); total {total_s / 60:.1f} min "
                + (f"of the {self.cfg.budget_s / 60:.0f} min budget" if self.estimate_s is None else
                   f"(estimated {self.estimate_s / 60:.1f} min at the start)"))
        if total_s <= self.cfg.budget_s:
            return line
        overran = []
        if grpo_s is not None and grpo.get("budget_s") is not None and grpo_s > grpo["budget_s"]:
            overran.append(f"GRPO took {grpo_s:.0f} s of its {grpo['budget_s']:.0f} s (its first step and two "
                           "held-out evaluations are not cut; a smaller --eval-tasks fits them)")
        if score_s is not None and score_s > self.score_plan_s:
            overran.append(f"serving and scoring took {score_s:.0f} s of a {self.score_plan_s:.0f} s reserve "
                           "(fewer --passes / --repeats fit it)")
        reason = "; ".join(overran) or "this machine is slower than the smallest plan (one SFT and one GRPO step) allows"
        return f"{line} -- OVER by {(total_s - self.cfg.budget_s) / 60:.1f} min: {reason}"
