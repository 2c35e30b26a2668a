"""`proofcheck demo --quick`: every stage runs end to end on CPU (tiny model, small sizes), re-runs
reuse, failures are named. The default (SmolLM2) demo is `make demo`, timed in the closing notes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from proofcheck.allocator import choose_allocator

# the dtype forced to fp32 (issue: the SFT -> GRPO -> evaluation path on any CPU, bf16 or not)
SMALL = ["--quick", "--dtype", "fp32", "--sft-steps", "6", "--grpo-steps", "2", "--sft-tasks", "16", "--grpo-tasks", "16",
         "--eval-tasks", "4", "--eval-passes", "2", "--passes", "2", "--repeats", "1", "--max-tokens", "16",
         "--curve-every", "1", "--curve-tasks", "2"]


@pytest.mark.slow
def test_demo_runs_every_stage_and_reuses_on_rerun(tmp_path):
    work = tmp_path / "demo"
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "demo", "--workdir", str(work), *SMALL]
    # from a working directory outside the checkout: the installed package finds its scripts and recipes
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=elsewhere)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for stage in ("build the model", "validate shipped data", "build the curriculum", "supervised warm-up",
                  "GRPO", "serve the trained verifier"):
        assert stage in out.stdout, stage
    assert "before GRPO" in out.stdout and "after GRPO" in out.stdout and "GRPO step split" in out.stdout
    grpo = json.loads((work / "grpo" / "run_summary.json").read_text())
    assert grpo["global_step"] == 2 and grpo["generation"] == "vllm-colocate"
    assert [e["step"] for e in grpo["eval_history"]] == [0, 2]
    assert all(e["generation"] == "vllm-colocate" and e["n_proofs"] == 4 for e in grpo["eval_history"])
    # the learning curve: a point on the first 2 held-out proofs at every step (0 and 2 from the full evaluations)
    assert [(c["step"], c["n_proofs"], c["n_passes"]) for c in grpo["curve"]] == [(0, 2, 4), (1, 2, 4), (2, 2, 4)]
    assert "Learning curve" in out.stdout and "curve: Balanced F1" in out.stdout
    summary = json.loads((work / "summary.json").read_text())
    assert summary["model"].startswith("tiny") and summary["curve"] == grpo["curve"]
    # the tiny recipe plus named deltas (the quick mode's and the command line's sizes), printed and recorded
    assert summary["recipe"]["path"] == "configs/grpo/tiny-cpu.yaml" and "recipe configs/grpo/tiny-cpu.yaml + " in out.stdout
    deltas = summary["recipe"]["deltas"]
    assert deltas["learning_rate"]["value"] == 5e-4 and deltas["max_steps"] == {"value": 2, "reason": "set by the caller"}
    assert "deltas" not in summary["config"]
    # one dtype everywhere, read back from each stage: SFT's plan, TRL's autocast, the colocated engine itself
    plan = summary["plan"]
    assert summary["dtype"] == "float32" and plan["dtype"]["source"] == "--dtype"
    sft_plan = json.loads((work / "sft" / "sft_plan.json").read_text())
    assert sft_plan["dtype"]["dtype"] == "float32" and sft_plan["flush_denormal"] is True   # both stages flush
    assert grpo["precision"] == {"train_bf16": False, "vllm_dtype": "float32", "flush_denormal": True}
    assert plan["sft"]["steps"] == 6 and plan["grpo"]["steps"] == 2      # the tiny model fits its maxima
    # the allocator is chosen once (TCMalloc where installed: `make test-deps` installs it as root) and read back
    # from each stage's own memory map
    expected = choose_allocator().name
    assert plan["allocator"]["allocator"] == expected, plan["allocator"]
    assert sft_plan["allocator"] == grpo["allocator"] == expected
    assert plan["sft"]["first_step_s"] > 0 and plan["grpo"]["median_step_s"] > 0
    assert "plan: " in out.stdout and "plan carried out: fp32: SFT 6 of at most 6 steps" in out.stdout
    for when in ("before_grpo", "after_grpo"):
        m = summary[when]
        assert m["n_tasks"] == 4 and m["passes"] == 2
        for k in ("rough_bal_f1", "rough_tpr", "rough_tnr", "valid_rate", "reward_mean", "first_error_step_accuracy"):
            assert k in m and f"{k}_se" in m
    assert set(summary["grpo_step_split_s"]) >= {"generation", "weight_sync", "reward", "train", "total"}
    assert summary["stage_times_s"] and summary["total_s"] > 0
    for path in ("prover/summary.json", "prover/report.md", "prover/votes.png", "verifier/summary.json",
                 "verifier/tpr_tnr.png", "reward_per_step.png", "learning_curve.png", "data/eval.jsonl", "data/sft.jsonl"):
        assert (work / path).stat().st_size > 0, path
    prover = json.loads((work / "prover" / "summary.json").read_text())
    assert prover["n_records"] == 25 and prover["passes"] == 2
    # a re-run reuses the model, data, checkpoints and scoring records: no training, no new records
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((work / "grpo" / "run_summary.json").read_text()) == grpo
    assert len((work / "prover" / "records.jsonl").read_text().splitlines()) == 25


def test_demo_names_the_failed_stage(tmp_path):
    workdir = tmp_path / "demo"
    workdir.mkdir()
    (workdir / "model").write_text("not a folder")  # the model stage cannot write here
    out = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "demo", "--quick", "--workdir", str(workdir)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "stage 'build the model: tiny (random weights)' failed" in out.stderr


@pytest.mark.slow
def test_demo_without_scoring_stops_after_the_held_out_evaluation(tmp_path):
    """`--no-score` (leave one family out): SFT and GRPO with both held-out evaluations, nothing served or scored."""
    work = tmp_path / "demo"
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "demo", "--workdir", str(work), "--no-score",
           "--exclude-family", "parity", *SMALL]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "GRPO" in out.stdout and "serve the trained verifier" not in out.stdout
    assert "no scoring (--no-score)" in " ".join(out.stdout.split())   # rich wraps the plan's line
    summary = json.loads((work / "summary.json").read_text())
    assert summary["scoring"] is None and summary["plan"]["score_reserve_s"] == 0.0
    assert summary["after_grpo"]["n_tasks"] == 4 and summary["after_grpo"]["by_family"]
    assert not (work / "prover").exists() and not (work / "verifier").exists()
    assert "Not served or scored (--no-score)" in (work / "report.md").read_text()
