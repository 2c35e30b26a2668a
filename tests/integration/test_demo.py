"""`proofcheck demo` runs end to end on CPU and re-uses what it built."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_and_reports(tmp_path):
    cmd = [sys.executable, "-m", "proofcheck.cli", "demo", "--workdir", str(tmp_path / "demo"),
           "--proofs", "2", "--passes", "8", "--max-tokens", "24"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "validate shipped data" in out.stdout and "all valid" in out.stdout
    assert "rough_bal_f1=" in out.stdout and "verifier_valid_rate=" in out.stdout
    assert (tmp_path / "demo" / "model" / "tiny_model.json").is_file()


def test_demo_names_the_failed_stage(tmp_path):
    workdir = tmp_path / "demo"
    workdir.mkdir()
    (workdir / "model").write_text("not a folder")  # the model stage cannot write here
    out = subprocess.run([sys.executable, "-m", "proofcheck.cli", "demo", "--workdir", str(workdir)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "stage 'build tiny model' failed" in out.stderr
