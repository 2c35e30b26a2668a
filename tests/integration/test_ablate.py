"""`benchmarks/ablate`, --quick-shaped on the tiny model at the smallest sizes: every arm trains (one
GRPO step; the control continues SFT), is evaluated on the held-out proofs, and lands in the JSON (fixed
keys) and in ABLATIONS.md; the repaired arm's rows come through `proofcheck data repair`; the k-pass curve
is drawn from a served verifier. Plumbing only: no learning result is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARMS = ("training", "benchmark", "balanced", "polarity", "repaired", "sft_control")
METRICS = ("rough_bal_f1", "rough_tpr", "rough_tnr", "first_error_step_accuracy", "valid_rate", "kpass_bal_f1",
           "kpass_tpr", "kpass_tnr")
TOP_KEYS = {"schema", "command", "machine", "model", "config", "eval", "stats_rule", "reference_arm", "sizing",
            "sft_start", "arms", "repair", "kpass", "stage_times_s", "comparisons", "choice", "total_s", "calls", "plots", "recipe"}


@pytest.mark.slow
def test_every_arm_trains_evaluates_and_lands_in_the_report(tmp_path):
    out, report_dir, js = tmp_path / "abl", tmp_path / "report", tmp_path / "ablations.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "ablate"), "--quick", "--model", "tiny", "--seeds", "0",
           "--steps", "1", "--arms", ",".join(ARMS), "--out", str(out), "--report-dir", str(report_dir), "--json", str(js),
           "--sizes", "sft_tasks=8,sft_steps=2,grpo_tasks=8,eval_tasks=4,eval_passes=2,repair_pairs=2,"
                      "kpass_tasks=4,kpass_max=2,max_tokens=16,repaired_share=0.5",
           "--grpo-override", "use_vllm=false", "--grpo-override", "max_completion_length=16",
           "--grpo-override", "eval_max_new_tokens=16"]
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=REPO)
    assert got.returncode == 0, got.stdout[-4000:] + got.stderr[-4000:]
    report = json.loads(js.read_text())
    assert set(report) == TOP_KEYS and report["schema"] == "proofcheck.ablations/1"
    # the tiny recipe plus the named deltas: the demo's quick ones, --steps and --sizes as the caller's
    assert report["recipe"]["path"].endswith("tiny-cpu.yaml")
    deltas = report["recipe"]["deltas"]
    assert {k: deltas[k]["value"] for k in ("max_steps", "eval_max_samples", "eval_passes")} == {
        "max_steps": 1, "eval_max_samples": 4, "eval_passes": 2} and deltas["learning_rate"]["value"] == 5e-4
    assert "recipe configs/grpo/tiny-cpu.yaml + deltas: max_steps=1" in got.stdout
    assert list(report["arms"]) == list(ARMS)
    for arm in ARMS:
        (run,) = report["arms"][arm]["runs"]
        assert run["seed"] == 0 and run["after"]["n_proofs"] == 4, arm
        assert all(m in run["after"] and f"{m}_se" in run["after"] for m in METRICS), arm
        assert set(report["arms"][arm]["summary"]) == set(METRICS), arm
        assert run["steps"] >= 1 if arm == "sft_control" else run["steps"] == 1, arm  # control: SFT steps
    # each GRPO arm trained its one step on its own incentive; the control trained SFT steps for its time
    # (only the first arm, `training`, evaluates the shared SFT start too)
    for arm in ARMS[:5]:
        summary = json.loads((out / "runs" / f"{arm}-s0" / "run_summary.json").read_text())
        assert summary["global_step"] == 1, arm
        assert [e["step"] for e in summary["eval_history"]] == ([0, 1] if arm == "training" else [1]), arm
        scale = arm if arm != "repaired" else None
        if arm == "repaired":  # its repaired positives are trained on (the curriculum keeps every row once)
            assert summary["data"]["train_by_origin"].get("repaired", 0) >= 1, summary["data"]
        assert (["--reward_scale", scale] if scale else []) == summary["ablate_overrides"][:2 if scale else 0], arm
        diag = summary["step_diagnostics"]
        # one prompt a step at these sizes: its class's accept rate, the level mix and TRL's spread/length keys
        assert len(diag) == 1 and {"checking/accept_rate_valid", "checking/accept_rate_flawed"} & set(diag[0]), arm
        assert {"checking/level/invalid", "frac_reward_zero_std", "completions/clipped_ratio"} <= set(diag[0]), arm
        assert sum(v for k, v in diag[0].items() if k.startswith("checking/level/")) == pytest.approx(1.0), arm
    assert report["sft_start"]["rough_bal_f1"]["n"] == 1
    assert report["sizing"]["seeds"] == [0] and report["sizing"]["steps"] == 1
    assert report["choice"]["arm"] in (*ARMS[:4], None)
    assert {c["arm"] for c in report["choice"]["candidates"]} <= set(ARMS[:4])
    assert (out / "runs" / "sft_control-s0" / "model" / "config.json").is_file()
    assert report["arms"]["sft_control"]["runs"][0]["time_budget_s"] >= 1
    # repaired positives: through the repair path, same row count as every other arm
    rep = report["repair"]
    assert rep["n_accepted"] == 2 and rep["n_used"] == 2 and rep["rows"] == 8
    rows = [json.loads(x) for x in (out / "data" / "grpo_repaired.jsonl").read_text().splitlines()]
    assert sum(r["origin"] == "repaired" for r in rows) == 2 and sum(r["is_correct"] for r in rows) == 4
    # k-pass curve: every rule at k = 1, 2, on held-out and shipped annotated proofs
    kp = report["kpass"]
    assert kp["ks"] == [1, 2] and kp["heldout_n"] == 4 and kp["annotated_n"] == 48
    for where in ("heldout", "annotated"):
        assert set(kp[where]) == {"unanimous", "majority", "any"}
        for per_k in kp[where].values():
            assert set(per_k) == {"1", "2"}
            assert {"tpr", "tnr", "bal_f1", "tokens_per_proof"} <= set(per_k["2"])
    assert set(report["comparisons"]) == set(ARMS[1:])
    md = (report_dir / "ABLATIONS.md").read_text()
    assert report["calls"][-1]["total_s"] == report["total_s"] and "Wall time" in md  # this call, in the ledger
    for arm in ARMS:
        assert f"| {arm} |" in md, arm
    assert "k-pass curve" in md and report["command"].startswith("python benchmarks/ablate ")
    assert all(Path(p).is_file() for p in report["plots"]) and len(report["plots"]) == 2
