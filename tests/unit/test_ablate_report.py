"""benchmarks/ablate/report.py: the k-pass curve, per-arm statistics and the MDD, against hand-computed
tables (decisions from proofcheck.decision, Balanced F1 from proofcheck.metrics)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from ablate.report import METRICS, arm_stats, compare, kpass_curve, markdown, wall_time_line  # noqa: E402


def _p(correct: bool, *passes: tuple[str, int]) -> dict:
    return {"is_correct": correct, "passes": [{"outcome": o, "tokens": t} for o, t in passes]}


PROOFS = [_p(True, ("accept", 10), ("accept", 10)), _p(True, ("accept", 10), ("reject", 5)),
          _p(False, ("reject", 4), ("accept", 10)), _p(False, ("accept", 10), ("accept", 10))]


@pytest.mark.parametrize(("rule", "k", "tpr", "tnr", "bal_f1", "tokens", "tokens_all"), [
    # worked by hand: tokens stop at the pass that fixes the decision (early reject under unanimous)
    ("unanimous", 1, 1.0, 0.5, 2 / 3, 8.5, 8.5),
    ("unanimous", 2, 0.5, 0.5, 0.5, 14.75, 17.25),
    ("majority", 2, 0.5, 0.5, 0.5, 14.75, 17.25),     # 1 of 2 is not a majority
    ("any", 2, 1.0, 0.0, 0.0, 11.0, 17.25),           # one accept settles it
])
def test_kpass_curve(rule, k, tpr, tnr, bal_f1, tokens, tokens_all) -> None:
    got = kpass_curve(PROOFS, ks=(1, 2))[rule][str(k)]
    assert (got["tpr"], got["tnr"]) == (tpr, tnr)
    assert got["bal_f1"] == pytest.approx(bal_f1)
    assert got["tokens_per_proof"] == tokens and got["tokens_per_proof_all_passes"] == tokens_all


def test_kpass_curve_skips_a_k_beyond_the_passes() -> None:
    assert set(kpass_curve(PROOFS, ks=(1, 2, 4))["unanimous"]) == {"1", "2"}


def _run(v: float, se: float) -> dict:
    return {"after": {**{m: v for m in METRICS}, **{f"{m}_se": se for m in METRICS}}}


def test_arm_stats_and_the_smallest_detectable_difference() -> None:
    arm = arm_stats([_run(0.5, 0.1), _run(0.7, 0.1)])["rough_bal_f1"]
    # between seeds: sd(.5, .7) / sqrt 2 = .1; evaluation: .1 / sqrt 2; the larger is used
    assert arm["mean"] == pytest.approx(0.6) and arm["se_seeds"] == pytest.approx(0.1)
    assert arm["se_eval"] == pytest.approx(0.1 / 2 ** 0.5) and arm["se"] == pytest.approx(0.1) and arm["n"] == 2
    ref = arm_stats([_run(0.4, 0.1), _run(0.4, 0.1)])  # no spread between seeds: the evaluation SE counts
    assert ref["rough_tpr"]["se"] == pytest.approx(0.1 / 2 ** 0.5)
    c = compare(arm_stats([_run(0.5, 0.1), _run(0.7, 0.1)]), ref)["rough_bal_f1"]
    se = (0.1 ** 2 + 0.005) ** 0.5
    assert c["diff"] == pytest.approx(0.2) and c["se_diff"] == pytest.approx(se)
    assert c["mdd"] == pytest.approx(2.8 * se) and c["detected"] is False


def test_markdown_names_every_arm() -> None:
    stats = arm_stats([_run(0.5, 0.1), _run(0.7, 0.1)])
    report = {"config": {"recipe": "configs/grpo/tiny-cpu.yaml", "seeds": [0, 1], "steps": 1}, "command": "c",
              "machine": {"summary": "m"}, "model": "tiny", "eval": {"n_tasks": 4, "passes": 2}, "total_s": 60,
              "stats_rule": "r", "sft_start": stats, "reference_arm": "graded", "repair": None, "kpass": {},
              "arms": {a: {"title": a, "runs": [{"steps": 1}], "summary": stats} for a in ("graded", "binary")},
              "comparisons": {"binary": compare(stats, stats)},
              "plots": ["/abs/report/ablations_arms.png", "/abs/report/ablations_kpass.png"]}
    md = markdown(report)
    assert "| graded |" in md and "| binary |" in md and "| SFT start |" in md and "+0.000" in md
    # the plots sit beside ABLATIONS.md: shown inline by file name, never by the writer's absolute path
    assert "![ablations_arms](ablations_arms.png)" in md and "![ablations_kpass](ablations_kpass.png)" in md
    assert "/abs/report" not in md


def _summary(f1: float, tnr: float, se: float = 0.05) -> dict:
    return {"rough_bal_f1": {"mean": f1, "se": se}, "rough_tnr": {"mean": tnr, "se": se}}


@pytest.mark.parametrize(("arms", "chosen"), [
    # balanced gains most and keeps TNR -> chosen
    ({"training": (0.52, 0.50), "balanced": (0.58, 0.56)}, "balanced"),
    # training gains most but lowers TNR by 0.11 (> 1 SE of the difference, 0.0707): the next best is chosen
    ({"training": (0.60, 0.45), "polarity": (0.55, 0.55)}, "polarity"),
    # no arm raises Balanced F1: none (the recipes keep the paper's scale)
    ({"training": (0.47, 0.45), "balanced": (0.34, 0.75)}, None),
])
def test_the_default_incentive_rule(arms: dict, chosen: str | None) -> None:
    from ablate.driver import choose_incentive

    report = {"sft_start": _summary(0.50, 0.56),
              "arms": {a: {"summary": _summary(f1, tnr)} for a, (f1, tnr) in arms.items()}}
    got = choose_incentive(report)
    assert got["arm"] == chosen
    assert {c["arm"] for c in got["candidates"]} == set(arms)


def test_the_report_compares_the_cores_metrics_under_the_cores_names() -> None:
    from proofcheck.metrics import EVAL_METRICS

    assert set(METRICS) <= set(EVAL_METRICS)


@pytest.mark.parametrize(("report", "says"), [
    # the full ablation of 2026-12-05/06: four calls on runs/ablate, the last one (12.1 min) wrote the report
    ({"total_s": 728.5, "calls": [{"total_s": 7988}, {"total_s": 6300}, {"total_s": 900}, {"total_s": 728.5}]},
     "Wall time 4.4 h, the sum of 4 calls on the same runs folder (133 + 105 + 15 + 12 min)."),
    ({"total_s": 90, "calls": [{"total_s": 90}]}, "Wall time 1.5 min, the sum of 1 call on the same runs folder (2 min)."),
    ({"total_s": 728.5}, "Wall time of this call 12.1 min (earlier calls that finished runs it reused are not recorded)."),
])
def test_the_report_states_the_runs_wall_time_over_its_calls(report: dict, says: str) -> None:
    assert wall_time_line(report) == says
