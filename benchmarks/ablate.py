"""The reward ablation as one command: which accept/reject incentive teaches checking (README "What the
ablations show"), with the data arm, the SFT control and the k-pass rule.

    python benchmarks/ablate.py --quick --json runs/ablate/ablations.json          # SmolLM2-135M, <= 30 min
    python benchmarks/ablate.py --json runs/ablate/ablations.json                  # the full variant
    python benchmarks/ablate.py --quick --model tiny --out /tmp/abl ...            # pipeline check

On the CPU curriculum of `proofcheck demo` (`data.synth.disjoint_splits`, every family; held-out and dev
sets drawn first) and one SFT warm-up (`proofcheck.train.sft`) that every arm starts from, it runs
`train/grpo.py` with the demo's recipe (configs/grpo/smollm2-cpu.yaml, tiny-cpu.yaml for `--model tiny`),
the demo's dataset folder and overrides, for each seed of each arm, with the same steps and seeds; the
arms differ only by overrides:
  training        `--reward_scale training`: the paper's scale (1/0.5/0.25/0), the reference arm;
  benchmark       `--reward_scale benchmark` (1/0.75/0.5/0);
  balanced        `--reward_scale balanced`: right polarity 1, a rejection's grade centred per group;
  polarity        `--reward_scale polarity`: 1 if the verdict's polarity is right, else 0;
  repaired        training scale, with some valid training proofs replaced by repaired positives;
  sft_control     no GRPO: SFT continued from the same start on the GRPO tasks' gold verifications for
                  the wall-clock time the `training` run of that seed trained (its run minus evaluations).
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

Writes the JSON (`--json`, keys in `_ablate_report` and the README), `ABLATIONS.md` and two PNGs in
`--report-dir` (default benchmarks/), and keeps every run under `--out`. A re-run reuses finished runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from proofcheck.app.launch import GrpoRun, SftRun

REPO = Path(__file__).resolve().parents[1]
INCENTIVE_ARMS = ("training", "benchmark", "balanced", "polarity")
ARMS = (*INCENTIVE_ARMS, "repaired", "sft_control")
REFERENCE = "training"
TITLES = {"training": "(a) graded, training scale 1/0.5/0.25/0 (the paper's)",
          "benchmark": "(b) graded, benchmark scale 1/0.75/0.5/0",
          "balanced": "(c) balanced: right polarity 1, a rejection's grade centred per group",
          "polarity": "(d) polarity only: 1 if accept/reject is right",
          "repaired": "data: repaired positives in place of valid rows, same row count (training scale)",
          "sft_control": "control: SFT continued for the GRPO stage's wall-clock time (steps: SFT steps)"}
OVERRIDES = {**{a: ["--reward_scale", a] for a in INCENTIVE_ARMS}, "repaired": [], "sft_control": []}
MIN_RUN_S = 240.0     # a GRPO run shorter than this is mostly its fixed cost (start, evaluation, save)
CONTROL_RUNS = 1.5    # the SFT control costs about 1.5 GRPO runs (its SFT + a one-step evaluation run)
KPASS_RESERVE_S = 300.0


@dataclass
class AblateConfig:
    """Sizes of one ablation run. `quick()` fits 30 minutes; the defaults are the full one."""

    model: str = "smollm2"
    out: Path = Path("runs/ablate")
    report_dir: Path = REPO / "benchmarks"
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    steps: int = 32               # GRPO steps of every arm (the most, with a budget)
    budget_s: float | None = None  # the whole run's wall clock; None: no fitting (every seed, `steps` steps)
    sft_tasks: int = 256
    sft_steps: int = 48
    sft_lr: float = 1e-3
    sft_lora_r: int = 16
    grpo_tasks: int = 512
    grpo_lr: float = 3e-4
    eval_tasks: int = 128
    eval_passes: int = 4
    repair_pairs: int = 32        # flawed proofs sent to the repair path
    repaired_share: float = 0.25  # of the valid training rows replaced by repaired positives
    kpass_tasks: int = 64         # held-out proofs of the k-pass curve (the first ones)
    kpass_max: int = 8
    max_tokens: int = 160
    recipe: str = "configs/grpo/smollm2-cpu.yaml"
    prompt_style: str = "compact"
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    extra_overrides: list[str] = field(default_factory=list)  # for every GRPO run (tests: --use_vllm false)

    @classmethod
    def quick(cls, **kw: Any) -> AblateConfig:
        base = dict(seeds=[0, 1], steps=24, budget_s=1800.0, sft_steps=32, grpo_tasks=256, eval_tasks=32,
                    eval_passes=4, repair_pairs=16, kpass_tasks=16,
                    arms=[a for a in ARMS if a != "repaired"])
        return cls(**{**base, **kw})


def _tiny(cfg: AblateConfig) -> AblateConfig:
    """The demo's tiny-model settings (`DemoConfig.quick`)."""
    cfg.recipe, cfg.sft_lr, cfg.sft_lora_r, cfg.grpo_lr, cfg.max_tokens = "configs/grpo/tiny-cpu.yaml", 3e-3, 0, 5e-4, 96
    return cfg


# ------------------------------------------------------------------ stages

def _console() -> Any:
    from rich.console import Console

    return Console()


def _run(cmd: list[str], log: Path, env: dict[str, str], console: Any) -> float:
    """Run a subprocess (output kept in `log`, its `[proofcheck]` lines shown); return its seconds."""
    import os
    import subprocess

    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as f, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                               env={**os.environ, **env}, cwd=REPO) as proc:
        for line in proc.stdout:
            f.write(line)
            if "[proofcheck]" in line or line.startswith("{'loss'"):
                console.print("  " + line.strip()[:160], style="dim", markup=False, highlight=False)
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"`{' '.join(cmd[:4])} ...` exited {proc.returncode}; log {log}:\n{tail}")
    return time.perf_counter() - t0


def build_curriculum(cfg: AblateConfig) -> dict[str, list[dict[str, Any]]]:
    """The demo's sets (held-out first, every family) plus a `repair` set drawn last, disjoint by problem."""
    from proofcheck.data.synth import disjoint_splits

    sizes = {"eval": cfg.eval_tasks, "dev": 16, "sft": cfg.sft_tasks, "grpo": cfg.grpo_tasks,
             "repair": 2 * cfg.repair_pairs}
    return disjoint_splits(sizes, seed=0, families="all")


def write_dataset(folder: Path, train: list[dict[str, Any]], held_out: list[dict[str, Any]]) -> Path:
    """The demo's dataset folder: a DatasetDict with `train` and `eval` splits."""
    import datasets

    from proofcheck.data.loaders import annotated_to_dataset
    from proofcheck.schemas import AnnotatedProof

    if not (folder / "dataset_dict.json").is_file():
        dd = datasets.DatasetDict({s: annotated_to_dataset([AnnotatedProof.model_validate(t) for t in rows])
                                   for s, rows in (("train", train), ("eval", held_out))})
        dd.save_to_disk(str(folder))
    return folder


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def grpo(cfg: AblateConfig, name: str, seed: int, start: Path, dataset: Path, env: dict[str, str],
         console: Any, extra: list[str], at_start: bool = False, budget_s: float | None = None) -> dict[str, Any]:
    """One `train/grpo.py` run as the demo drives it; returns its run_summary.json plus wall seconds.

    Only `at_start` runs evaluate before the first step: every arm of a seed starts from the same model
    and evaluates the same proofs with the same sampling seed, so one "before" (the first arm's) is
    every arm's, and the others skip an evaluation that would repeat it. `budget_s`: the run stops after
    the last step that fits (train/budget.py), at most `cfg.steps`."""
    out = cfg.out / "runs" / f"{name}-s{seed}"
    if not (out / "run_summary.json").is_file():
        run = GrpoRun(recipe=REPO / cfg.recipe, model=start, output_dir=out, dataset=dataset, max_steps=cfg.steps,
                      learning_rate=cfg.grpo_lr, seed=seed, prompt_style=cfg.prompt_style, eval_tasks=cfg.eval_tasks,
                      eval_passes=cfg.eval_passes, eval_at_start=at_start, eval_every_steps=0,
                      time_budget_s=budget_s or None, overrides=[*cfg.extra_overrides, *extra])
        wall = _run(run.command(), cfg.out / "logs" / f"{name}-s{seed}.log", env, console)
        summary = json.loads((out / "run_summary.json").read_text())
        summary["ablate_wall_s"] = round(wall, 1)
        summary["ablate_overrides"] = extra
        (out / "run_summary.json").write_text(json.dumps(summary, indent=1))
    return json.loads((out / "run_summary.json").read_text())


