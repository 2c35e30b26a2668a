"""Metric formulas on hand-computed cases (docs/scoring.md)."""

from __future__ import annotations

import pytest

from proofcheck.decision import decide, is_decided, vote_counts
from proofcheck.metrics import (
    ProofTrials,
    SubmissionPasses,
    Trial,
    balanced_f1,
    eval_metrics,
    paired_gain,
    proof_first_error_step_accuracy,
    proof_rough,
    proof_valid_rate,
    prover_metrics,
    verifier_metrics,
)


@pytest.mark.parametrize(
    ("tpr", "tnr", "f1"),
    [(1.0, 1.0, 1.0), (1.0, 0.5, 2 / 3), (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), (None, 0.5, None), (0.5, None, None)],
)
def test_balanced_f1(tpr, tnr, f1):
    assert balanced_f1(tpr, tnr) == (pytest.approx(f1) if f1 is not None else None)


def T(fes, valid=True, meta=None):
    return Trial(valid, fes if valid else None, meta)


# per-proof shares: (gold correct, gold first error, trials, repeats) -> (rough, first-error accuracy, valid rate)
@pytest.mark.parametrize(("correct", "fes", "trials", "repeats", "shares"), [
    (True, -1, [T(-1), T(-1), T(1), T(None, valid=False)], None, (2 / 4, 2 / 4, 3 / 4)),
    (False, 2, [T(2), T(0), T(-1)], None, (2 / 3, 1 / 3, 1.0)),
    (False, 2, [T(2), T(0)], 4, (2 / 4, 1 / 4, 2 / 4)),     # missing repeats count 0: R is the denominator
    (False, 1, [T(None, valid=False)], None, (0.0, 0.0, 0.0)),  # an invalid pass never hits
    (True, -1, [], None, (0.0, 0.0, 0.0)),                   # no passes, no R: 0
    (True, -1, [], 2, (0.0, 0.0, 0.0)),
])
def test_per_proof_shares(correct, fes, trials, repeats, shares):
    p = ProofTrials("x", correct, fes, "ugd", trials)
    got = (proof_rough(p, repeats), proof_first_error_step_accuracy(p, repeats), proof_valid_rate(p, repeats))
    assert got == pytest.approx(shares)


def test_verifier_metrics_hand_computed():
    proofs = [
        # correct proof: repeats accept, accept, reject, invalid -> rough 2/4
        ProofTrials("a", True, -1, "ugd", [T(-1), T(-1), T(1), T(None, valid=False)]),
        # correct proof: always accepts -> rough 1
        ProofTrials("b", True, -1, "qe", [T(-1), T(-1)]),
        # incorrect (first error 2): reject@2, reject@0, accept -> rough 2/3, fes acc 1/3
        ProofTrials("c", False, 2, "qe", [T(2), T(0), T(-1)]),
    ]
    m = verifier_metrics(proofs)
    assert m["rough_tpr"] == pytest.approx((0.5 + 1.0) / 2)
    assert m["rough_tnr"] == pytest.approx(2 / 3)
    assert m["rough_bal_f1"] == pytest.approx(2 * 0.75 * (2 / 3) / (0.75 + 2 / 3))
    assert m["balanced_accuracy"] == pytest.approx((0.75 + 2 / 3) / 2)
    # first-error-step accuracy per proof: a 2/4, b 2/2, c 1/3
    assert m["first_error_step_accuracy"] == pytest.approx((0.5 + 1 + 1 / 3) / 3)
    assert m["first_error_step_accuracy_incorrect"] == pytest.approx(1 / 3)
    # valid rate per proof (the unit of every per-proof share and of its standard error): a 3/4, b 1, c 1
    assert m["verifier_valid_rate"] == pytest.approx((0.75 + 1 + 1) / 3)
    assert "meta_ver_tpr" not in m
    assert m["splits"]["ugd"]["rough_tnr"] is None and m["splits"]["ugd"]["rough_bal_f1"] is None
    assert m["splits"]["qe"]["rough_tpr"] == 1.0


