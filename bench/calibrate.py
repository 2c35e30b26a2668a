"""`proofcheck calibrate`: run max-k passes once on labelled proofs and derive the k-pass rule table.

The passes are a VerifierBench run (`proofcheck.bench.scoring.score_verifier`, every pass to the
end, no meta grading): records as they go, resumable, complete or it says it is not. From its
records the pure core (`proofcheck.calibration`) derives every "at least t of k" rule for k <= max-k
(the all-subsets average, tokens with early stop) and picks the operating point. This module writes
`calibration.json`, `calibration.md` and `calibration.png` beside the run's records; the command
stores the record in the model card (`proofcheck.prompt_card.write_calibration`).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from proofcheck.calibration import (
    METHOD,
    ProofPasses,
    calibration_record,
    calibration_table,
    choose,
    describe,
    lowest_false_accept,
    row_at,
)
from proofcheck.io import read_jsonl_tolerant, write_json_atomic, write_text_atomic
from proofcheck.rundir import file_sha256, latest_records

from .report import _fmt, _plt, _table
from .scoring import reparse, score_verifier


def proofs_from_records(records: list[dict[str, Any]]) -> list[ProofPasses]:
    """Each record's passes (outcomes re-parsed from their text, tokens as recorded) with its gold label."""
    out = []
    for r in records:
        n_steps = r["n_steps"] if "n_steps" in r else len(r["steps"])
        trials = r["verifier_trials"]
        out.append(ProofPasses(bool(r["is_correct"]), [reparse(t, n_steps).outcome for t in trials],
                               [int(t.get("completion_tokens") or 0) for t in trials], str(r["proof_id"])))
    return out


def calibrate(data: str, verifier: Any, verifier_id: str, out: str | Path, *, max_k: int = 8,
              max_false_accept: float | None = None, concurrency: int = 4, resume: bool = False,
              max_tokens: int = 1024, seed: int | None = None, with_reference: bool = False,
              prompt_hash: str | None = None, resamples: int = 1000) -> dict[str, Any]:
    """Verify every labelled proof in `data` with `max_k` passes (into `out`), then derive the table and
    the choice. Returns {"run": the VerifierBench summary, "complete", "table", "choice", "record"} where
    `record` (the card's, `calibration_record`) is None when the run is incomplete or no rule met
    `max_false_accept`."""
    run = score_verifier(data, verifier, verifier_id, out, repeats=max_k, concurrency=concurrency, resume=resume,
                         max_tokens=max_tokens, seed=seed, with_reference=with_reference, prompt_hash=prompt_hash)
    result: dict[str, Any] = {"run": run, "complete": bool(run.get("complete")), "table": None, "choice": None,
                              "record": None, "out": str(out)}
    if not result["complete"]:
        return result
    records = latest_records(read_jsonl_tolerant(Path(out) / "records.jsonl"), ("proof_id",), str(out))
    proofs = proofs_from_records(records)
    table = calibration_table(proofs, max_k, resamples=resamples)
    choice = choose(table, max_false_accept)
    measured_on = {"data": str(data), "data_sha256": file_sha256(data), "n_proofs": len(proofs),
                   "n_correct": sum(p.is_correct for p in proofs), "n_incorrect": sum(not p.is_correct for p in proofs),
                   "max_k": max_k, "verifier": verifier_id, "with_reference": with_reference, "max_tokens": max_tokens,
                   "seed": seed, "method": METHOD, "by": "proofcheck calibrate", "run": str(out),
                   "date": datetime.date.today().isoformat()}
    result.update(table=table, choice=choice, measured_on=measured_on)
    if choice is not None:
        result["record"] = calibration_record(table, choice, measured_on)
    write_calibration_report(Path(out), result, max_false_accept)
    return result