def _pick(entry: dict[str, Any]) -> dict[str, Any]:
    from _ablate_report import METRICS

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


# ------------------------------------------------------------------ repaired positives

def corrupt(task: dict[str, Any]) -> dict[str, Any]:
    """A valid task turned into an expert-rejected proof of the same (true) claim: the last number of its
    first numeric step, the conclusion excepted, is raised by one; the annotation names that step."""
    import re

    steps = list(task["steps"])
    k = next((i for i, s in enumerate(steps[:-1]) if re.search(r"\d", s)), 0)
    m = list(re.finditer(r"\d+", steps[k]))
    if m:
        last = m[-1]
        steps[k] = steps[k][:last.start()] + str(int(last.group()) + 1) + steps[k][last.end():]
    else:
        steps[k] = steps[k] + " (so the claim follows immediately)"
    reason = f"step {k} does not follow"
    return {**task, "proof_id": task["proof_id"] + "-rejected", "steps": steps, "is_correct": False,
            "first_error_step": k, "annotation": {"first_fatal_error_step": k, "recoverable_error_steps": [-1],
                                                  "reviewer_comment": f"Step {k}: {reason}.",
                                                  "first_error_reason": reason, "remark": "ablation:rejected"}}


class LocalRepairer:
    """A deterministic repairer and checker on the OpenAI chat wire format (proofcheck.serve.scripted).

    Repair prompts name the problem: the reply is that problem's known-valid proof in `<step>` tags.
    Verifier prompts are answered with an accept exactly when the proof shown is a known-valid proof of
    the problem, else a reject at step 0 (the synthetic labels are exact, so this checker is exact)."""

    def __init__(self, valid: list[dict[str, Any]]):
        from proofcheck.protocol import neutralise, stepped_block

        self.by_problem = {neutralise(t["problem"]): t["steps"] for t in valid}
        self.blocks = {p: stepped_block(s) for p, s in self.by_problem.items()}

    def __call__(self, req: dict[str, Any], i: int) -> Any:
        from proofcheck.parsing import format_verdict
        from proofcheck.serve.scripted import Reply

        text = "\n".join(str(m.get("content") or "") for m in req.get("messages", []))
        problem = next((p for p in self.by_problem if p in text), None)
        n = int(req.get("n") or 1)
        if "repairs flawed proofs" in text:
            steps = self.by_problem.get(problem) or ["(no known proof)"]
            return Reply("\n".join(f"<step>{s}</step>" for s in steps))
        ok = problem is not None and self.blocks[problem] in text
        verdict = format_verdict("Every step checks.", [], -1) if ok else format_verdict("Step 0 fails.",
                                                                                        [(0, "wrong")], 0)
        return Reply([verdict] * n)


