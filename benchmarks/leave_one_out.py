"""Leave one proof family out: train on five families, evaluate on the sixth, for each family; one table.

    python benchmarks/leave_one_out.py                          # six 20-minute demos (~2 h on a 2-core bf16 host)
    python benchmarks/leave_one_out.py --full --budget-min 45   # six long-recipe runs of 45 minutes (~4.5 h)
    python benchmarks/leave_one_out.py --only parity,linear     # some of the six (a part; the table reads them all)
    python benchmarks/leave_one_out.py --dry-run                # print the six commands, run nothing
    python benchmarks/leave_one_out.py --table-only             # the table from the runs already in --out

Each run is `proofcheck demo --families all --exclude-family F` (the demo's warm-up and GRPO on the five other
families; `--full`: the long recipe's sizes) in `--out/F`: its held-out and dev sets keep every family and are
the same tasks whatever family is left out (`data.synth.disjoint_splits` draws them first), so the left-out
family's held-out proofs are measured before GRPO (after the warm-up) and after, by the run's own evaluation
(`by_family` in its summary.json). A run that has its summary.json is not run again, so the six can run in
parts. The table (Markdown, printed and written to `--out/LOO.md`; `--json`) gives for each left-out family its
held-out rough Balanced F1 before and after GRPO, TPR and TNR after, the trained families' mean Balanced F1
after, and whether it meets issue 49's bar (>= 0.50 with TNR >= 0.50; the target: four families of six).
`--reference SUMMARY` adds each family's score when trained on (a six-family run's summary.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _tables import publish

from proofcheck.data.families import ALL, family_names, resolve

BAR = {"rough_bal_f1": 0.50, "rough_tnr": 0.50}  # the left-out family's floor (issue 49)
TARGET_FAMILIES = 4                              # families of six that must reach it


def demo_command(family: str, out: Path, *, full: bool, budget_min: float | None, seed: int,
                 extra: list[str]) -> list[str]:
    """The `proofcheck demo` run that leaves `family` out of SFT and GRPO (held-out set: every family); not served
    or scored (`--no-score`): the held-out evaluation is the measurement, and scoring's reserve goes to training."""
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "demo", "--families", "all", "--exclude-family", family,
           "--workdir", str(out / family), "--seed", str(seed), "--no-score"]
    if full:
        cmd.append("--full")
    if budget_min is not None:
        cmd += ["--budget-min", f"{budget_min:g}"]
    return cmd + extra


def _metrics(summary: dict[str, Any], when: str, family: str) -> dict[str, Any]:
    return ((summary.get(when) or {}).get("by_family") or {}).get(family) or {}


def loo_row(family: str, summary: dict[str, Any], reference: dict[str, Any] | None = None) -> dict[str, Any]:
    """One left-out family's line: its held-out numbers before and after GRPO, the trained families' mean."""
    before, after = _metrics(summary, "before_grpo", family), _metrics(summary, "after_grpo", family)
    trained = [m["rough_bal_f1"] for f, m in ((summary.get("after_grpo") or {}).get("by_family") or {}).items()
               if f != family and m.get("rough_bal_f1") is not None]
    row = {"family": family, "n": after.get("n_proofs"), "bal_f1_before": before.get("rough_bal_f1"),
           "bal_f1": after.get("rough_bal_f1"), "tpr": after.get("rough_tpr"), "tnr": after.get("rough_tnr"),
           "trained_mean_bal_f1": sum(trained) / len(trained) if trained else None,
           "minutes": round(summary["total_s"] / 60, 1) if summary.get("total_s") else None}
    row["meets_bar"] = all(row[k] is not None and row[k] >= v for k, v in
                           (("bal_f1", BAR["rough_bal_f1"]), ("tnr", BAR["rough_tnr"])))
    if reference is not None:
        row["bal_f1_when_trained"] = _metrics(reference, "after_grpo", family).get("rough_bal_f1")
    return row


def loo_table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of `loo_row`s and the count against the target."""
    def cell(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else "yes" if v is True else \
            "no" if v is False else str(v)
    ref = any("bal_f1_when_trained" in r for r in rows)
    cols = ["family", "n", "bal_f1_before", "bal_f1", "tpr", "tnr", "trained_mean_bal_f1", "meets_bar", "minutes"]
    heads = ["left out", "n", "Bal-F1 before GRPO", "Bal-F1 after", "TPR", "TNR", "trained families' Bal-F1",
             ">= .50, TNR >= .50", "minutes"]
    if ref:
        cols.insert(7, "bal_f1_when_trained")
        heads.insert(7, "Bal-F1 when trained on")
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    met = sum(bool(r["meets_bar"]) for r in rows)
    lines.append(f"\n{met} of {len(rows)} left-out families reach rough Balanced F1 >= {BAR['rough_bal_f1']:.2f} with "
                 f"TNR >= {BAR['rough_tnr']:.2f} (target: {TARGET_FAMILIES} of {len(ALL)}).")
    return "\n".join(lines)


def collect(out: Path, families: list[str], reference: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The rows of the families whose run in `out` has finished (its summary.json)."""
    rows = []
    for fam in families:
        path = out / fam / "summary.json"
        if path.is_file():
            rows.append(loo_row(fam, json.loads(path.read_text(encoding="utf-8")), reference))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/loo", help="one run folder per left-out family (default: runs/loo)")
    p.add_argument("--only", help="comma list of families to leave out (default: each of the six in turn)")
    p.add_argument("--full", action="store_true", help="the long recipe's sizes (proofcheck demo --full)")
    p.add_argument("--budget-min", type=float, help="each run's wall clock in minutes (default: the demo's 20, "
                   "90 with --full)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reference", help="a six-family run's summary.json: each family's score when trained on")
    p.add_argument("--dry-run", action="store_true", help="print the commands and run nothing")
    p.add_argument("--table-only", action="store_true", help="the table from the finished runs; run nothing")
    p.add_argument("--json", help="write the rows as JSON here")
    args, extra = p.parse_known_args(argv)  # anything else goes to every `proofcheck demo` (e.g. --eval-tasks 192)
    try:
        families = list(resolve(family_names(args.only) or None))
    except ValueError as e:
        p.error(str(e))
    out = Path(args.out)
    cmds = {f: demo_command(f, out, full=args.full, budget_min=args.budget_min, seed=args.seed, extra=extra)
            for f in families}
    if args.dry_run:
        print("\n".join(" ".join(c) for c in cmds.values()))
        return 0
    if not args.table_only:
        from proofcheck.app.launch import run_logged

        for fam, cmd in cmds.items():
            if (out / fam / "summary.json").is_file():
                print(f"[loo] {fam}: finished run in {out / fam}, reused", flush=True)
                continue
            print(f"[loo] leaving out {fam}: {' '.join(cmd)}", flush=True)
            secs = run_logged(cmd, out / "logs" / f"{fam}.log")
            print(f"[loo] {fam} done in {secs / 60:.1f} min", flush=True)
    reference = json.loads(Path(args.reference).read_text(encoding="utf-8")) if args.reference else None
    rows = collect(out, list(ALL) if args.table_only and not args.only else families, reference)
    return publish(out, "LOO.md", rows, loo_table, args.json)


if __name__ == "__main__":
    sys.exit(main())