def _row(name: str, r: dict[str, Any]) -> tuple[str, ...]:
    def se(key: str) -> str:
        return "" if r.get(key) is None else f" +- {r[key]:.3f}"

    cost = "-" if r["tokens_per_proof"] is None else f"{r['tokens_per_proof']:.0f}"
    return (name, f"{r['rule']} (at_least:{r['t']} of {r['k']})", f"{_fmt(r['bal_f1'])}{se('bal_f1_se')}",
            f"{_fmt(r['tpr'])}{se('tpr_se')}", f"{_fmt(r['tnr'])}{se('tnr_se')}", f"{r['passes_per_proof']:.2f}", cost)


HEADER = ("", "rule", "Balanced F1", "TPR", "TNR", "passes / proof", "tokens / proof")


def calibration_markdown(result: dict[str, Any], max_false_accept: float | None = None) -> str:
    """The report: where it was measured, the choice and why, the baselines, and the whole table."""
    table, choice, m = result["table"], result["choice"], result["measured_on"]
    max_k = max(r["k"] for r in table)
    md = ["# k-pass rule calibration", "",
          f"Measured on {m['n_proofs']} labelled proofs ({m['n_correct']} correct, {m['n_incorrect']} flawed) of "
          f"`{m['data']}` with {max_k} passes each, verifier `{m['verifier']}`, {m['date']}. Every k <= {max_k} is "
          "the average over all k-subsets of the passes; tokens and passes per proof are with early stop "
          "(passes read one at a time until the rule is decided).", ""]
    if choice is None:
        low = lowest_false_accept(table)
        md += [f"**No rule meets --max-false-accept {max_false_accept:g}**: the lowest false-accept rate is "
               f"{low['false_accept_rate']:.3f} ({low['rule']}, at_least:{low['t']} of {low['k']}). The card is "
               "left as it was.", ""]
    else:
        md += [f"**Chosen: {describe(result['record'])}.**", ""]
    rows = [_row("one pass", row_at(table, 1, 1)), _row(f"unanimous of {max_k}", row_at(table, max_k, max_k)),
            _row(f"majority of {max_k}", row_at(table, max_k, max_k // 2 + 1))]
    if choice is not None:
        rows.append(_row("chosen", choice))
    md += [_table(rows, HEADER), "", "![calibration](calibration.png)", "", "## Every rule", "",
           _table([_row("", r)[1:] for r in table], HEADER[1:]), ""]
    return "\n".join(md)


def plot_calibration(path: Path, table: list[dict[str, Any]], choice: dict[str, Any] | None) -> None:
    """Balanced F1 against the cost per proof (tokens, else passes) of every rule, one line per k."""
    plt = _plt()
    cost_key = "tokens_per_proof" if table[0]["tokens_per_proof"] is not None else "passes_per_proof"
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for k in sorted({r["k"] for r in table}):
        rows = [r for r in table if r["k"] == k]
        ax.plot([r[cost_key] for r in rows], [r["bal_f1"] for r in rows], marker=".", label=f"k={k}")
    max_k = max(r["k"] for r in table)
    u = row_at(table, max_k, max_k)
    ax.scatter([u[cost_key]], [u["bal_f1"]], marker="x", s=90, color="black", zorder=3, label=f"unanimous of {max_k}")
    if choice is not None:
        ax.scatter([choice[cost_key]], [choice["bal_f1"]], marker="*", s=220, color="red", zorder=4,
                   label=f"chosen: at_least:{choice['t']} of {choice['k']}")
    ax.set_xlabel(cost_key.replace("_", " ") + " (early stop)")
    ax.set_ylabel("Balanced F1")
    ax.set_title("Every k-pass rule, at least t of k")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_calibration_report(out: Path, result: dict[str, Any], max_false_accept: float | None = None) -> None:
    """calibration.json (table, choice, card record), calibration.md and calibration.png in `out`."""
    write_json_atomic(out / "calibration.json", {k: result[k] for k in ("table", "choice", "record", "measured_on")})
    plot_calibration(out / "calibration.png", result["table"], result["choice"])
    write_text_atomic(out / "calibration.md", calibration_markdown(result, max_false_accept))
