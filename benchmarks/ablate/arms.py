"""The ablation's training stages: one GRPO run of an arm, its record, the runs fitted to the host's time
and the SFT control (continued SFT for the reference arm's training time)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from proofcheck.app.launch import GrpoRun, SftRun, delta_flags
from proofcheck.data.assembly import Curriculum

from .config import (
    ARMS,
    CONTROL_ARMS,
    CONTROL_RUNS,
    KPASS_RESERVE_S,
    MIN_RUN_S,
    OVERRIDES,
    RECIPE_FIELDS,
    REFERENCE,
    AblateConfig,
    run_logged,
)


def arm_run(cfg: AblateConfig, out: Path, seed: int, start: Path, dataset: Curriculum, extra: list[str],
            at_start: bool = False, budget_s: float | None = None) -> GrpoRun:
    """An arm's GRPO run: the recipe with `cfg.deltas` (its values in `cfg`; the others, such as
    `uncertainty_pool`, as flags) plus the arm's `extra` flags."""
    return GrpoRun(recipe=cfg.recipe, model=start, output_dir=out, dataset=dataset, max_steps=cfg.steps,
                   learning_rate=cfg.grpo_lr, seed=seed, prompt_style=cfg.prompt_style, eval_tasks=cfg.eval_tasks,
                   eval_passes=cfg.eval_passes, eval_at_start=at_start, eval_every_steps=0,
                   time_budget_s=budget_s or None,
                   overrides=[*delta_flags(cfg.deltas, RECIPE_FIELDS.values()), *cfg.extra_overrides, *extra])


def grpo(cfg: AblateConfig, name: str, seed: int, start: Path, dataset: Curriculum, env: dict[str, str],
         console: Any, extra: list[str], at_start: bool = False, budget_s: float | None = None) -> dict[str, Any]:
    """One `train/grpo.py` run as the demo drives it; returns its run_summary.json plus wall seconds.

    Only `at_start` runs evaluate before the first step: every arm of a seed starts from the same model
    and evaluates the same proofs with the same sampling seed, so one "before" (the first arm's) is
    every arm's, and the others skip an evaluation that would repeat it. `budget_s`: the run stops after
    the last step that fits (train/budget.py), at most `cfg.steps`."""
    out = cfg.out / "runs" / f"{name}-s{seed}"
    if not (out / "run_summary.json").is_file():
        run = arm_run(cfg, out, seed, start, dataset, extra, at_start, budget_s)
        wall = run_logged(run.command(), cfg.out / "logs" / f"{name}-s{seed}.log", env, console)
        summary = json.loads((out / "run_summary.json").read_text())
        summary["ablate_wall_s"] = round(wall, 1)
        summary["ablate_overrides"] = extra
        (out / "run_summary.json").write_text(json.dumps(summary, indent=1))
    return json.loads((out / "run_summary.json").read_text())


def _pick(entry: dict[str, Any]) -> dict[str, Any]:
    from .report import METRICS

    return {**{m: entry.get(m) for m in METRICS}, **{f"{m}_se": entry.get(f"{m}_se") for m in METRICS},
            "n_proofs": entry.get("n_proofs"), "step": entry.get("step")}


def run_record(summary: dict[str, Any], seed: int) -> dict[str, Any]:
    """A run's JSON record: its held-out evaluation after the last step (and before the first, if made)."""
    hist = summary.get("eval_history") or []
    if not hist:
        raise RuntimeError(f"the GRPO run in {summary.get('output_dir')} made no held-out evaluation")
    eval_s = sum(h.get("seconds") or 0 for h in hist)
    return {"seed": seed, "steps": summary.get("global_step"),
            "before": _pick(hist[0]) if hist[0]["step"] == 0 else None,
            "after": _pick(hist[-1]), "wall_s": summary.get("ablate_wall_s"),
            "eval_s": round(eval_s, 1), "final_reward": summary.get("final_reward")}


def size_runs(cfg: AblateConfig, left_s: float | None) -> dict[str, Any]:
    """Seeds and each GRPO run's share of the time left after SFT (None: no budget, nothing cut).

    The GRPO arms and the control (`CONTROL_RUNS` runs) of every seed share `left_s`; when two or more
    seeds would leave a run under `MIN_RUN_S`, only the first seed runs."""
    grpo_arms = [a for a in cfg.arms if a not in CONTROL_ARMS]
    per_seed = len(grpo_arms) + CONTROL_RUNS * sum(a in cfg.arms for a in CONTROL_ARMS)
    if left_s is None:
        return {"seeds": list(cfg.seeds), "run_budget_s": None, "cut": []}
    seeds, cut = list(cfg.seeds), []
    share = left_s / (len(seeds) * per_seed)
    if share < MIN_RUN_S and len(seeds) > 1:
        cut.append(f"one seed instead of {len(seeds)}: {len(seeds)} would leave each run {share:.0f} s "
                   f"(< {MIN_RUN_S:.0f} s) of the {left_s:.0f} s left after SFT")
        seeds, share = seeds[:1], left_s / per_seed
    return {"seeds": seeds, "run_budget_s": round(share), "cut": cut}


