"""benchmarks/gpu_check and train_real.py cannot hang: a stage that outruns its limit is killed
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
    from gpu_check.driver import run_stage

    pid_file = tmp_path / "child.pid"
    t0 = time.monotonic()
    assert run_stage("train", [sys.executable, "-c", HANG, str(pid_file)], 3, tmp_path / "train.log") is None
    assert time.monotonic() - t0 < 60
    said = capsys.readouterr().out
    assert "stage 'train' did not finish within its 3 s limit" in said and str(tmp_path / "train.log") in said
    assert _dead(int(pid_file.read_text()))


def test_gpu_check_stage_failure_and_success_are_told_apart(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from gpu_check.driver import run_stage

    assert run_stage("plan", [sys.executable, "-c", "import sys; sys.exit(3)"], 30, tmp_path / "p.log") is None
    assert "stage 'plan' failed (exit 3)" in capsys.readouterr().out
    assert run_stage("plan", [sys.executable, "-c", "print('# plan: x')"], 30, tmp_path / "p.log") == "# plan: x"


def test_train_real_run_past_its_limit_stops_with_a_message(tmp_path: Path) -> None:
    from train_real import run_bounded

    pid_file = tmp_path / "child.pid"
    with pytest.raises(SystemExit, match="GRPO run: no end after 3 s"):
        run_bounded([sys.executable, "-c", HANG, str(pid_file)], 3, "GRPO run")
    assert _dead(int(pid_file.read_text()))


# --- the check's driver: what goes back through $OUT, which stage may run, the limits given ---

@pytest.mark.parametrize(("n_files", "copied"), [(3, 3), (8, 8), (11, 8)])
def test_copy_out_brings_back_at_most_8_files(tmp_path: Path, n_files: int, copied: int) -> None:
    from gpu_check.driver import copy_out

    files = [tmp_path / f"f{i}.txt" for i in range(n_files)]
    for f in files:
        f.write_text(f.name)
    done = copy_out(files, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(f.name for f in files[:copied])
    assert len(done["left_out"]) == n_files - copied


def test_copy_out_cuts_a_large_file_to_its_tail_and_leaves_out_odd_names(tmp_path: Path) -> None:
    from gpu_check.driver import copy_out

    big, odd = tmp_path / "big.log", tmp_path / "odd name.txt"
    big.write_bytes(b"a" * 50 + b"END")
    odd.write_text("x")
    done = copy_out([big, odd, tmp_path / "missing.json"], tmp_path / "out", max_bytes=10)
    assert (tmp_path / "out" / "big.log").read_bytes() == b"aaaaaaaEND"
    assert done["truncated"] == ["big.log"] and done["copied"] == ["big.log"] and len(done["left_out"]) == 2


@pytest.mark.parametrize(("statuses", "left", "blocked"), [
    ({"build": "ok", "machine": "ok"}, 100.0, None),
    ({"build": "ok", "machine": "failed"}, 100.0, "needs stage 'machine', which failed"),
    ({"build": "timed_out", "machine": "ok"}, 100.0, "needs stage 'build', which timed out"),
    ({"build": "ok"}, 100.0, "needs stage 'machine', which did not run"),
    ({"build": "ok", "machine": "ok"}, 5.0, "5 s left of the budget"),
])
def test_a_stage_runs_only_after_the_stages_it_needs(statuses: dict, left: float, blocked: str | None) -> None:
    from gpu_check.driver import STAGES, blocked_by

    decide = next(s for s in STAGES if s.name == "decide")
    got = blocked_by(decide, {"stages": {k: {"status": v} for k, v in statuses.items()}}, left)
    assert got == blocked if blocked is None else blocked in got


def test_stage_limits_are_parsed_and_unknown_stages_refused() -> None:
    from gpu_check.driver import parse_limits

    assert parse_limits(["train=30", "build=1.5"]) == {"train": 30.0, "build": 1.5}
    with pytest.raises(SystemExit, match="NAME one of"):
        parse_limits(["serve=30"])


# --- preflight: versions against the project's pins ---

@pytest.mark.parametrize(("here", "differs"), [("2.11.0+cu130", True), ("2.13.0+cpu", False), ("2.13.0", False),
                                               (None, True)])
def test_version_differences_ignore_local_build_tags(monkeypatch: pytest.MonkeyPatch, here: str | None,
                                                    differs: bool) -> None:
    import gpu_check.stages as _gpu_stages

    monkeypatch.setattr(_gpu_stages, "installed", lambda name: here)
    got = _gpu_stages.version_differences({"torch": "2.13.0"}, ("torch", "vllm"))  # vllm: no pin given, not listed
    assert got == ({"torch": {"pinned": "2.13.0", "here": here}} if differs else {})


def test_project_pins_read_pyproject_and_the_torch_pin_vllm_implies() -> None:
    from gpu_check.stages import project_pins

    pins = project_pins()
    assert pins["torch"] == "2.13.0" and pins["trl"] == "1.16.0" and pins["pydantic"] == "2.14.4"


def test_the_checkout_is_importable_from_links(tmp_path: Path) -> None:
    import subprocess

    from gpu_check.site_links import link_project

    link_project(tmp_path / "site")
    code = "import proofcheck.train.plan as p, proofcheck.data.loaders as d; print(p.__file__); print(d.SAMPLES_DIR)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(tmp_path / "site")}).stdout.split()
    assert out[0].startswith(str(tmp_path / "site")) and Path(out[1]) == REPO / "data" / "samples"


# --- the in-process transformers engine's early stop (benchmarks/gpu_check/hf_engine.py) ---

class _Tok:
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(f"<{i}>" for i in ids)


@pytest.mark.parametrize(("ids", "cancelled", "expected"), [
    ([5, 6, 2, 0, 0], False, ("<5><6>", "stop", 3, False)),
    ([5, 6, 7], False, ("<5><6><7>", "length", 3, False)),
    ([5, 6, 7], True, ("<5><6><7>", None, 3, True)),
])
def test_a_generated_sequence_becomes_a_pass(ids: list[int], cancelled: bool, expected: tuple) -> None:
    from gpu_check.hf_engine import _pass_from

    p = _pass_from(ids, 0, {2}, _Tok(), cancelled)
    assert (p.text, p.finish_reason, p.completion_tokens, p.cancelled) == expected


def test_the_first_deciding_pass_stops_every_sequence() -> None:
    import torch
    from gpu_check.hf_engine import _DecisionStop

    seen: list[int] = []

    def stop_when(finished: list) -> bool:  # decided once two passes have ended
        seen.append(len(finished))
        return len(finished) >= 2

    state = _DecisionStop(prompt_len=1, eos={2}, tokenizer=_Tok(), stop_when=stop_when)
    steps = [[9, 9, 9], [5, 5, 2], [5, 2, 0]]  # one row per position (the first is the prompt), 3 sequences
    assert state.check(torch.tensor(steps[:2]).T).tolist() == [False, False, True]  # sequence 2 ended
    assert state.check(torch.tensor(steps).T).tolist() == [True, True, True]  # sequence 1 ended: decided
    assert state.finished[1].completion_tokens == 2 and state.finished[2].text == ""
    assert state.decided and seen == [1, 2] and sorted(state.finished) == [1, 2]
