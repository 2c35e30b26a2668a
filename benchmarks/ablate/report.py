"""The ablations' numbers: per-arm statistics over seeds, the k-pass curve, the Markdown table and plots.

Pure functions over the JSON that `benchmarks/ablate` writes (no torch, no model), so the report
can be rebuilt from a saved `ablations.json`. Metrics come from `proofcheck.metrics` and decisions
from `proofcheck.decision`; nothing here re-derives them.

Statistics (fixed, stated in the JSON as `stats_rule`):
- an arm's value of a metric is the mean over its seeds of the held-out value after training;
- `se_seeds` is the standard error of that mean between seeds (sample SD / sqrt(n), n >= 2);
- `se_eval` is the evaluation's own standard error (each run's over-proofs SE, pooled: root mean
  square over seeds / sqrt(n));
- `se` = max(se_seeds, se_eval): with two or three seeds the between-seed SD is itself noisy, so
  the larger of the two is used;
- the smallest detectable difference between an arm and the reference arm is
  `MDD_FACTOR` x SE of the difference = 2.8 x sqrt(se_a^2 + se_ref^2): 80 % power for a two-sided
  test at 5 % (1.96 + 0.84).
(Each run's `<metric>_se` is the core's, `proofcheck.metrics.eval_metrics`; the metric names and labels
are the core's too.)
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import fmean
from typing import Any

from proofcheck.metrics import EVAL_VALID_RATE, SHORT_NAMES, standard_error

# the core's held-out metrics (`EVAL_METRICS`) the ablations compare, in the report's column order: not the
# reward (the arms' reward scales differ), not discrimination (TPR + TNR - 1 of the columns shown)
METRICS = ("rough_bal_f1", "rough_tpr", "rough_tnr", "first_error_step_accuracy", EVAL_VALID_RATE, "kpass_bal_f1",
           "kpass_tpr", "kpass_tnr")
SHORT = {**SHORT_NAMES, "first_error_step_accuracy": "first-error acc."}  # the report has room for the long label
MDD_FACTOR = 2.8
STATS_RULE = ("mean over seeds of the held-out value after training; se = max(between-seed SE, pooled "
              "evaluation SE); mdd = 2.8 x sqrt(se_arm^2 + se_reference^2) (80% power, two-sided 5%)")
KPASS_RULES = {"unanimous": "pessimistic (accept iff all k accept)", "majority": "majority (> k/2 accept)",
               "any": "optimistic (accept iff any of k accepts)"}


def arm_stats(runs: list[dict[str, Any]], key: str = "after") -> dict[str, dict[str, float | int | None]]:
    """Per metric: mean, se, se_seeds, se_eval and n over the runs' `key` evaluations."""
    out: dict[str, dict[str, float | int | None]] = {}
    for m in METRICS:
        vals = [r[key][m] for r in runs if r.get(key) and r[key].get(m) is not None]
        ses = [r[key].get(f"{m}_se") for r in runs if r.get(key) and r[key].get(f"{m}_se") is not None]
        n = len(vals)
        se_seeds = standard_error(vals)
        se_eval = math.sqrt(fmean([s * s for s in ses])) / math.sqrt(len(ses)) if ses else None
        known = [s for s in (se_seeds, se_eval) if s is not None]
        out[m] = {"mean": fmean(vals) if vals else None, "se": max(known) if known else None,
                  "se_seeds": se_seeds, "se_eval": se_eval, "n": n}
    return out