@pytest.mark.parametrize(("repeats", "valid_rate", "rough_tpr"), [
    (None, (1.0 + 0.0) / 2, (1.0 + 0.0) / 2),  # trials as they are: the proof without passes counts 0
    (2, (1.0 + 0.0) / 2, (1.0 + 0.0) / 2),     # R = 2 requested: the same, 2 valid of 4 slots
])
def test_a_proof_without_passes_counts_zero_in_every_share(repeats, valid_rate, rough_tpr):
    proofs = [ProofTrials("a", True, -1, "ugd", [T(-1), T(-1)]), ProofTrials("b", True, -1, "ugd", [])]
    m = verifier_metrics(proofs, repeats)
    assert m["verifier_valid_rate"] == pytest.approx(valid_rate)
    assert m["rough_tpr"] == pytest.approx(rough_tpr)


def test_verifier_meta_metrics_invalid_counts_zero():
    proofs = [ProofTrials("a", True, -1, "ugd", [T(-1, meta=1.0), T(None, valid=False)]),
              ProofTrials("b", False, 1, "ugd", [T(1, meta=0.75), T(3, meta=0.5)])]
    m = verifier_metrics(proofs)
    assert m["meta_ver_tpr"] == pytest.approx(0.5)
    assert m["meta_ver_tnr"] == pytest.approx(0.625)
    assert m["meta_ver_bal_f1"] == pytest.approx(2 * 0.5 * 0.625 / 1.125)


def test_rates_both_zero_give_f1_zero():
    proofs = [ProofTrials("a", True, -1, "ugd", [T(2)]), ProofTrials("b", False, 0, "ugd", [T(-1)])]
    m = verifier_metrics(proofs)
    assert m["rough_tpr"] == 0 and m["rough_tnr"] == 0 and m["rough_bal_f1"] == 0.0


