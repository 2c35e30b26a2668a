"""The demo's results in a user's words (app/demo_page.py): the reading of before/after never speaks of targets,
and the report file holds the table, the plots and the synthetic prover's true rate beside its scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from proofcheck.app.demo_page import plain_reading, write_report


def _evals(gain: float, se: float, tnr_change: float, tnr_se: float) -> tuple[dict, dict]:
    before = {"rough_bal_f1": 0.80, "rough_tpr": 0.75, "rough_tnr": 0.88, "first_error_step_accuracy": 0.6,
              "kpass_bal_f1": 0.5, "kpass_tpr": 0.4, "kpass_tnr": 0.95, "passes": 4, "n_tasks": 64}
    after = {**before, "rough_bal_f1": 0.80 + gain, "rough_tpr": 0.85, "rough_tnr": 0.88 + tnr_change,
             "paired_gain": {"rough_bal_f1_gain": gain, "rough_bal_f1_gain_se": se, "rough_tnr_gain": tnr_change,
                             "rough_tnr_gain_se": tnr_se, "n_proofs": 64}}
    return before, after


@pytest.mark.parametrize(("gain", "se", "tnr", "tnr_se", "head", "flawed"), [
    (0.068, 0.024, 0.0, 0.032, "GRPO made the verifier better", "about as often as before"),
    (0.038, 0.020, -0.039, 0.016, "within two standard errors", "now lets more flawed proofs through"),
    (-0.01, 0.02, 0.05, 0.02, "did not improve", "rejects flawed proofs more often"),
])
def test_the_reading_says_what_changed_in_plain_words(gain, se, tnr, tnr_se, head, flawed):
    lines = plain_reading(*_evals(gain, se, tnr, tnr_se))
    assert head in lines[0] and f"{gain:+.3f} +- {se:.3f}" in lines[0]
    assert flawed in lines[1]
    assert "TPR 0.750 -> 0.850" in lines[2] and "first wrong step" in lines[2]
    assert "all 4 passes" in lines[3]
    assert not any("target" in x.lower() for x in lines)


def test_the_report_holds_the_table_the_plots_and_the_true_rate(tmp_path: Path):
    before, after = _evals(0.068, 0.024, 0.0, 0.032)
    plots = {k: tmp_path / f"{k}.png" for k in ("curve", "diagnostics", "kpass")}
    synthetic = {"n": 40, "n_valid": 24, "true_rate": 0.6, "passes": 8, "per_pass": 0.55, "pessimistic": 0.3,
                 "calibrated_rule": "at_least:2 of 4 passes", "calibrated_score": 0.5,
                 "per_pass_accept_valid": 0.8, "per_pass_accept_flawed": 0.2}
    path = write_report(tmp_path / "report.md", host="a CPU, 2 cores, bf16",
                        evals={"before_grpo": before, "after_grpo": after}, reading=plain_reading(before, after),
                        scoring=["a line", "  an indented line"], plan={"sft": {"steps": 64}, "grpo": {"steps": 40}},
                        times={"SFT": 300.0, "GRPO": 700.0}, plots=plots, curve_line=None, synthetic=synthetic,
                        where={"Trained model": "runs/demo/grpo/merged"})
    text = path.read_text()
    for png in ("curve.png", "diagnostics.png", "kpass.png"):
        assert f"]({png})" in text
    assert "| synthetic prover, 40 held-out chain proofs | 0.600 | 0.550 | 0.300 | 0.500 |" in text
    assert "| TNR: flawed proofs rejected | 0.880 | 0.880 | +0.000 +- 0.032 (paired) |" in text
    assert "- an indented line" in text and "| total | 1000 |" in text and "runs/demo/grpo/merged" in text
    assert "cut at the token limit" not in text  # a summary from before the count was kept


def test_the_report_counts_passes_cut_at_the_token_limit(tmp_path: Path):
    before, after = _evals(0.068, 0.024, 0.0, 0.032)
    before, after = {**before, "n_cut_passes": 7}, {**after, "n_cut_passes": 2}
    path = write_report(tmp_path / "report.md", host="h", evals={"before_grpo": before, "after_grpo": after},
                        reading=[], scoring=[], plan={}, times={"SFT": 1.0}, plots={}, curve_line=None)
    assert "token limit (invalid, never an accept): 7 before GRPO, 2 after, of 64 x 4." in path.read_text()
