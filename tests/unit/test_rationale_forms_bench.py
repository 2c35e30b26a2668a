"""benchmarks/rationale_forms.py: calibrate records read back as per-family rows of both forms, with the paired
difference of the recomputed form over the checks baseline."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import rationale_forms as rf  # noqa: E402

from proofcheck.parsing import format_verdict  # noqa: E402

FAMILIES = {"a-0": "chain", "a-1": "chain", "b-0": "parity", "b-1": "parity"}
GOLD = {"a-0": -1, "a-1": 2, "b-0": -1, "b-1": 1}   # a valid and a flawed proof in each family


def _pass(step: int) -> dict:
    return {"status": "valid", "text": format_verdict("checked.", [(step, "wrong")] if step >= 0 else [], step),
            "finish_reason": "stop", "completion_tokens": 40}


def _records(answers: dict[str, list[int]]) -> list[dict]:
    return [{"proof_id": pid, "n_steps": 4, "is_correct": GOLD[pid] < 0, "first_error_step": GOLD[pid],
             "verifier_trials": [_pass(s) for s in steps]} for pid, steps in answers.items()]


def _results(answers: dict[str, list[int]]) -> list[dict]:
    return rf.eval_results(_records(answers), FAMILIES)


def test_the_table_reads_each_family_and_the_paired_difference() -> None:
    # checks accepts everything; recomputed rejects the flawed chain at its first error
    checks = _results({"a-0": [-1, -1], "a-1": [-1, -1], "b-0": [-1, -1], "b-1": [-1, -1]})
    recomputed = _results({"a-0": [-1, -1], "a-1": [2, 2], "b-0": [-1, -1], "b-1": [-1, -1]})
    rows = rf.form_rows({"checks": checks, "recomputed": recomputed})
    assert list(rows) == [rf.ALL, "chain", "parity"]
    chain = rows["chain"]
    assert chain["checks"]["rough_tnr"] == 0.0 and chain["recomputed"]["rough_tnr"] == 1.0
    assert chain["recomputed"]["first_error_step_accuracy"] == 1.0
    assert chain["gain"] == pytest.approx(1.0)   # Bal-F1 0 -> 1: TPR 1 and TNR 0 -> 1
    assert rows["parity"]["gain"] == 0.0
    assert rows[rf.ALL]["n"] == 4 and rows[rf.ALL]["recomputed"]["rough_tnr"] == 0.5
    table = rf.markdown({"sft": {f: {"steps": 10, "median_step_s": 1.0} for f in ("checks", "recomputed")},
                         "rows": rows})
    assert "| chain | 2 | 0.000 | 1.000 | 0.000 |" in table and "| +1.000 +- " in table


def test_an_invalid_pass_is_never_a_verdict() -> None:
    r = rf.eval_results([{**_records({"a-1": [2]})[0], "verifier_trials": [
        {"status": "valid", "text": "Step 2 is wrong.", "finish_reason": "length", "completion_tokens": 400}]}],
        FAMILIES)
    assert r[0]["trials"] == [{"valid": False, "score": None, "first_error_step": None}]


def test_forms_over_different_proofs_are_refused() -> None:
    with pytest.raises(ValueError, match="different proofs"):
        rf.form_rows({"checks": _results({"a-0": [-1]}), "recomputed": _results({"a-1": [2]})})
