"""Summary JSON, Markdown report and PNG plots for scoring runs (matplotlib, Agg backend)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from proofcheck.io import write_json_atomic, write_text_atomic
from proofcheck.metrics import PROVER_COUNTS, PROVER_SCORES, VERIFIER_COUNTS, VERIFIER_SCORES
from proofcheck.rundir import missing_in_words


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bar(path: Path, labels: list[str], values: list[float | None], title: str, ylabel: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 0.7 * len(labels) + 2), 3.6))
    ax.bar(labels, [v or 0.0 for v in values], color="#4c72b0")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _incomplete_note(summary: dict[str, Any]) -> list[str]:
    """A warning paragraph for an incomplete run (its scores are withheld, as the release does)."""
    if summary.get("complete", True):
        return []
    return [f"**Incomplete run** ({missing_in_words(summary)}): scores of incomplete splits are withheld (–); rerun with `--resume`.", ""]


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_prover_report(out: Path, summary: dict[str, Any], records: list[dict]) -> list[Path]:
    """Write summary.json, report.md, accuracy_by_split.png, accuracy_by_subject.png, votes.png."""
    out = Path(out)
    write_json_atomic(out / "summary.json", summary)
    splits, subjects = summary["splits"], summary["subjects"]
    plots = [out / "accuracy_by_split.png", out / "accuracy_by_subject.png", out / "votes.png"]
    _bar(plots[0], list(splits), [s["pessimistic"] for s in splits.values()], "Pessimistic score by split", "score")
    _bar(plots[1], list(subjects), [s["pessimistic"] for s in subjects.values()], "Pessimistic score by subject",
         "score")
    accepts = Counter(sum(t.get("valid") and (t.get("parsed") or {}).get("verdict") == "accept"
                          for t in r["verifier_trials"]) for r in records if not r.get("failed"))
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    k = summary.get("passes") or max(accepts, default=0)
    ax.bar(range(k + 1), [accepts.get(i, 0) for i in range(k + 1)], color="#55a868")
    ax.set_xlabel(f"accepting passes (of {k})")
    ax.set_ylabel("proofs")
    ax.set_title("Vote distribution")
    fig.tight_layout()
    fig.savefig(plots[2], dpi=110)
    plt.close(fig)
    keys = (*PROVER_COUNTS, *PROVER_SCORES)
    md = [f"# ProverBench scoring: {summary.get('verifier')}", "",
          f"Rule `{summary.get('rule')}`, {summary.get('passes')} passes per proof; {summary.get('n_records')} proofs "
          f"verified, {summary.get('completion_tokens')} completion tokens, "
          f"{summary.get('n_cancelled_passes')} passes cancelled early.", "",
          *_incomplete_note(summary),
          *([f"Beside the pessimistic score (unanimity, the paper's): `calibrated_score`, the rule calibrated for "
             f"this verifier and stored in its model card, {summary['calibrated_rule']}.", ""]
            if summary.get("calibrated_rule") else []),
          _table([(k, *(_fmt(s.get(k)) for s in splits.values()))
                  for k in (*keys, *(("calibrated_score",) if summary.get("calibrated_rule") else ()))],
                 ("metric", *splits)), "",
          "## By subject", "",
          _table([(name, _fmt(s["n_problems"]), _fmt(s["pessimistic"]), _fmt(s["pass_any_sample"]))
                  for name, s in subjects.items()], ("subject", "problems", "pessimistic", "pass_any_sample")), "",
          *[f"![{p.stem}]({p.name})" for p in plots], ""]
    write_text_atomic(out / "report.md", "\n".join(md))
    return plots


def write_verifier_report(out: Path, summary: dict[str, Any], records: list[dict]) -> list[Path]:
    """Write summary.json, report.md, tpr_tnr.png, confusion.png, meta_levels.png."""
    out = Path(out)
    write_json_atomic(out / "summary.json", summary)
    splits = summary["splits"]
    plt = _plt()
    plots = [out / "tpr_tnr.png", out / "confusion.png", out / "meta_levels.png"]
    fig, ax = plt.subplots(figsize=(4.2, 4.2))
    for name, s in splits.items():
        if s.get("rough_tpr") is not None and s.get("rough_tnr") is not None:
            ax.scatter(s["rough_tnr"], s["rough_tpr"], s=60, label=f"{name} rough")
        if s.get("meta_ver_tpr") is not None and s.get("meta_ver_tnr") is not None:
            ax.scatter(s["meta_ver_tnr"], s["meta_ver_tpr"], s=60, marker="x", label=f"{name} meta")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("TNR (flawed proofs rejected)")
    ax.set_ylabel("TPR (valid proofs accepted)")
    ax.legend(fontsize=8)
    ax.set_title("TPR vs TNR")
    fig.tight_layout()
    fig.savefig(plots[0], dpi=110)
    plt.close(fig)
    conf = Counter()
    for r in records:
        for t in r["verifier_trials"]:
            pred = "invalid" if not t.get("valid") else (t.get("parsed") or {}).get("verdict")
            conf[("valid" if r["is_correct"] else "flawed", pred)] += 1
    cols = ("accept", "reject", "invalid")
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    grid = [[conf[(g, c)] for c in cols] for g in ("valid", "flawed")]
    ax.imshow(grid, cmap="Blues")
    top = max(max(row) for row in grid) or 1
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, str(v), ha="center", va="center", color="white" if v > top / 2 else "black")
    ax.set_xticks(range(3), cols)
    ax.set_yticks(range(2), ("gold valid", "gold flawed"))
    ax.set_title("Confusion (all passes)")
    fig.tight_layout()
    fig.savefig(plots[1], dpi=110)
    plt.close(fig)
    levels = summary.get("meta_levels") or {}
    _bar(plots[2], list(levels) or ["(no judge)"], [v / max(1, sum(levels.values())) for v in levels.values()] or [0],
         "Meta-verifier levels", "share of graded passes")
    keys = (*VERIFIER_COUNTS, *VERIFIER_SCORES)
    md = [f"# VerifierBench evaluation: {summary.get('verifier')}", "",
          f"{summary.get('repeats')} repeats per proof; judge: {summary.get('judge') or 'none'}; "
          f"grader failures: {summary.get('grader_failures', 0)}.", "",
          *_incomplete_note(summary),
          _table([(k, *(_fmt(s.get(k)) for s in splits.values())) for k in keys], ("metric", *splits)), "",
          *[f"![{p.stem}]({p.name})" for p in plots], ""]
    write_text_atomic(out / "report.md", "\n".join(md))
    return plots
