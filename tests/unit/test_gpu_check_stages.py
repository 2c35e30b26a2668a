"""benchmarks/gpu_check.py and train_real.py cannot hang: a stage that outruns its limit is killed
with its child processes (a vLLM engine's workers would keep the GPU) and reported by name."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

# a stage that starts a child (as vLLM starts its engine core) and then never ends
HANG = ("import subprocess, sys, time, pathlib; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "pathlib.Path(sys.argv[1]).write_text(str(c.pid)); print('started', flush=True); time.sleep(120)")


def _dead(pid: int) -> bool:
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a killed child stays a zombie until its parent (gone) is reaped by init
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return True
        time.sleep(0.1)
    return False


def test_gpu_check_stage_past_its_limit_is_killed_with_its_children(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    from gpu_check import run_stage

    pid_file = tmp_path / "child.pid"
    t0 = time.monotonic()
    assert run_stage("train", [sys.executable, "-c", HANG, str(pid_file)], 3, tmp_path / "train.log") is None
    assert time.monotonic() - t0 < 60
    said = capsys.readouterr().out
    assert "stage 'train' did not finish within its 3 s limit" in said and str(tmp_path / "train.log") in said
    assert _dead(int(pid_file.read_text()))


def test_gpu_check_stage_failure_and_success_are_told_apart(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from gpu_check import run_stage

    assert run_stage("plan", [sys.executable, "-c", "import sys; sys.exit(3)"], 30, tmp_path / "p.log") is None
    assert "stage 'plan' failed (exit 3)" in capsys.readouterr().out
    assert run_stage("plan", [sys.executable, "-c", "print('# plan: x')"], 30, tmp_path / "p.log") == "# plan: x"


def test_train_real_run_past_its_limit_stops_with_a_message(tmp_path: Path) -> None:
    from train_real import run_bounded

    pid_file = tmp_path / "child.pid"
    with pytest.raises(SystemExit, match="GRPO run: no end after 3 s"):
        run_bounded([sys.executable, "-c", HANG, str(pid_file)], 3, "GRPO run")
    assert _dead(int(pid_file.read_text()))
