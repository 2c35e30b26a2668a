"""Per-family (and per-kind) held-out metrics: hand-computed tables, and families found through the
training dataset's rows (annotation as JSON text, no `family` column)."""

from __future__ import annotations

import json

import pytest

from proofcheck.train.family_eval import format_table, kind_of, per_family_metrics, per_kind_metrics


def _res(pid: str, correct: bool, first: int, said: list[int | str | None]) -> dict:
    """A graded result: one trial per entry of `said` (None = a malformed output, "cut" = a pass cut at its
    token limit: both invalid)."""
    def trial(s: int | str | None) -> dict:
        if isinstance(s, int):
            return {"valid": True, "first_error_step": s, "invalid_reason": None}
        return {"valid": False, "first_error_step": None,
                "invalid_reason": "non_stop_finish" if s == "cut" else "missing_tag"}
    return {"proof_id": pid, "is_correct": correct, "first_error_step": first, "domain": "ugd",
            "trials": [trial(s) for s in said]}


def _row(pid: str, remark: str) -> dict:
    return {"proof_id": pid, "annotation": json.dumps({"first_fatal_error_step": 0, "remark": remark})}


ROWS = [_row("l1", "synthetic:linear:valid"), _row("l2", "synthetic:linear:sign_slip"),
        _row("p1", "synthetic:parity:valid"), _row("p2", "synthetic:parity:case_missed"),
        _row("c1", "synthetic:arithmetic"), _row("e1", "expert remark")]
RESULTS = [
    _res("l1", True, -1, [-1, -1, 2, "cut"]),  # rough 2/4, valid 3/4, one pass cut
    _res("l2", False, 1, [1, 0, -1, -1]),      # rough 2/4, first error right 1/4
    _res("p1", True, -1, [-1, -1, -1, -1]),    # rough 1
    _res("p2", False, 3, [-1, -1, -1, -1]),    # rough 0: always accepted
    _res("c1", False, 2, [2, 2, None, 2]),     # chain: rough 3/4
    _res("e1", True, -1, [-1, -1, -1, -1]),    # expert data: no family, left out
]


@pytest.mark.parametrize(("family", "expected"), [
    ("linear", {"rough_tpr": 0.5, "rough_tnr": 0.5, "rough_bal_f1": 0.5, "valid_rate": 7 / 8,
                "first_error_step_accuracy": (2 / 4 + 1 / 4) / 2, "n_proofs": 2, "n_cut_passes": 1}),
    ("parity", {"rough_tpr": 1.0, "rough_tnr": 0.0, "rough_bal_f1": 0.0, "valid_rate": 1.0,
                "first_error_step_accuracy": 0.5, "n_proofs": 2, "n_cut_passes": 0}),
    ("chain", {"rough_tpr": None, "rough_tnr": 0.75, "rough_bal_f1": None, "valid_rate": 0.75,
               "first_error_step_accuracy": 0.75, "n_proofs": 1, "n_cut_passes": 0}),  # malformed, not cut
])
def test_per_family_metrics_match_hand_computed_values(family: str, expected: dict) -> None:
    got = per_family_metrics(RESULTS, ROWS)
    assert sorted(got) == ["chain", "linear", "parity"]
    for key, value in expected.items():
        assert got[family][key] == pytest.approx(value) if value is not None else got[family][key] is None, key


def test_per_kind_metrics_split_each_family_by_kind() -> None:
    got = per_kind_metrics(RESULTS, ROWS)
    assert sorted(got) == ["chain:arithmetic", "linear:sign_slip", "linear:valid", "parity:case_missed",
                           "parity:valid"]
    assert got["parity:case_missed"]["rough_tnr"] == 0.0 and got["linear:valid"]["rough_tpr"] == 0.5


def test_no_known_family_gives_an_empty_split() -> None:
    assert per_family_metrics(RESULTS[-1:], ROWS) == {}
    assert per_family_metrics(RESULTS, None) == {}  # results alone carry no family


def test_a_result_may_carry_its_own_family() -> None:
    got = per_family_metrics([{**RESULTS[0], "family": "expand"}])
    assert list(got) == ["expand"]


def test_families_survive_the_training_dataset() -> None:
    """Rows built the way training builds them (annotated_to_dataset) still tell their family."""
    from proofcheck.data.loaders import annotated_to_dataset
    from proofcheck.data.synth import balanced_tasks
    from proofcheck.schemas import AnnotatedProof

    tasks = balanced_tasks(12, seed=0, families="all")
    rows = annotated_to_dataset([AnnotatedProof.model_validate(t) for t in tasks]).to_list()
    assert "family" not in rows[0]
    results = [_res(r["proof_id"], r["is_correct"], r["first_error_step"], [-1]) for r in rows]
    got = per_family_metrics(results, rows)
    assert sorted(got) == sorted({t["family"] for t in tasks})
    assert all(m["rough_tpr"] == 1.0 and m["rough_tnr"] == 0.0 for m in got.values())  # always accepting
    assert {kind_of(r) for r in rows} == {t["kind"] for t in tasks}


def test_format_table_has_a_row_per_family() -> None:
    table = format_table(per_family_metrics(RESULTS, ROWS))
    assert table.count("\n") == 4 and "| parity | 2 | 0.000 | 1.000 | 0.000 | 1.000 | 0.500 |" in table
