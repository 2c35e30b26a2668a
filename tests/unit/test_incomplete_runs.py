"""An incomplete run reports no scores for its incomplete splits (the release's rule), only counts.

The release (`metrics.summarize`) sets a split's metrics to null unless every expected record of
that split is there. Ours: a split is incomplete when the run misses records (they cannot be
placed in a split) or one of its records holds an errored pass or a grader failure. Expected
values are hand-computed from the rows below.
"""

from __future__ import annotations

import pytest

from proofcheck.bench.scoring import PROVER_SCORES, summarise_prover_records, summarise_verifier_records

ACCEPT = "<assessment>ok</assessment><errors></errors><first_error_step>-1</first_error_step>"


def ok_trial() -> dict:
    return {"status": "valid", "text": ACCEPT, "finish_reason": "stop", "error": None}


def err_trial() -> dict:
    return {"status": "error", "text": "", "finish_reason": None, "error": "HTTP 503: busy", "error_status": 503}


def prover_record(pid: str, domain: str, subject: str, trials: list[dict]) -> dict:
    return {"proof_id": f"{pid}#0", "problem_id": pid, "sample": 0, "domain": domain, "subject": subject,
            "n_steps": 2, "failed": False, "verifier_trials": trials}


MANIFEST = {"kind": "prover", "rule": "unanimous", "passes": 2, "expected_records": 3,
            "problems": {"u1": ["ugd", "Algebra"], "u2": ["ugd", "Analysis"], "q1": ["qe", "Analysis"]}}


@pytest.mark.parametrize(("qe_trials", "expected", "complete"), [
    # (qe record's trials, expected records, {section/name: complete})
    ([ok_trial(), ok_trial()], 3, {"all": True, "ugd": True, "qe": True, "Algebra": True, "Analysis": True}),
    ([ok_trial(), err_trial()], 3, {"all": False, "ugd": True, "qe": False, "Algebra": True, "Analysis": False}),
    ([ok_trial(), ok_trial()], 4, {"all": False, "ugd": False, "qe": False, "Algebra": False, "Analysis": False}),
])
def test_prover_scores_withheld_per_split(qe_trials: list[dict], expected: int, complete: dict[str, bool]) -> None:
    records = [prover_record("u1", "ugd", "Algebra", [ok_trial(), ok_trial()]),
               prover_record("u2", "ugd", "Analysis", [ok_trial(), ok_trial()]),
               prover_record("q1", "qe", "Analysis", qe_trials)]
    s = summarise_prover_records(records, {**MANIFEST, "expected_records": expected})
    sections = {**s["splits"], **s["subjects"]}
    assert {k: v["complete"] for k, v in sections.items()} == complete
    for name, ok in complete.items():
        scores = [sections[name][k] for k in PROVER_SCORES]
        assert scores == [1.0, 1.0, 1.0] if ok else scores == [None, None, None], name
        assert sections[name]["n_problems"] >= 1  # counts stay
    assert s["complete"] is complete["all"]
    assert (s["pessimistic"] is None) is (not complete["all"])
    assert (s["generation_failure_rate"] is None) is (not complete["all"])


def test_verifier_grader_failure_withholds_its_split() -> None:
    def rec(pid: str, domain: str, meta: dict) -> dict:
        return {"proof_id": pid, "problem_id": pid, "domain": domain, "subject": "S", "n_steps": 2,
                "is_correct": True, "first_error_step": -1,
                "verifier_trials": [{**ok_trial(), "meta": meta}]}

    graded = {"level": "EXACT_MATCH", "score": 1.0, "valid": True, "grader_error": None}
    failed = {"level": None, "score": None, "valid": True, "grader_error": "judge failed: http_503"}
    s = summarise_verifier_records([rec("a", "ugd", graded), rec("b", "qe", failed)],
                                   {"kind": "verifier", "repeats": 1, "expected_records": 2})
    assert s["complete"] is False and s["grader_failures"] == 1
    assert s["splits"]["ugd"]["complete"] is True and s["splits"]["ugd"]["rough_tpr"] == 1.0
    assert s["splits"]["qe"]["rough_tpr"] is None and s["splits"]["all"]["meta_ver_tpr"] is None
    assert s["rough_accuracy"] is None and s["n_proofs"] == 2