def compare(arm: dict[str, dict[str, Any]], ref: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per metric: diff (arm - reference), se_diff and mdd (the smallest difference the run detects)."""
    out: dict[str, dict[str, float | None]] = {}
    for m in METRICS:
        a, r = arm[m], ref[m]
        diff = a["mean"] - r["mean"] if a["mean"] is not None and r["mean"] is not None else None
        se = math.sqrt(a["se"] ** 2 + r["se"] ** 2) if a["se"] is not None and r["se"] is not None else None
        out[m] = {"diff": diff, "se_diff": se, "mdd": MDD_FACTOR * se if se is not None else None,
                  "detected": (abs(diff) >= MDD_FACTOR * se) if diff is not None and se else None}
    return out


def kpass_curve(proofs: list[dict[str, Any]], ks: tuple[int, ...] = (1, 2, 4, 8)) -> dict[str, dict[str, Any]]:
    """TPR, TNR, Balanced F1 and tokens per proof of each decision rule at each k.

    `proofs`: `{"is_correct": bool, "passes": [{"outcome": "accept"|"reject"|"invalid"|..., "tokens": int}]}`
    with at least max(ks) passes each, all generated (no early stop). The first k passes make the
    k-pass decision (`proofcheck.decision.decide`); tokens per proof count the passes a sequential
    verifier generates before the decision is fixed (`proofcheck.decision.is_decided`: early reject
    under the pessimistic rule), out of k. Rates are shares of proofs (decisions, not passes), with
    binomial standard errors.
    """
    from proofcheck.decision import decide, is_decided
    from proofcheck.metrics import balanced_f1

    out: dict[str, dict[str, Any]] = {}
    for rule in KPASS_RULES:
        per_k: dict[str, Any] = {}
        for k in ks:
            if any(len(p["passes"]) < k for p in proofs):
                continue
            pos_hits, neg_hits, tokens, tokens_all = [], [], [], []
            for p in proofs:
                outcomes = [x["outcome"] for x in p["passes"][:k]]
                accepted = decide(outcomes, rule) == "accept"
                (pos_hits if p["is_correct"] else neg_hits).append(accepted == p["is_correct"])
                spent = 0
                for i, x in enumerate(p["passes"][:k]):
                    spent += x["tokens"]
                    if is_decided(outcomes[: i + 1], k, rule):
                        break
                tokens.append(spent)
                tokens_all.append(sum(x["tokens"] for x in p["passes"][:k]))
            tpr = fmean(pos_hits) if pos_hits else None
            tnr = fmean(neg_hits) if neg_hits else None
            per_k[str(k)] = {"tpr": tpr, "tnr": tnr, "bal_f1": balanced_f1(tpr, tnr),
                             "tpr_se": _binom_se(tpr, len(pos_hits)), "tnr_se": _binom_se(tnr, len(neg_hits)),
                             "tokens_per_proof": fmean(tokens) if tokens else None,
                             "tokens_per_proof_all_passes": fmean(tokens_all) if tokens_all else None,
                             "n_correct": len(pos_hits), "n_incorrect": len(neg_hits)}
        out[rule] = per_k
    return out


def _binom_se(p: float | None, n: int) -> float | None:
    return math.sqrt(p * (1 - p) / n) if p is not None and n >= 2 else None


def _fmt(v: Any, se: Any = None) -> str:
    if v is None:
        return "–"
    return f"{v:.3f} ± {se:.3f}" if se is not None else f"{v:.3f}"


def wall_time_line(report: dict[str, Any]) -> str:
    """The run's real wall time: the sum of its calls (`calls`: one per `ablate` call on the same `--out`, each
    reusing the runs the earlier ones finished), with each call's minutes; a report without that record (written
    before it was kept) says that its figure is the last call's only.

    >>> wall_time_line({"total_s": 726, "calls": [{"total_s": 7988}, {"total_s": 6300}, {"total_s": 726}]})
    'Wall time 4.2 h, the sum of 3 calls on the same runs folder (133 + 105 + 12 min).'
    >>> wall_time_line({"total_s": 60})
    'Wall time of this call 1.0 min (earlier calls that finished runs it reused are not recorded).'
    """
    calls = report.get("calls") or []
    if not calls:
        return (f"Wall time of this call {report['total_s'] / 60:.1f} min (earlier calls that finished runs it "
                "reused are not recorded).")
    total = sum(c["total_s"] for c in calls)
    size = f"{total / 3600:.1f} h" if total >= 3600 else f"{total / 60:.1f} min"
    parts = " + ".join(f"{c['total_s'] / 60:.0f}" for c in calls)
    return (f"Wall time {size}, the sum of {len(calls)} call{'s' if len(calls) > 1 else ''} on the same runs folder "
            f"({parts} min).")


def _steps_run(report: dict[str, Any]) -> str:
    """The GRPO steps every arm ran: the config's, or what the host's budget cut them to (said so)."""
    sizing, steps = report.get("sizing") or {}, report["config"]["steps"]
    run = sizing.get("steps", steps)
    return str(run) if run == steps else f"{run} (cut from {steps} to fit the budget)"


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: what ran where, the arm table, the comparisons, the k-pass curves."""
    cfg, arms = report["config"], report["arms"]
    lines = ["# Ablations: reward, data, control and the k-pass rule", "",
             f"Command: `{report['command']}`  ", f"Machine: {report['machine']['summary']}  ",
             f"Model: {report['model']}; recipe `{cfg['recipe']}` (the arms differ only by the overrides below); "
             f"seeds {cfg['seeds']}; {_steps_run(report)} GRPO steps per arm from one SFT warm-up; held-out "
             f"{report['eval']['n_tasks']} proofs x {report['eval']['passes']} passes.  ",
             f"{wall_time_line(report)} Statistics: {report['stats_rule']}.", "",
             "## Arms (held-out, after training; mean ± SE over seeds)", "",
             "| arm | what differs | " + " | ".join(SHORT[m] for m in METRICS) + " | steps |",
             "|---|---|" + "---|" * len(METRICS) + "---|"]
    start = report["sft_start"]
    lines.append("| SFT start | (every arm starts here) | "
                 + " | ".join(_fmt(start[m]["mean"], start[m]["se"]) for m in METRICS) + " | 0 |")
    for name, arm in arms.items():
        s = arm["summary"]
        steps = sorted({r.get("steps") for r in arm["runs"] if r.get("steps") is not None})
        lines.append(f"| {name} | {arm['title']} | " + " | ".join(_fmt(s[m]["mean"], s[m]["se"]) for m in METRICS)
                     + f" | {','.join(map(str, steps)) or '–'} |")
    ref = report["reference_arm"]
    lines += ["", f"## Differences from `{ref}` (arm - {ref}; MDD = smallest detectable difference)", "",
              "| arm | " + " | ".join(f"Δ {SHORT[m]} (MDD)" for m in METRICS) + " |",
              "|---|" + "---|" * len(METRICS)]
    for name, cmp_ in report["comparisons"].items():
        cells = [("–" if c["diff"] is None else f"{c['diff']:+.3f} ({c['mdd']:.3f})" if c["mdd"] is not None
                  else f"{c['diff']:+.3f} (–)") + (" *" if c.get("detected") else "") for c in
                 (cmp_[m] for m in METRICS)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "`*`: the difference is at least its MDD. Per pass (rough) and k-pass: the service's decision with "
              "all the evaluation's passes (accept only if every pass accepts).", ""]
    sizing, choice = report.get("sizing") or {}, report.get("choice") or {}
    if sizing.get("cut"):
        lines += ["Sized to the host: " + "; ".join(sizing["cut"]) + ".", ""]
    if choice:
        lines += [f"Choice ({choice['rule']}): **{choice['arm'] or 'none qualifies'}**. "
                  + "; ".join(f"{c['arm']} gain {c['gain']:+.3f}, TNR {c['tnr_change']:+.3f}"
                              + ("" if c["tnr_kept"] else " (TNR lowered)") for c in choice.get("candidates", [])),
                  ""]
    rep = report.get("repair")
    if rep:
        lines += [f"Repaired positives: {rep['n_accepted']} of {rep['n_rejected_inputs']} rejected proofs repaired "
                  f"through `proofcheck data repair` with {rep['repairer_kind']}; the `repaired` arm trains on "
                  f"{rep['rows']} rows ({rep['n_used']} of them repaired positives in place of valid proofs), as many "
                  "as every other arm.", ""]
    for where, title in (("heldout", "held-out proofs"), ("annotated", "shipped annotated proofs")):
        curve = (report.get("kpass") or {}).get(where)
        if not curve:
            continue
        lines += [f"## k-pass curve of the `{report['kpass']['arm']}` verifier: {title} "
                  f"({report['kpass'][where + '_n']} proofs, seeds pooled by mean)", "",
                  "| rule | k | TPR | TNR | Bal-F1 | tokens/proof (early stop) | tokens/proof (all k) |",
                  "|---|---|---|---|---|---|---|"]
        for rule, per_k in curve.items():
            for k, v in per_k.items():
                lines.append(f"| {rule} | {k} | {_fmt(v['tpr'], v.get('tpr_se'))} | {_fmt(v['tnr'], v.get('tnr_se'))} "
                             f"| {_fmt(v['bal_f1'])} | {_fmt(v['tokens_per_proof'])} | "
                             f"{_fmt(v['tokens_per_proof_all_passes'])} |")
        lines.append("")
    lines += ["Rules: " + "; ".join(f"`{r}` = {d}" for r, d in KPASS_RULES.items()) + ". Early stop: passes run "
              "one after another and stop once `proofcheck.decision.is_decided` (under `unanimous`, the first "
              "non-accept).", ""]
    # the PNGs are written beside ABLATIONS.md: linked by file name, the report reads the same wherever it is
    lines += [f"![{Path(p).stem}]({Path(p).name})" for p in report.get("plots", [])] + [""]
    return "\n".join(lines)


