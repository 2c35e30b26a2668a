"""The demo's results in a user's words: a plain reading of before/after, and one report file.

`plain_reading` says what GRPO did to the verifier (the paired gain against its standard error, whether
it now lets more flawed proofs through, what changed in TPR, the first-error step and the k-pass
decision) without reference to any target. `write_report` puts that, the scoring and the plots (the
learning curve, the per-step diagnostics, the k-pass curve) into `<workdir>/report.md`.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from proofcheck.metrics import EVAL_VALID_RATE


def _f(x: Any, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def plain_reading(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What GRPO changed, in sentences: the paired gain in held-out Balanced F1 and how sure it is, then TNR
    (does it let more flawed proofs through?), TPR, the first-error step and the service's k-pass decision."""
    g = after.get("paired_gain") or {}
    gain, se = g.get("rough_bal_f1_gain"), g.get("rough_bal_f1_gain_se")
    if gain is None:
        gain = (after.get("rough_bal_f1") or 0.0) - (before.get("rough_bal_f1") or 0.0)
    n = g.get("n_proofs") or after.get("n_tasks")
    f1 = f"held-out Balanced F1 {_f(before.get('rough_bal_f1'))} -> {_f(after.get('rough_bal_f1'))}"
    pm = f" +- {se:.3f}" if se else ""
    if se and gain > 2 * se:
        head = (f"GRPO made the verifier better: {f1}, a paired gain of {gain:+.3f}{pm} over the same {n} proofs "
                f"({gain / se:.1f} standard errors: more than noise).")
    elif gain > 0:
        head = (f"GRPO moved the verifier up a little: {f1}, {gain:+.3f}{pm} over the same {n} proofs; that is "
                f"within two standard errors, so this run alone cannot tell it from noise.")
    else:
        head = f"GRPO did not improve the verifier in this run: {f1}, {gain:+.3f}{pm} over the same {n} proofs."
    tc, ts = g.get("rough_tnr_gain"), g.get("rough_tnr_gain_se")
    t0, t1 = before.get("rough_tnr"), after.get("rough_tnr")
    tnr = f"TNR {_f(t0)} -> {_f(t1)}" + (f", {tc:+.3f} +- {ts:.3f}" if tc is not None and ts else "")
    if tc is not None and ts and tc < -ts:
        flawed = f"It now lets more flawed proofs through ({tnr}): part of the gain is from accepting more."
    elif tc is not None and tc > ts:
        flawed = f"It rejects flawed proofs more often than before ({tnr})."
    else:
        flawed = f"It rejects flawed proofs about as often as before ({tnr})."
    tpr = (f"It accepts valid proofs {_more(before.get('rough_tpr'), after.get('rough_tpr'))} "
           f"(TPR {_f(before.get('rough_tpr'))} -> {_f(after.get('rough_tpr'))}), and names the first wrong step "
           f"{_more(before.get('first_error_step_accuracy'), after.get('first_error_step_accuracy'))} "
           f"({_f(before.get('first_error_step_accuracy'))} -> {_f(after.get('first_error_step_accuracy'))}).")
    k = before.get("passes")
    kpass = (f"The service's decision (accept only if all {k} passes accept): Balanced F1 "
             f"{_f(before.get('kpass_bal_f1'))} -> {_f(after.get('kpass_bal_f1'))} (TPR {_f(before.get('kpass_tpr'))} "
             f"-> {_f(after.get('kpass_tpr'))}, TNR {_f(before.get('kpass_tnr'))} -> {_f(after.get('kpass_tnr'))}).")
    return [head, flawed, tpr, kpass]


def _more(a: float | None, b: float | None) -> str:
    if a is None or b is None or abs(b - a) < 0.005:
        return "about as often"
    return "more often" if b > a else "less often"


def kpass_plot(evals: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """Held-out Balanced F1 (and TPR, TNR) of the k-pass unanimous decision against k, before and after GRPO."""
    curves = {w: evals[w].get("kpass_curve") or [] for w in ("before_grpo", "after_grpo")}
    if not any(curves.values()):
        return None
    from proofcheck.app.demo_report import _plt

    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for when, style in (("before_grpo", "--"), ("after_grpo", "-")):
        c = curves[when]
        ks = [p["k"] for p in c]
        for key, color in (("kpass_bal_f1", "#c44e52"), ("kpass_tpr", "#4c72b0"), ("kpass_tnr", "#55a868")):
            ax.plot(ks, [p.get(key) for p in c], style, marker="o", ms=3, color=color,
                    label=f"{key.split('_')[-1].upper().replace('F1', 'Bal-F1')} {when.split('_')[0]}")
    ks = sorted({p["k"] for c in curves.values() for p in c})
    ax.set(ylim=(-0.02, 1.02), xticks=ks, xlabel="passes k (accept only if all k accept)",
           title="The service's decision on held-out proofs")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def host_line(dtype: str) -> str:
    """The CPU's model name, its cores and the compute dtype."""
    import os

    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores, {dtype}"


def write_report(path: Path, *, host: str, evals: dict[str, dict[str, Any]], reading: list[str],
                 scoring: list[str], plan: dict[str, Any], times: dict[str, float], plots: dict[str, Path | None],
                 curve_line: str | None, synthetic: dict[str, Any] | None = None,
                 where: dict[str, str] | None = None) -> Path:
    """`report.md`: the reading, the before/after table, the plots (by file name, beside the report), the
    scoring and the time each stage took."""
    b, a = evals["before_grpo"], evals["after_grpo"]
    g = a.get("paired_gain") or {}
    sft, grpo = plan.get("sft") or {}, plan.get("grpo") or {}
    rows = [("Balanced F1 (one pass)", "rough_bal_f1"), ("TPR: valid proofs accepted", "rough_tpr"),
            ("TNR: flawed proofs rejected", "rough_tnr"), ("first wrong step named", "first_error_step_accuracy"),
            ("well-formed answers", EVAL_VALID_RATE), (f"k-pass decision ({b.get('passes')} passes): Bal-F1",
                                                       "kpass_bal_f1"),
            ("k-pass TPR", "kpass_tpr"), ("k-pass TNR", "kpass_tnr")]
    lines = ["# What the demo trained", "",
             f"Host: {host}. SFT warm-up {sft.get('steps')} steps (median {sft.get('median_step_s')} s), GRPO "
             f"{grpo.get('steps')} steps (median {grpo.get('median_step_s')} s); {sum(times.values()) / 60:.1f} "
             f"minutes in all" + (f" (estimated {plan['estimate_s'] / 60:.0f} at the start)."
                                  if plan.get("estimate_s") else "."), "",
             "## What GRPO changed", "", *[f"- {s}" for s in reading], "",
             f"Held-out proofs: {a.get('n_tasks')} x {b.get('passes')} passes, the same proofs and seed before and after "
             "GRPO (mean +- standard error; the gain's SE is that of the paired difference).", "",
             "| | before GRPO | after GRPO | change |", "|---|---|---|---|"]
    for name, k in rows:
        d = None if b.get(k) is None or a.get(k) is None else a[k] - b[k]
        se = {"rough_bal_f1": g.get("rough_bal_f1_gain_se"), "rough_tnr": g.get("rough_tnr_gain_se")}.get(k)
        change = "-" if d is None else f"{d:+.3f}" + (f" +- {se:.3f} (paired)" if se else "")
        lines.append(f"| {name} | {_cell(b, k)} | {_cell(a, k)} | {change} |")
    if b.get("n_cut_passes") is not None and a.get("n_cut_passes") is not None:
        lines += ["", f"Passes cut at the token limit (invalid, never an accept): {b['n_cut_passes']} before GRPO, "
                      f"{a['n_cut_passes']} after, of {a.get('n_tasks')} x {b.get('passes')}."]
    lines += ["", "## Plots", ""]
    for title, key in (("Learning curve (held-out) and reward", "curve"), ("GRPO per step", "diagnostics"),
                       ("The k-pass decision against k", "kpass")):
        if plots.get(key):
            lines += [f"![{title}]({plots[key].name})", ""]
    if curve_line:
        lines += [curve_line, ""]
    lines += ["## Scoring through `proofcheck serve`", ""]
    if synthetic:
        lines += [*_synthetic_table(synthetic), ""]
    lines += [("- " + x.strip()) if x.startswith("  ") else x for x in scoring]
    lines += ["", "## Time", "", "| stage | seconds |", "|---|---|", *[f"| {k} | {v:.0f} |" for k, v in times.items()],
              f"| total | {sum(times.values()):.0f} |"]
    if where:
        lines += ["", *[f"{k}: `{v}`  " for k, v in where.items()]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _synthetic_table(s: dict[str, Any]) -> list[str]:
    """The synthetic prover's true rate beside what the verifier gives it: one pass, unanimity, the card's rule."""
    cal = s.get("calibrated_rule")
    head = ["", "true rate", "one pass accepts", f"pessimistic ({s['passes']}-pass unanimity)"] + \
        ([f"calibrated ({cal})"] if cal else [])
    rows = [[f"synthetic prover, {s['n']} held-out chain proofs", _f(s["true_rate"]), _f(s.get("per_pass")),
             _f(s.get("pessimistic"))] + ([_f(s.get("calibrated_score"))] if cal else []),
            ["... its valid proofs", "1", _f(s.get("per_pass_accept_valid")), ""] + ([""] if cal else []),
            ["... its flawed proofs", "0", _f(s.get("per_pass_accept_flawed")), ""] + ([""] if cal else [])]
    return ["| " + " | ".join(r) + " |" for r in (head, ["---"] * len(head), *rows)]


def _cell(m: dict[str, Any], k: str) -> str:
    if m.get(k) is None:
        return "-"
    se = m.get(f"{k}_se")
    return f"{m[k]:.3f}" + (f" +- {se:.3f}" if se is not None else "")
