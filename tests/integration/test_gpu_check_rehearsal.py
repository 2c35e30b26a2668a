"""The GPU check rehearsed on the CPU, so the first run on the borrowed H200 is not its first run.

`benchmarks/gpu_check.sh --device cpu` runs every stage (preflight, machine, build, plan, train,
decide, resume) on the tiny model through the same script, driver and stage code, with this
interpreter as the machine's `python3`, a fake $OUT and the work folder in tmp; a second test drives
a stage past its limit. The GPU run itself is marked `gpu`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.sh"
STAGES = ["preflight", "machine", "build", "plan", "train", "decide", "resume"]


def _check(args: list[str], out: Path, timeout_s: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PY": sys.executable, "OUT": str(out)}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout_s)


@pytest.mark.slow
def test_every_stage_passes_on_the_tiny_model_and_at_most_8_small_files_come_back(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    out, work = tmp_path / "OUT", tmp_path / "work"
    proc = _check(["--device", "cpu", "--work", str(work)], out)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check.md", "stage_logs.txt"]
    doc = json.loads((out / "gpu_check.json").read_text())
    assert {n: s["status"] for n, s in doc["stages"].items()} == dict.fromkeys(STAGES, "ok")
    assert doc["out"]["copied"] == ["gpu_check.json", "gpu_check.md", "stage_logs.txt"] and not doc["out"]["left_out"]
    assert doc["preflight"]["import_failures"] == []
    assert doc["build"]["vocab_size"] == len(AutoTokenizer.from_pretrained(work / "model"))  # the tiny model's own
    sizes = doc["settings"]["sizes"]
    train = doc["train"]
    assert train["generation"] == "transformers" and train["global_step"] == sizes["steps"]
    assert train["eval"]["passes"] == sizes["eval_proofs"] * sizes["eval_passes"]
    assert train["step_split_s"]["generation"] > 0 and train["mfu_optimisation"] > 0
    assert doc["plan"]["peak_gib"] > 0 and doc["plan"]["prompt_tokens"] > 0
    decide = doc["decide"]
    assert len(decide["proofs"]) == sizes["decide_proofs"]
    assert all(sum(p["votes"].values()) == 8 for p in decide["proofs"])
    assert decide["roofline"]["tokens_per_s"] > 0
    resume = doc["resume"]
    assert resume["killed_returncode"] == -9 and resume["ok"]
    step = int(resume["newest_complete"].split("-")[1])
    assert step > sizes["steps"] and resume["start_step"] == step and resume["global_step"] == step + 1
    assert resume["reward_steps"] == list(range(1, step + 2))
    report = (out / "gpu_check.md").read_text()
    assert all(f"## {s}" in report for s in ("plan", "train", "decide", "resume"))
    assert all(f"===== {s} " in (out / "stage_logs.txt").read_text() for s in STAGES)


def test_a_stage_past_its_limit_is_killed_and_the_stages_after_a_required_one_are_skipped(tmp_path: Path) -> None:
    out, work = tmp_path / "OUT", tmp_path / "work"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check"), "--device", "cpu", "--work",
                           str(work), "--out", str(out), "--only", "build,plan", "--stage-limit", "build=1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "stage 'build' did not finish within its 1 s limit" in proc.stdout
    doc = json.loads((out / "gpu_check.json").read_text())
    assert doc["stages"]["build"]["status"] == "timed_out"
    assert doc["stages"]["plan"] == {"status": "skipped", "reason": "an earlier required stage failed"}
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check.md", "stage_logs.txt"]


@pytest.mark.gpu
@pytest.mark.slow
def test_the_gpu_check_passes_on_this_gpu(tmp_path: Path) -> None:
    proc = _check([], tmp_path / "OUT", timeout_s=700)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
