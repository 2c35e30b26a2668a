"""Held-out evaluation split by proof family: does the verifier check every kind of proof, or one?

`per_family_metrics` takes the graded results of a k-pass evaluation (the dicts
`proofcheck.train.eval_generation.grade_row` returns: `proof_id`, `is_correct`, `first_error_step`,
`domain`, `trials` with `valid` and `first_error_step`) and the rows they were made from, finds
each proof's family (`proofcheck.data.families.family_of`: the row's `family`, else the
annotation's `synthetic:<family>:<kind>` remark, which survives the training dataset), and
reports each family's rough Balanced F1, TPR, TNR, valid rate and first-error-step accuracy by
the VerifierBench rules of `proofcheck.metrics`. `per_kind_metrics` does the same by error kind
(the valid proofs of a family are its `valid` kind). Proofs of no known family (expert data) are
left out; with none known the answer is `{}`, so a caller can add the split only when it means
something.

Example:
    >>> rows = [{"proof_id": "a", "annotation": '{"remark": "synthetic:linear:sign_slip"}'},
    ...         {"proof_id": "b", "family": "linear"}]
    >>> res = [{"proof_id": "a", "is_correct": False, "first_error_step": 0, "domain": "ugd",
    ...         "trials": [{"valid": True, "first_error_step": 0}]},
    ...        {"proof_id": "b", "is_correct": True, "first_error_step": -1, "domain": "ugd",
    ...         "trials": [{"valid": True, "first_error_step": 1}]}]
    >>> m = per_family_metrics(res, rows)["linear"]
    >>> m["rough_tpr"], m["rough_tnr"], m["n_proofs"]
    (0.0, 1.0, 2)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proofcheck.data.families import family_of, row_remark
from proofcheck.metrics import EVAL_VALID_RATE, ProofTrials, Trial, cut_passes, eval_keys, verifier_metrics

KEYS = ("rough_bal_f1", "rough_tpr", "rough_tnr", EVAL_VALID_RATE, "first_error_step_accuracy", "n_proofs",
        "n_correct", "n_incorrect")


def kind_of(row: dict[str, Any]) -> str | None:
    """The proof's kind (`valid` or an error kind): the row's `kind`, else the annotation's remark
    (`synthetic:<family>:<kind>` or `synthetic:<kind>`); None when unknown."""
    if row.get("kind"):
        return str(row["kind"])
    remark = row_remark(row)
    if family_of(row) is None or remark is None:
        return None
    return remark.rsplit(":", 1)[1]


def _grouped(results: list[dict[str, Any]], rows: list[dict[str, Any]] | None,
             key: Callable[[dict[str, Any]], str | None]) -> dict[str, dict[str, Any]]:
    by_id = {r["proof_id"]: r for r in rows or []}
    groups: dict[str, list[ProofTrials]] = {}
    cut: dict[str, int] = {}
    for res in results:
        name = key(res) or (key(by_id[res["proof_id"]]) if res["proof_id"] in by_id else None)
        if name is None:
            continue
        groups.setdefault(name, []).append(ProofTrials(
            res["proof_id"], bool(res["is_correct"]), int(res["first_error_step"]), res.get("domain", "ugd"),
            [Trial(bool(t["valid"]), t.get("first_error_step")) for t in res["trials"]]))
        cut[name] = cut.get(name, 0) + cut_passes([res])
    out = {}
    for name in sorted(groups):
        m = eval_keys(verifier_metrics(groups[name]))
        out[name] = {**{k: m[k] for k in KEYS}, "n_cut_passes": cut[name]}
    return out


def per_family_metrics(results: list[dict[str, Any]],
                       rows: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Rough Balanced F1 / TPR / TNR / valid rate / first-error-step accuracy for each proof family.

    A result's family is its own `family` field, else that of the row with its `proof_id`.
    """
    return _grouped(results, rows, family_of)


def per_kind_metrics(results: list[dict[str, Any]],
                     rows: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """As `per_family_metrics`, grouped by `<family>:<kind>` (TNR of each error kind, TPR of the
    valid proofs of each family)."""
    def key(row: dict[str, Any]) -> str | None:
        fam, kind = family_of(row), kind_of(row)
        return f"{fam}:{kind}" if fam and kind else None
    return _grouped(results, rows, key)


def format_table(by_family: dict[str, dict[str, Any]]) -> str:
    """A Markdown table of `per_family_metrics` (for logs and closing notes)."""
    def cell(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
    lines = ["| family | n | rough Bal F1 | TPR | TNR | valid rate | first-error acc |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {m['n_proofs']} | " + " | ".join(cell(m[k]) for k in KEYS[:5]) + " |"
              for name, m in by_family.items()]
    return "\n".join(lines)