def repaired_positives(cfg: AblateConfig, tasks: list[dict[str, Any]], env: dict[str, str],
                       console: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run `proofcheck data repair` on the corrupted valid proofs of the repair set; return the accepted
    repaired positives (origin `repaired`, provenance kept) and the repair summary."""
    from proofcheck.serve.scripted import ScriptedServer

    folder = cfg.out / "repair"
    valid = [t for t in tasks if t["is_correct"]]
    rejected = _jsonl(cfg.out / "data" / "rejected.jsonl", [corrupt(t) for t in valid])
    if not (folder / "repaired.jsonl").is_file():
        with ScriptedServer(LocalRepairer(valid)) as srv:
            url = srv.url
            _run([sys.executable, "-m", "proofcheck.app.cli", "data", "repair", "--rejected", str(rejected),
                  "--repairer", f"{url}#local-repairer", "--checker", f"{url}#local-checker", "--passes", "2",
                  "--seed", "0", "--out", str(folder)], cfg.out / "logs" / "repair.log", env, console)
    summary = json.loads((folder / "summary.json").read_text())
    rows = [json.loads(x) for x in (folder / "repaired.jsonl").read_text().splitlines() if x.strip()]
    return rows, summary


def with_repaired(train: list[dict[str, Any]], repaired: list[dict[str, Any]], share: float) -> tuple[list, int]:
    """The training rows with a `share` of the valid proofs, spread evenly through the set (every 4th at
    0.25), replaced in place by repaired positives: as many rows, as many valid ones, pairs kept in
    order (batches stay balanced), and a run of a few steps sees the same share as a long one."""
    out, used, i = [], 0, 0
    for t in train:
        if t["is_correct"]:
            if int((i + 1) * share) > int(i * share) and used < len(repaired):
                t = repaired[used]
                used += 1
            i += 1
        out.append(t)
    return out, used


# ------------------------------------------------------------------ k-pass curve

def kpass_samples(cfg: AblateConfig, model: Path, proofs: list[dict[str, Any]], env: dict[str, str],
                  tag: str, seed: int) -> list[dict[str, Any]]:
    """`kpass_max` passes per proof from `proofcheck serve` on `model` (no early stop), as outcomes + tokens."""
    import asyncio

    from proofcheck.process import ServiceProcess, free_port
    from proofcheck.serve.verifier import make_verifier

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "serve", "--model", str(model), "--port", str(port),
           "--passes", str(cfg.kpass_max), "--max-tokens", str(cfg.max_tokens)]
    with ServiceProcess(cmd, url + "/health", cfg.out / "logs" / f"serve-{tag}.log", cwd=REPO, env=env):
        verifier = make_verifier(endpoint=url)

        async def one(p: dict[str, Any], sem: asyncio.Semaphore) -> dict[str, Any]:
            async with sem:
                r = await verifier.verify(p["problem"], p["steps"], None, passes=cfg.kpass_max, rule="unanimous",
                                          all_passes=True, seed=seed)
            return {"proof_id": p["proof_id"], "is_correct": p["is_correct"],
                    "passes": [{"outcome": x.outcome, "tokens": x.completion_tokens} for x in r.passes]}

        async def main() -> list[dict[str, Any]]:
            sem = asyncio.Semaphore(4)
            try:
                return list(await asyncio.gather(*(one(p, sem) for p in proofs)))
            finally:
                await verifier.aclose() if hasattr(verifier, "aclose") else None

        return asyncio.run(main())


def _mean_curves(curves: list[dict[str, Any]]) -> dict[str, Any]:
    """Seeds' k-pass curves averaged key by key (None where any seed has None)."""
    from statistics import fmean

    out: dict[str, Any] = {}
    for rule in curves[0]:
        out[rule] = {}
        for k in curves[0][rule]:
            vals = [c[rule][k] for c in curves]
            out[rule][k] = {key: (None if any(v[key] is None for v in vals) else fmean(v[key] for v in vals))
                            for key in vals[0]}
    return out


# ------------------------------------------------------------------ the arms, fitted to the host

def size_runs(cfg: AblateConfig, left_s: float | None) -> dict[str, Any]:
    """Seeds and each GRPO run's share of the time left after SFT (None: no budget, nothing cut).

    The GRPO arms and the control (`CONTROL_RUNS` runs) of every seed share `left_s`; when two or more
    seeds would leave a run under `MIN_RUN_S`, only the first seed runs."""
    grpo_arms = [a for a in cfg.arms if a != "sft_control"]
    per_seed = len(grpo_arms) + (CONTROL_RUNS if "sft_control" in cfg.arms else 0)
    if left_s is None:
        return {"seeds": list(cfg.seeds), "run_budget_s": None, "cut": []}
    seeds, cut = list(cfg.seeds), []
    share = left_s / (len(seeds) * per_seed)
    if share < MIN_RUN_S and len(seeds) > 1:
        cut.append(f"one seed instead of {len(seeds)}: {len(seeds)} would leave each run {share:.0f} s "
                   f"(< {MIN_RUN_S:.0f} s) of the {left_s:.0f} s left after SFT")
        seeds, share = seeds[:1], left_s / per_seed
    return {"seeds": seeds, "run_budget_s": round(share), "cut": cut}


def train_arms(cfg: AblateConfig, start: Path, datasets: dict[str, Path], plain: Path, gold: Path,
               env: dict[str, str], console: Any, stage: Any, t_start: float
               ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Every seed's GRPO arms and SFT control from the one SFT start; returns the runs and the sizing.

    With a budget, the first arm of the first seed trains within its share and sets the steps of every
    other run (same steps, same seeds: the arms differ only by their overrides)."""
    left = None if cfg.budget_s is None else cfg.budget_s - (time.perf_counter() - t_start) - KPASS_RESERVE_S
    sizing = size_runs(cfg, left)
    for line in sizing["cut"]:
        console.print(f"[bold]sized down[/bold]: {line}")
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in cfg.arms}
    order = [a for a in ARMS if a in cfg.arms and a != "sft_control"]
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
    sizing["steps"] = steps
    return runs, sizing


def sft_control(cfg: AblateConfig, seed: int, start: Path, plain: Path, gold: Path, reference: dict[str, Any] | None,
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
            _run(run.command(), cfg.out / "logs" / f"sft_control-s{seed}.log", env, console)
        # evaluated as every arm is, by a GRPO run whose one step at learning rate 0 changes nothing
        return grpo(cfg, "sft_control-eval", seed, ctrl, plain, env, console,
                    ["--max_steps", "1", "--learning_rate", "0"])

    s = stage(f"seed {seed}: SFT control for {budget:.0f} s + its held-out evaluation", control)
    plan = ctrl / "sft_plan.json"
    rec = run_record(s, seed)
    rec.update(steps=(json.loads(plan.read_text()).get("steps") if plan.is_file() else None),
               time_budget_s=round(budget))
    return rec


def choose_incentive(report: dict[str, Any]) -> dict[str, Any]:
    """The recipes' default by the rule of README "What the ablations show": of the incentive arms that
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
    from _ablate_report import STATS_RULE, arm_stats, compare, kpass_curve, markdown, plots

    from proofcheck.app.demo import run_stage
    from proofcheck.data.loaders import SAMPLES_DIR, load_records
    from proofcheck.precision import ENV_VAR, choose_dtype

    console = _console()
    t_start = time.perf_counter()
    times: dict[str, float] = {}

    def stage(name: str, fn: Any) -> Any:
        result = run_stage(name, fn, times)  # the demo's: rule, timing, failure naming the stage
        times[name] = round(times[name], 1)
        return result

    choice = choose_dtype(None, device="cpu")
    env = {} if choice.source == "auto" else {ENV_VAR: choice.dtype}
    cfg.out.mkdir(parents=True, exist_ok=True)

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
        _jsonl(data / f"{name}.jsonl", sets[name])
    plain = write_dataset(data / "dataset", sets["grpo"], sets["eval"])
    sft_dir = cfg.out / "sft"

    def sft() -> Path:
        if not (sft_dir / "sft_plan.json").is_file():  # written last by train.sft
            run = SftRun(model=base, out=sft_dir, data=data / "sft.jsonl", steps=cfg.sft_steps, lr=cfg.sft_lr,
                         lora_r=cfg.sft_lora_r, seed=0, prompt_style=cfg.prompt_style)
            _run(run.command(), cfg.out / "logs" / "sft.log", env, console)
        return sft_dir

    start = stage(f"SFT warm-up shared by every arm ({cfg.sft_steps} steps)", sft)
    repair_info: dict[str, Any] | None = None
    datasets = {arm: plain for arm in ARMS}
    if "repaired" in cfg.arms:
        rows, rsum = stage("repaired positives through `proofcheck data repair` (deterministic local repairer)",
                           lambda: repaired_positives(cfg, sets["repair"], env, console))
        train, used = with_repaired(sets["grpo"], rows, cfg.repaired_share)
        if used == 0:
            raise RuntimeError(f"the repair path accepted no repaired positive ({rsum.get('status_counts')}); "
                               f"see {cfg.out / 'repair'}")
        _jsonl(data / "grpo_repaired.jsonl", train)
        datasets["repaired"] = write_dataset(data / "dataset_repaired", train, sets["eval"])
        repair_info = {**{k: rsum.get(k) for k in ("n_rejected_inputs", "n_accepted", "status_counts", "passes")},
                       "repairer_kind": "a deterministic local repairer served over HTTP on 127.0.0.1 (returns "
                                        "the known-valid proof; its checker accepts exactly known-valid proofs)",
                       "n_used": used, "rows": len(train)}
    runs, sizing = train_arms(cfg, start, datasets, plain, data / "grpo.jsonl", env, console, stage, t_start)
    kpass: dict[str, Any] = {}
    if REFERENCE in cfg.arms:
        annotated = [{"proof_id": p.proof_id, "problem": p.problem, "steps": list(p.steps),
                      "is_correct": bool(p.gold_is_correct)}
                     for p in load_records(SAMPLES_DIR / "annotated.jsonl", "annotated")]
        held = sets["eval"][: cfg.kpass_tasks]
        curves: dict[str, list[dict[str, Any]]] = {"heldout": [], "annotated": []}
        ks = tuple(k for k in (1, 2, 4, 8) if k <= cfg.kpass_max)
        for seed in sizing["seeds"]:
            merged = Path(json.loads((cfg.out / "runs" / f"{REFERENCE}-s{seed}" / "run_summary.json").read_text())
                          ["saved"]["merged"])

            def sample(merged: Path = merged, seed: int = seed) -> None:
                cache = cfg.out / "kpass" / f"{REFERENCE}-s{seed}.json"
                if not cache.is_file():
                    got = {"heldout": kpass_samples(cfg, merged, held + annotated, env, f"s{seed}", seed)}
                    cache.parent.mkdir(parents=True, exist_ok=True)
                    cache.write_text(json.dumps({"heldout": got["heldout"][: len(held)],
                                                 "annotated": got["heldout"][len(held):]}))
                for where, proofs in json.loads(cache.read_text()).items():
                    curves[where].append(kpass_curve(proofs, ks))

            stage(f"seed {seed}: k-pass curve of the {REFERENCE} verifier ({cfg.kpass_max} passes, "
                  f"{len(held)} held-out + {len(annotated)} annotated proofs)", sample)
        kpass = {"arm": REFERENCE, "ks": list(ks), "heldout_n": len(held), "annotated_n": len(annotated),
                 **{w: _mean_curves(c) for w, c in curves.items() if c},
                 "per_seed": {w: c for w, c in curves.items()}}

    # the SFT start: each seed's step-0 evaluation in its first GRPO arm (the same model, tasks and seed)
    first = next((a for a in ARMS if a in cfg.arms and a != "sft_control"), None)  # it evaluated the start too
    starts = [r for r in runs.get(first, []) if r["before"]] if first else []
    report: dict[str, Any] = {
        "schema": "proofcheck.ablations/1", "command": command, "machine": machine(),
        "model": "SmolLM2-135M-Instruct" if cfg.model == "smollm2" else "tiny (random weights)",
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
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
    report["total_s"] = round(time.perf_counter() - t_start, 1)
    cfg.report_dir.mkdir(parents=True, exist_ok=True)
    report["plots"] = plots(report, str(cfg.report_dir / "ablations"))
    (cfg.report_dir / "ABLATIONS.md").write_text(markdown(report), encoding="utf-8")
    console.print(markdown(report), markup=False, highlight=False)
    return report


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
    ap.add_argument("--seeds", help="comma-separated GRPO seeds (default: 0,1 with --quick, else 0,1,2)")
    ap.add_argument("--steps", type=int, help="GRPO steps per arm")
    ap.add_argument("--arms", help=f"comma-separated subset of {','.join(ARMS)}")
    ap.add_argument("--sizes", help="override sizes, e.g. sft_tasks=16,grpo_tasks=8,eval_tasks=4,kpass_max=2")
    ap.add_argument("--grpo-override", action="append", default=[], metavar="FLAG=VALUE",
                    help="one more train/grpo.py override for every run, e.g. --grpo-override use_vllm=false")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # _figures, _ablate_report
    kw: dict[str, Any] = {"model": args.model, "out": args.out, "report_dir": args.report_dir}
    if args.seeds:
        kw["seeds"] = [int(s) for s in args.seeds.split(",")]
    if args.steps is not None:
        kw["steps"] = args.steps
    if args.arms:
        bad = [a for a in args.arms.split(",") if a not in ARMS]
        if bad:
            ap.error(f"--arms: unknown {bad}; choose from {','.join(ARMS)}")
        kw["arms"] = args.arms.split(",")
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
    for item in args.grpo_override:
        key, _, value = item.partition("=")
        cfg.extra_overrides += [f"--{key}", value]
    report = run(cfg, "python benchmarks/ablate.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
