"""`proofcheck demo`: every stage runs end to end on CPU (small sizes), re-runs reuse, failures are named."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SMALL = ["--sft-steps", "4", "--grpo-steps", "2", "--synthetic", "16", "--eval-tasks", "4", "--passes", "2",
         "--repeats", "1", "--max-tokens", "16"]


@pytest.mark.slow
def test_demo_runs_every_stage_and_reuses_on_rerun(tmp_path):
    work = tmp_path / "demo"
    cmd = [sys.executable, "-m", "proofcheck.cli", "demo", "--workdir", str(work), *SMALL]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for stage in ("build tiny model", "validate shipped data", "build training set", "supervised warm-up",
                  "evaluate before GRPO", "GRPO", "evaluate after GRPO", "serve the trained verifier"):
        assert stage in out.stdout, stage
    assert "Learning signal" in out.stdout and "after GRPO" in out.stdout
    summary = json.loads((work / "grpo" / "run_summary.json").read_text())
    assert summary["global_step"] == 2 and summary["generation"] == "vllm-colocate"
    for path in ("prover/summary.json", "prover/report.md", "prover/votes.png", "verifier/summary.json",
                 "verifier/tpr_tnr.png", "reward_per_step.png", "eval_before.json", "eval_after.json"):
        assert (work / path).stat().st_size > 0, path
    prover = json.loads((work / "prover" / "summary.json").read_text())
    assert prover["n_records"] == 25 and prover["passes"] == 2
    # a re-run reuses the model, data, checkpoints and scoring records: no training, no new records
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((work / "grpo" / "run_summary.json").read_text()) == summary
    assert len((work / "prover" / "records.jsonl").read_text().splitlines()) == 25


def test_demo_names_the_failed_stage(tmp_path):
    workdir = tmp_path / "demo"
    workdir.mkdir()
    (workdir / "model").write_text("not a folder")  # the model stage cannot write here
    out = subprocess.run([sys.executable, "-m", "proofcheck.cli", "demo", "--workdir", str(workdir)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "stage 'build tiny model' failed" in out.stderr