def test_prover_metrics_hand_computed():
    problems = {"u1": ("ugd", "algebra"), "u2": ("ugd", "analysis"), "q1": ("qe", "algebra")}
    A, R, INV = "accept", "reject", "invalid"
    subs = [
        SubmissionPasses("u1", 0, [A] * 8),          # correct
        SubmissionPasses("u1", 1, [A] * 7 + [R]),    # one reject: not correct
        SubmissionPasses("q1", 0, [A] * 7 + [INV]),    # invalid pass: not correct
        SubmissionPasses("q1", 1, [A] * 8),          # correct
        SubmissionPasses("q1", 2, []),               # failed generation
        SubmissionPasses("u1", 2, [R] + ["cancelled"] * 7),  # early reject: cancelled passes are not outputs
    ]
    m = prover_metrics(problems, subs)
    # u1: 1/3, u2: no submission -> 0, q1: 1/3
    assert m["pessimistic"] == pytest.approx((1 / 3 + 0 + 1 / 3) / 3)
    assert m["pass_any_sample"] == pytest.approx(2 / 3)
    assert m["n_problems_without_submission"] == 1
    assert m["splits"]["ugd"]["pessimistic"] == pytest.approx(1 / 6)
    assert m["splits"]["qe"]["pessimistic"] == pytest.approx(1 / 3)
    assert m["subjects"]["algebra"]["pessimistic"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert m["verifier_valid_rate"] == pytest.approx(32 / 33)


def test_prover_metrics_unknown_problem():
    with pytest.raises(ValueError, match="unknown problem ids: zz"):
        prover_metrics({"a": ("ugd", "x")}, [SubmissionPasses("zz", 0, ["accept"])])


@pytest.mark.parametrize(
    ("outcomes", "rule", "decision"),
    [
        (["accept"] * 8, "unanimous", "accept"),
        (["accept"] * 7 + ["reject"], "unanimous", "reject"),
        (["accept"] * 7 + ["invalid"], "unanimous", "reject"),
        (["accept"] + ["cancelled"] * 7, "unanimous", "reject"),
        ([], "unanimous", "reject"),
        (["accept"] * 5 + ["reject"] * 3, "majority", "accept"),
        (["accept"] * 4 + ["reject"] * 4, "majority", "reject"),
        (["accept"] * 4 + ["invalid"] * 4, "majority", "reject"),
        (["reject"] * 7 + ["accept"], "any", "accept"),
        (["invalid"] * 8, "any", "reject"),
    ],
)
def test_decide(outcomes, rule, decision):
    assert decide(outcomes, rule) == decision


@pytest.mark.parametrize(
    ("seen", "total", "rule", "decided"),
    [(["accept"] * 3, 8, "unanimous", False), (["accept", "invalid"], 8, "unanimous", True),
     (["accept"] * 8, 8, "unanimous", True), (["accept"] * 5, 8, "majority", True),
     (["reject"] * 4, 8, "majority", True), (["reject"] * 3, 8, "majority", False),
     (["accept"], 8, "any", True), (["reject"] * 7, 8, "any", False)],
)
def test_is_decided(seen, total, rule, decided):
    assert is_decided(seen, total, rule) is decided


def test_bad_rule_and_outcome():
    with pytest.raises(ValueError, match="unknown rule"):
        decide(["accept"], "mostly")
    with pytest.raises(ValueError, match="unknown pass outcome"):
        decide(["yes"], "unanimous")
    assert vote_counts(["accept", "invalid", "error"]) == {"accept": 1, "reject": 0, "invalid": 1, "cancelled": 0,
                                                         "error": 1}


def _result(pid: str, correct: bool, verdicts: str) -> dict:
    """A held-out result: one pass per character, `a` accepts, `r` rejects at step 2, `x` is invalid."""
    trials = [{"valid": v != "x", "first_error_step": -1 if v == "a" else 2, "score": None} for v in verdicts]
    return {"proof_id": pid, "is_correct": correct, "first_error_step": -1 if correct else 2, "domain": "d",
            "trials": trials}


# before and after on the same proofs (valid ones first): the gains by hand from the per-proof shares
@pytest.mark.parametrize(("before", "after", "f1_gain", "tnr_gain", "tnr_gain_se", "f1_gain_varies"), [
    # TPR 1/2 -> 1, TNR 1/4 -> 1/2: F1 .3333 -> .6667; TNR diffs +.5, +0 -> SE .25
    (["ar", "ra", "aa", "ra"], ["aa", "aa", "ra", "ra"], 2 / 3 - 1 / 3, 0.25, 0.25, True),
    # nothing changes: no gain, no noise in the change
    (["aa", "ar", "rr", "ra"], ["aa", "ar", "rr", "ra"], 0.0, 0.0, 0.0, False),
    # an invalid pass counts as wrong: TNR 1 -> 1/2 (diffs -.5, -.5: SE 0); TPR 1 -> 1: F1 1 -> 2/3 on every draw
    (["aa", "aa", "rr", "rr"], ["aa", "aa", "rx", "xr"], 2 / 3 - 1.0, -0.5, 0.0, False),
])
def test_paired_gain_hand_computed(before: list[str], after: list[str], f1_gain: float, tnr_gain: float,
                                   tnr_gain_se: float, f1_gain_varies: bool) -> None:
    classes = [True, True, False, False]
    g = paired_gain([_result(str(i), c, v) for i, (c, v) in enumerate(zip(classes, before, strict=True))],
                    [_result(str(i), c, v) for i, (c, v) in enumerate(zip(classes, after, strict=True))])
    assert g["n_proofs"] == 4
    assert g["rough_bal_f1_gain"] == pytest.approx(f1_gain)
    assert g["rough_tnr_gain"] == pytest.approx(tnr_gain) and g["rough_tnr_gain_se"] == pytest.approx(tnr_gain_se)
    assert (g["rough_bal_f1_gain_se"] > 1e-9) == f1_gain_varies


def test_paired_gain_is_tighter_than_unpaired_when_proofs_keep_their_difficulty() -> None:
    """Half the proofs are hard before and after, one proof in eight improves: the bootstrap over proof pairs
    sees only the improvements' noise, far below the two evaluations' own standard errors combined."""
    import math

    classes = [i % 2 == 0 for i in range(64)]
    before = [_result(str(i), c, ("aa" if c else "rr") if i % 4 < 2 else ("rr" if c else "aa"))
              for i, c in enumerate(classes)]
    after = [_result(r["proof_id"], r["is_correct"], ("aa" if r["is_correct"] else "rr") if i % 8 == 2 else
                     "".join("a" if t["first_error_step"] == -1 else "r" for t in r["trials"]))
             for i, r in enumerate(before)]
    g = paired_gain(before, after)
    unpaired = math.hypot(eval_metrics(before)["rough_bal_f1_se"], eval_metrics(after)["rough_bal_f1_se"])
    assert g["rough_bal_f1_gain"] > 0 and g["rough_bal_f1_gain_se"] < unpaired / 2


def test_paired_gain_needs_the_same_proofs() -> None:
    b = [_result("a", True, "a"), _result("b", False, "r")]
    with pytest.raises(ValueError, match="same proofs in the same order"):
        paired_gain(b, b[::-1])