def train_arms(cfg: AblateConfig, start: Path, datasets: dict[str, Curriculum], plain: Curriculum, gold: Path,
               env: dict[str, str], console: Any, stage: Any, t_start: float
               ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Every seed's GRPO arms, SFT control and rejection-sampling arm from the one SFT start; returns the runs and
    the sizing.

    With a budget, the first arm of the first seed trains within its share and sets the steps of every
    other run (same steps, same seeds: the arms differ only by their overrides)."""
    left = None if cfg.budget_s is None else cfg.budget_s - (time.perf_counter() - t_start) - KPASS_RESERVE_S
    sizing = size_runs(cfg, left)
    for line in sizing["cut"]:
        console.print(f"[bold]sized down[/bold]: {line}")
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in cfg.arms}
    order = [a for a in ARMS if a in cfg.arms and a not in CONTROL_ARMS]
    steps = cfg.steps
    for i, seed in enumerate(sizing["seeds"]):
        reference: dict[str, Any] | None = None
        for j, arm in enumerate(order):
            sized = i == 0 and j == 0 and sizing["run_budget_s"] is not None
            extra = [*OVERRIDES[arm], "--max_steps", str(steps)]
            s = stage(f"seed {seed}: GRPO arm `{arm}` ({'<= ' if sized else ''}{steps} steps)",
                      lambda arm=arm, seed=seed, extra=extra, sized=sized, j=j: grpo(
                          cfg, arm, seed, start, datasets[arm], env, console, extra, at_start=j == 0,
                          budget_s=sizing["run_budget_s"] if sized else None))
            runs[arm].append(run_record(s, seed))
            if sized and s["global_step"] < steps:
                sizing["cut"].append(f"{s['global_step']} GRPO steps per arm instead of {steps} (the first arm's "
                                     f"share, {sizing['run_budget_s']} s)")
                console.print(f"[bold]sized down[/bold]: {sizing['cut'][-1]}")
                steps = s["global_step"]
            reference = s if arm == REFERENCE else reference
        if "sft_control" in cfg.arms:
            runs["sft_control"].append(sft_control(cfg, seed, start, plain, gold, reference, env, console, stage))
        if "rejection" in cfg.arms:
            from .rejection import rejection_arm

            tasks = [json.loads(x) for x in gold.open(encoding="utf-8")]  # the GRPO tasks
            runs["rejection"].append(rejection_arm(cfg, seed, start, tasks, plain, reference, env, console, stage,
                                                   cfg.rejection_endpoint))
    sizing["steps"] = steps
    return runs, sizing


def sft_control(cfg: AblateConfig, seed: int, start: Path, plain: Curriculum, gold: Path, reference: dict[str, Any] | None,
                env: dict[str, str], console: Any, stage: Any) -> dict[str, Any]:
    """SFT continued from the start for the reference arm's training time, evaluated as every arm is."""
    if reference is None:
        raise RuntimeError(f"the sft_control arm needs the {REFERENCE} arm (its GRPO time is the control's)")
    rec = run_record(reference, seed)
    budget = max(1.0, (rec["wall_s"] or 0) - rec["eval_s"])
    ctrl = cfg.out / "runs" / f"sft_control-s{seed}" / "model"

    def control() -> dict[str, Any]:
        if not (ctrl / "sft_plan.json").is_file():  # written last by train.sft
            run = SftRun(model=start, out=ctrl, data=gold, steps=100000, lr=cfg.sft_lr, lora_r=cfg.sft_lora_r,
                         seed=seed, prompt_style=cfg.prompt_style, time_budget_s=budget)
            run_logged(run.command(), cfg.out / "logs" / f"sft_control-s{seed}.log", env, console)
        # evaluated as every arm is, by a GRPO run whose one step at learning rate 0 changes nothing
        return grpo(cfg, "sft_control-eval", seed, ctrl, plain, env, console,
                    ["--max_steps", "1", "--learning_rate", "0"])

    s = stage(f"seed {seed}: SFT control for {budget:.0f} s + its held-out evaluation", control)
    plan = ctrl / "sft_plan.json"
    rec = run_record(s, seed)
    rec.update(steps=(json.loads(plan.read_text()).get("steps") if plan.is_file() else None),
               time_budget_s=round(budget))
    return rec