def plots(report: dict[str, Any], prefix: str) -> list[str]:
    """Two PNGs: the arms' held-out metrics with SE bars, and the k-pass curves. Returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    names = ["SFT start", *report["arms"]]
    stats = [report["sft_start"], *(a["summary"] for a in report["arms"].values())]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(METRICS[:3])
    for j, m in enumerate(METRICS[:3]):
        xs = [i + j * width for i in range(len(names))]
        ax.bar(xs, [s[m]["mean"] or 0 for s in stats], width, yerr=[s[m]["se"] or 0 for s in stats],
               label=SHORT[m], capsize=3)
    ax.set_xticks([i + width for i in range(len(names))], names, rotation=20)
    ax.set_ylim(0, 1)
    ax.set_ylabel("held-out, after training")
    ax.legend()
    ax.set_title("Ablation arms (mean ± SE over seeds)")
    fig.tight_layout()
    paths.append(f"{prefix}_arms.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    kp = report.get("kpass") or {}
    wheres = [w for w in ("heldout", "annotated") if kp.get(w)]
    if wheres:
        fig, axes = plt.subplots(1, len(wheres), figsize=(5 * len(wheres), 4), squeeze=False)
        for ax, where in zip(axes[0], wheres, strict=True):
            for color, (rule, per_k) in zip(("C0", "C1", "C2"), kp[where].items(), strict=False):
                ks = [int(k) for k in per_k]
                for key, style in (("tpr", "--"), ("tnr", ":"), ("bal_f1", "-")):
                    ax.plot(ks, [per_k[str(k)][key] or 0 for k in ks], style, color=color, marker="o",
                            label=f"{rule} {key}")
            ax.set_xscale("log", base=2)
            ax.set_xticks(kp["ks"], [str(k) for k in kp["ks"]])
            ax.set_xlabel("k passes")
            ax.set_ylim(0, 1)
            ax.set_title(where)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        paths.append(f"{prefix}_kpass.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths
