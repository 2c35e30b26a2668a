"""The gold rationale's form at equal SFT wall time (issue 49): `checks` against `recomputed`, six families.

    python benchmarks/rationale_forms.py --budget-min 20 --out runs/rf     # ~55 min on the 2-core bf16 host
    python benchmarks/rationale_forms.py --out runs/rf --table-only          # the table from finished runs

Draws one held-out set (`--eval-tasks`, every family, half valid) and one SFT set (`--sft-tasks`), disjoint by
problem, and writes the SFT set in each form of `proofcheck.data.rationale` (the same tasks in the same order:
only the gold verification differs). Each form warms SmolLM2-135M up for the same wall-clock budget
(`proofcheck.train.sft --time-budget`, the demo's settings: LoRA r = 16, lr 1e-3, compact prompt), so the
longer recomputed rows train fewer proofs in the same minutes. Each warm-up then verifies the held-out set
(`proofcheck calibrate --no-card`, `--passes` passes a proof). The table gives, per family and overall, each
form's per-pass rough Balanced F1, TPR, TNR and first-error step accuracy, and the paired difference
recomputed - checks over the same proofs with its standard error (`proofcheck.metrics.paired_gain`): the
baseline, `checks`, is measured in the same run. Finished stages are reused. Writes `--out/RATIONALE.md`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _tables import publish

from proofcheck.data.rationale import RATIONALE_FORMS

BASELINE, ARM = RATIONALE_FORMS  # checks, recomputed
ALL = "all families"


def eval_results(records: list[dict[str, Any]], families: dict[str, str]) -> list[dict[str, Any]]:
    """Calibrate records as the held-out evaluation's per-proof results (`proofcheck.metrics.eval_metrics`'
    input), each pass re-parsed from its text, sorted by proof id; `domain` holds the proof's family."""
    from proofcheck.bench.scoring import reparse

    out = []
    for r in records:
        passes = [reparse(t, int(r["n_steps"])) for t in r["verifier_trials"]]
        out.append({"proof_id": r["proof_id"], "is_correct": bool(r["is_correct"]),
                    "first_error_step": int(r["first_error_step"]), "domain": families[r["proof_id"]],
                    "trials": [{"valid": p.status == "valid", "score": None,
                                "first_error_step": p.first_error_step if p.status == "valid" else None}
                               for p in passes]})
    return sorted(out, key=lambda r: r["proof_id"])


def form_rows(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per family (and all families): each form's metrics and the paired difference of ARM over BASELINE."""
    from proofcheck.metrics import eval_metrics, paired_gain

    base, arm = results[BASELINE], results[ARM]
    if [r["proof_id"] for r in base] != [r["proof_id"] for r in arm]:
        raise ValueError("the two forms' evaluations hold different proofs: re-run the unfinished one")
    groups: dict[str, list[int]] = {ALL: list(range(len(base)))}
    for i, r in enumerate(base):
        groups.setdefault(r["domain"], []).append(i)
    rows = {}
    for name, idx in groups.items():
        row: dict[str, Any] = {"n": len(idx)}
        for form, res in results.items():
            m = eval_metrics([res[i] for i in idx])
            row[form] = {k: m.get(k) for k in ("rough_bal_f1", "rough_tpr", "rough_tnr", "first_error_step_accuracy")}
        g = paired_gain([base[i] for i in idx], [arm[i] for i in idx])
        row["gain"], row["gain_se"] = g["rough_bal_f1_gain"], g["rough_bal_f1_gain_se"]
        rows[name] = row
    return rows


def markdown(data: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}"
    steps = ", ".join(f"{form} {s['steps']} steps ({s['median_step_s']} s median)" for form, s in data["sft"].items())
    lines = [f"SFT at equal wall time: {steps}.", "",
             "| family | n | " + " | ".join(f"{form} Bal-F1 | TPR | TNR | 1st-err" for form in RATIONALE_FORMS)
             + f" | {ARM} - {BASELINE} (paired) |", "|---|---|" + "---|" * (4 * len(RATIONALE_FORMS) + 1)]
    for name, r in data["rows"].items():
        cells = [f(r[form][k]) for form in RATIONALE_FORMS
                 for k in ("rough_bal_f1", "rough_tpr", "rough_tnr", "first_error_step_accuracy")]
        gain = "-" if r["gain"] is None else f"{r['gain']:+.3f} +- {f(r['gain_se'])}"
        lines.append(f"| {name} | {r['n']} | " + " | ".join(cells) + f" | {gain} |")
    return "\n".join(lines)


def _draw(out: Path, eval_tasks: int, sft_tasks: int, seed: int) -> None:
    from proofcheck.data.families import family_selection
    from proofcheck.data.rationale import with_rationale
    from proofcheck.data.synth import disjoint_splits

    sets = disjoint_splits({"eval": eval_tasks, "sft": sft_tasks}, seed=seed, families=family_selection("all"))
    out.mkdir(parents=True, exist_ok=True)
    for form in RATIONALE_FORMS:
        rows = with_rationale(sets["sft"], form)
        (out / f"sft_{form}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in rows), encoding="utf-8")
    (out / "eval.jsonl").write_text("".join(json.dumps(t) + "\n" for t in sets["eval"]), encoding="utf-8")


def _run(args: argparse.Namespace, out: Path) -> None:
    from proofcheck.app.launch import SftRun, run_logged
    from proofcheck.models.smollm2 import build_smollm2

    data = out / "data"
    if not (data / "eval.jsonl").is_file():
        _draw(data, args.eval_tasks, args.sft_tasks, args.seed)
    base = out / "model"
    if not (base / "config.json").is_file():
        build_smollm2(base)
    for form in RATIONALE_FORMS:
        run = SftRun(model=base, out=out / f"sft-{form}", data=data / f"sft_{form}.jsonl", steps=args.max_steps,
                     lr=1e-3, lora_r=16, seed=args.seed, prompt_style="compact", time_budget_s=args.budget_min * 60)
        run_logged(run.command(), out / "logs" / f"sft-{form}.log")
    for form in RATIONALE_FORMS:
        run_logged([sys.executable, "-m", "proofcheck.app.cli", "calibrate", "--model", str(out / f"sft-{form}"),
                    "--data", str(data / "eval.jsonl"), "--max-k", str(args.passes), "--no-card", "--seed",
                    str(args.seed), "--out", str(out / f"eval-{form}"), "--resume"], out / "logs" / f"eval-{form}.log")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/rationale-forms", help="run folder (finished stages are reused)")
    p.add_argument("--budget-min", type=float, default=20.0, help="SFT wall clock of each form, minutes")
    p.add_argument("--max-steps", type=int, default=400, help="SFT steps at most (the budget decides)")
    p.add_argument("--sft-tasks", type=int, default=3200, help="SFT tasks (half valid, every family)")
    p.add_argument("--eval-tasks", type=int, default=192, help="held-out tasks (32 a family)")
    p.add_argument("--passes", type=int, default=4, help="verification passes per held-out proof")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--table-only", action="store_true", help="the table from the finished runs in --out")
    p.add_argument("--json", help="write the rows as JSON here")
    args = p.parse_args(argv)
    out = Path(args.out)
    if not args.table_only:
        _run(args, out)
    from proofcheck.io import read_jsonl_tolerant
    from proofcheck.rundir import latest_records

    if not all((out / f"eval-{form}" / "records.jsonl").is_file() for form in RATIONALE_FORMS):
        return publish(out, "RATIONALE.md", {}, markdown, None)
    families = {t["proof_id"]: t["family"] for t in read_jsonl_tolerant(out / "data" / "eval.jsonl")}
    results = {form: eval_results(latest_records(read_jsonl_tolerant(out / f"eval-{form}" / "records.jsonl"),
                                                 ("proof_id",), str(out)), families) for form in RATIONALE_FORMS}
    sft = {form: {k: json.loads((out / f"sft-{form}" / "sft_plan.json").read_text())[k]
                  for k in ("steps", "median_step_s", "train_s")} for form in RATIONALE_FORMS}
    return publish(out, "RATIONALE.md", {"sft": sft, "rows": form_rows(results)}, markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
