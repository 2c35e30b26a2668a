"""The reward ablation as one command: which accept/reject incentive teaches checking (README "What the
ablations show"), with the data arm, the SFT control and the k-pass rule.

    python benchmarks/ablate --quick --json runs/ablate/ablations.json          # SmolLM2-135M, <= 30 min
    python benchmarks/ablate --json runs/ablate/ablations.json                  # the full variant (~5 h)
    python benchmarks/ablate --arms training,balanced --seeds 0 --report-dir runs/ablate/part   # a part
    python benchmarks/ablate --quick --model tiny --out /tmp/abl ...            # pipeline check

On the CPU curriculum of `proofcheck demo` (`data.synth.disjoint_splits`: the demo's arithmetic chains,
or `--families`; held-out and dev sets drawn first) and one SFT warm-up (`proofcheck.train.sft`) that
every arm starts from, it runs `train/grpo.py` with the demo's recipe (configs/grpo/smollm2-cpu.yaml,
tiny-cpu.yaml for `--model tiny`), a curriculum folder written as the demo's
(`data.assembly.write_curriculum`) and the demo's overrides, for
each seed of each arm, with the same steps and seeds; the arms differ only by overrides:
  training        `--reward_scale training`: the paper's scale (1/0.5/0.25/0), the reference arm;
  benchmark       `--reward_scale benchmark` (1/0.75/0.5/0);
  balanced        `--reward_scale balanced`: right polarity 1, a rejection's grade centred per group;
  polarity        `--reward_scale polarity`: 1 if the verdict's polarity is right, else 0;
  repaired        training scale, with some valid training proofs replaced by repaired positives;
  sft_control     no GRPO: SFT continued from the same start on the GRPO tasks' gold verifications for
                  the wall-clock time the `training` run of that seed trained (its run minus evaluations);
  rejection       no GRPO: the start's own verifications of GRPO tasks (served by vLLM, sampled by
                  `proofcheck data distill`), kept at EXACT_MATCH by the meta-verifier, then SFT on them,
                  sampling and SFT together in that same wall-clock time (ablate/rejection.py).
Every arm is evaluated by train/callbacks.py inside a GRPO run on the same held-out proofs, passes and
seed (the control by a run whose one step has learning rate 0): per pass (rough) and as the service's
k-pass decision; the first arm also evaluates before its first step, the SFT start every arm shares.

Fitting the host (`--budget-min`, 30 with `--quick`): after SFT the time left, less the k-pass stage's
reserve, is split between the runs; when two seeds leave a run under `MIN_RUN_S` only one seed runs. The
first arm trains as many steps as its share allows (at most `--steps`) and every other run trains the
same number. What was cut is said in the output and in the JSON (`sizing`).

Repaired positives come through `proofcheck data repair` against a deterministic local repairer served
over HTTP on 127.0.0.1 (the OpenAI chat wire format the repair path calls): it returns the known-valid
proof of each rejected proof's problem, and its checker accepts exactly the known-valid proofs. The
k-pass curve serves the `training` verifier (`proofcheck serve`, as the demo does), samples 8 passes per
proof on held-out proofs and on the shipped annotated proofs, and applies `proofcheck.decision`'s rules.

Writes the JSON (`--json`, keys in `ablate/report.py` and the README), `ABLATIONS.md` and two PNGs in
`--report-dir` (default benchmarks/), and keeps every run under `--out`. A re-run reuses finished runs.
The parts: sizes and arms in `config.py`, the GRPO runs, their fitting and the SFT control in
`arms.py`, the repaired positives in `repair.py`, the k-pass curve in `kpass.py`,
the statistics and the report in `report.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from proofcheck.app.launch import SftRun, recipe_line, recipe_record
from proofcheck.data.assembly import write_curriculum

from .arms import train_arms
from .config import (
    ARMS,
    CONTROL_ARMS,
    INCENTIVE_ARMS,
    OVERRIDES,
    REFERENCE,
    REPO,
    TITLES,
    AblateConfig,
    _tiny,
    console,
    jsonl,
    run_logged,
)
from .kpass import kpass_report
from .repair import repaired_positives, with_repaired


def build_curriculum(cfg: AblateConfig) -> dict[str, list[dict[str, Any]]]:
    """The demo's sets (held-out first; the demo's arithmetic chains, or `cfg.families`) plus a `repair` set
    drawn last, disjoint by problem."""
    from proofcheck.data.families import family_choice
    from proofcheck.data.synth import disjoint_splits

    sizes = {"eval": cfg.eval_tasks, "dev": 16, "sft": cfg.sft_tasks, "grpo": cfg.grpo_tasks,
             "repair": 2 * cfg.repair_pairs}
    return disjoint_splits(sizes, seed=0, families=family_choice(cfg.families))


def choose_incentive(report: dict[str, Any]) -> dict[str, Any]:
    """The recipes' default by the rule of docs/results.md "What the ablations show": of the incentive arms that
    raise held-out rough Balanced F1 over the SFT start without lowering TNR by more than one standard
    error of the difference, the one with the largest gain; None when no arm qualifies (the recipes then
    keep the paper's `training` scale)."""
    import math

    start = report["sft_start"]
    rows = []
    for arm in INCENTIVE_ARMS:
        if arm not in report["arms"]:
            continue
        s = report["arms"][arm]["summary"]
        f1, tnr, f1_0, tnr_0 = (s["rough_bal_f1"]["mean"], s["rough_tnr"]["mean"], start["rough_bal_f1"]["mean"],
                                start["rough_tnr"]["mean"])
        if None in (f1, tnr, f1_0, tnr_0):
            continue
        se = math.hypot(s["rough_tnr"]["se"] or 0.0, start["rough_tnr"]["se"] or 0.0)
        rows.append({"arm": arm, "gain": f1 - f1_0, "tnr_change": tnr - tnr_0, "tnr_kept": tnr - tnr_0 >= -se})
    kept = [r for r in rows if r["tnr_kept"] and r["gain"] > 0]
    best = max(kept, key=lambda r: r["gain"]) if kept else None
    return {"rule": "largest positive rough Bal-F1 gain over the SFT start with TNR not lower by more than 1 SE "
                    "(none: the recipes keep the paper's training scale)",
            "arm": best["arm"] if best else None, "candidates": rows}


# ------------------------------------------------------------------ the command

def machine() -> dict[str, Any]:
    import os
    import platform

    from proofcheck.precision import choose_dtype, probe_machine

    m = probe_machine("cpu")
    choice = choose_dtype(None, device="cpu")
    flags = sorted(f for f in m.cpu_flags if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16"))
    return {"summary": f"{platform.node() or 'host'}: {m.arch}, {os.cpu_count()} cores, "
                       f"{' '.join(flags) or 'no AVX2'}, {choice.short}",
            "arch": m.arch, "cores": os.cpu_count(), "cpu_flags": flags, "dtype": choice.dtype,
            "python": platform.python_version()}


def run(cfg: AblateConfig, command: str) -> dict[str, Any]:
    """Every stage; returns the report (also written as JSON, Markdown and PNGs)."""
    from proofcheck.app.demo import run_stage
    from proofcheck.precision import ENV_VAR, choose_dtype

    from .report import STATS_RULE, arm_stats, compare, markdown, plots

    con = console()
    t_start = time.perf_counter()
    times: dict[str, float] = {}

    def stage(name: str, fn: Any) -> Any:
        result = run_stage(name, fn, times)  # the demo's: rule, timing, failure naming the stage
        times[name] = round(times[name], 1)
        return result

    choice = choose_dtype(None, device="cpu")
    env = {} if choice.source == "auto" else {ENV_VAR: choice.dtype}
    cfg.out.mkdir(parents=True, exist_ok=True)
    con.print(recipe_line(cfg.recipe, cfg.deltas), markup=False, highlight=False, soft_wrap=True)

    def build_model() -> Path:
        if cfg.model == "tiny":
            from proofcheck.models.tiny_model import build_tiny_model

            return build_tiny_model(cfg.out / "model", seed=0)
        from _figures import real_model

        return real_model(None)

    base = stage("build the model", build_model)
    sets = stage("build the curriculum (demo's sets + a repair set)", lambda: build_curriculum(cfg))
    data = cfg.out / "data"
    for name in ("eval", "sft", "grpo"):
        jsonl(data / f"{name}.jsonl", sets[name])
    plain = write_curriculum(data / "dataset", sets["grpo"], sets["eval"])
    sft_dir = cfg.out / "sft"

    def sft() -> Path:
        if not (sft_dir / "sft_plan.json").is_file():  # written last by train.sft
            run = SftRun(model=base, out=sft_dir, data=data / "sft.jsonl", steps=cfg.sft_steps, lr=cfg.sft_lr,
                         lora_r=cfg.sft_lora_r, seed=0, prompt_style=cfg.prompt_style)
            run_logged(run.command(), cfg.out / "logs" / "sft.log", env, con)
        return sft_dir

    start = stage(f"SFT warm-up shared by every arm ({cfg.sft_steps} steps)", sft)
    repair_info: dict[str, Any] | None = None
    datasets = {arm: plain for arm in ARMS}
    if "repaired" in cfg.arms:
        rows, rsum = stage("repaired positives through `proofcheck data repair` (deterministic local repairer)",
                           lambda: repaired_positives(cfg, sets["repair"], env, con))
        train, used = with_repaired(sets["grpo"], rows, cfg.repaired_share)
        if used == 0:
            raise RuntimeError(f"the repair path accepted no repaired positive ({rsum.get('status_counts')}); "
                               f"see {cfg.out / 'repair'}")
        jsonl(data / "grpo_repaired.jsonl", train)
        datasets["repaired"] = write_curriculum(data / "dataset_repaired", train, sets["eval"])
        repair_info = {**{k: rsum.get(k) for k in ("n_rejected_inputs", "n_accepted", "status_counts", "passes")},
                       "repairer_kind": "a deterministic local repairer served over HTTP on 127.0.0.1 (returns "
                                        "the known-valid proof; its checker accepts exactly known-valid proofs)",
                       "n_used": used, "rows": len(train)}
    runs, sizing = train_arms(cfg, start, datasets, plain, data / "grpo.jsonl", env, con, stage, t_start)
    kpass = kpass_report(cfg, sets["eval"], sizing["seeds"], env, stage) if REFERENCE in cfg.arms else {}

    # the SFT start: each seed's step-0 evaluation in its first GRPO arm (the same model, tasks and seed)
    first = next((a for a in ARMS if a in cfg.arms and a not in CONTROL_ARMS), None)  # it evaluated the start too
    starts = [r for r in runs.get(first, []) if r["before"]] if first else []
    report: dict[str, Any] = {
        "schema": "proofcheck.ablations/1", "command": command, "machine": machine(),
        "model": "SmolLM2-135M-Instruct" if cfg.model == "smollm2" else "tiny (random weights)",
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items() if k != "deltas"},
        "recipe": recipe_record(cfg.recipe, cfg.deltas),
        "eval": {"n_tasks": cfg.eval_tasks, "passes": cfg.eval_passes, "split": "held-out (data.synth, seed 0)"},
        "stats_rule": STATS_RULE, "reference_arm": REFERENCE, "sizing": sizing,
        "sft_start": arm_stats(starts, key="before"),
        "arms": {arm: {"title": TITLES[arm], "overrides": OVERRIDES[arm], "runs": runs[arm],
                       "summary": arm_stats(runs[arm])} for arm in cfg.arms},
        "repair": repair_info, "kpass": kpass, "stage_times_s": times,
    }
    report["comparisons"] = ({arm: compare(report["arms"][arm]["summary"], report["arms"][REFERENCE]["summary"])
                              for arm in cfg.arms if arm != REFERENCE} if REFERENCE in cfg.arms else {})
    report["choice"] = choose_incentive(report)
    report["total_s"] = round(time.perf_counter() - t_start, 1)  # this call's
    report["calls"] = record_call(cfg.out, command, report["total_s"])  # every call's: the run's wall time
    cfg.report_dir.mkdir(parents=True, exist_ok=True)
    report["plots"] = plots(report, str(cfg.report_dir / "ablations"))
    (cfg.report_dir / "ABLATIONS.md").write_text(markdown(report), encoding="utf-8")
    con.print(markdown(report), markup=False, highlight=False)
    return report


CALLS_FILE = "calls.jsonl"  # in --out: one line per call that reached its report


def record_call(out: Path, command: str, total_s: float) -> list[dict[str, Any]]:
    """Append this call to `out`'s ledger and return every call in it: a run done in parts (each part reusing
    the runs the others finished) took the sum of its calls, not the last call's time."""
    from proofcheck.io import JsonlAppender, read_jsonl_tolerant

    with JsonlAppender(out / CALLS_FILE) as ledger:
        ledger.append({"command": command, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "total_s": total_s})
    return read_jsonl_tolerant(out / CALLS_FILE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="FILE", help="write the report JSON here")
    ap.add_argument("--quick", action="store_true",
                    help="fits --budget-min 30: the four incentive arms and the SFT control, 2 seeds (1 when the "
                         "host is too slow), as many GRPO steps as fit (<= 24), 32 held-out proofs x 4 passes")
    ap.add_argument("--budget-min", type=float, help="wall-clock minutes the whole run may take (default: 30 with "
                                                     "--quick, none otherwise); steps and seeds are cut to fit")
    ap.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    ap.add_argument("--out", type=Path, default=Path("runs/ablate"), help="runs, logs and data (a re-run reuses them)")
    ap.add_argument("--report-dir", type=Path, default=REPO / "benchmarks", help="ABLATIONS.md and the PNGs")
    ap.add_argument("--seeds", help="comma-separated GRPO seeds (default: 0,1)")
    ap.add_argument("--steps", type=int, help="GRPO steps per arm")
    ap.add_argument("--arms", help=f"comma-separated subset of {','.join(ARMS)}")
    ap.add_argument("--families", help="proof families of every set (proofcheck.data.families: a name, a "
                                       "comma-separated list or 'all'); default: the demo's arithmetic chains, "
                                       "where the warm-up learns to check")
    ap.add_argument("--sizes", help="override sizes, e.g. sft_tasks=16,grpo_tasks=8,eval_tasks=4,kpass_max=2")
    ap.add_argument("--grpo-override", action="append", default=[], metavar="FLAG=VALUE",
                    help="one more train/grpo.py override for every run, e.g. --grpo-override use_vllm=false")
    ap.add_argument("--rejection-endpoint", metavar="URL", help="the rejection arm samples verifications from this "
                    "OpenAI-compatible endpoint instead of a vLLM server of the SFT start (pipeline tests)")
    args = ap.parse_args(argv)
    kw: dict[str, Any] = {"model": args.model, "out": args.out, "report_dir": args.report_dir,
                          "rejection_endpoint": args.rejection_endpoint}
    if args.seeds:
        kw["seeds"] = [int(s) for s in args.seeds.split(",")]
    if args.steps is not None:
        kw["steps"] = args.steps
    if args.arms:
        bad = [a for a in args.arms.split(",") if a not in ARMS]
        if bad:
            ap.error(f"--arms: unknown {bad}; choose from {','.join(ARMS)}")
        kw["arms"] = args.arms.split(",")
    if args.families:
        kw["families"] = args.families
    if args.budget_min is not None:
        kw["budget_s"] = args.budget_min * 60
    cfg = AblateConfig.quick(**kw) if args.quick else AblateConfig(**kw)
    if args.model == "tiny":
        cfg = _tiny(cfg)
    for item in filter(None, (args.sizes or "").split(",")):
        key, _, value = item.partition("=")
        if key not in AblateConfig.__dataclass_fields__ or not value:
            ap.error(f"--sizes: {item!r}: give FIELD=VALUE with a field of AblateConfig")
        setattr(cfg, key, type(getattr(cfg, key))(float(value)) if "." in value else int(value))
    cfg = replace(cfg)  # a recipe value set by --sizes is recorded as a delta
    for item in args.grpo_override:
        key, _, value = item.partition("=")
        cfg.extra_overrides += [f"--{key}", value]
    report = run(cfg, "python benchmarks/ablate " + " ".join(argv if argv is not None else sys.argv[1:]))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0
