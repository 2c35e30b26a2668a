"""The ablation's rejection-sampling arm (benchmarks/ablate/rejection.py), plumbing only, on the tiny model: the
verifications come from a scripted endpoint that answers each GRPO task's gold verification in one pass and an
unparsable answer in the other, so exactly one pass per task is kept (EXACT_MATCH) and one counted invalid; SFT
continues from the start on the kept ones only, and the arm is evaluated as every arm is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proofcheck.serve.scripted import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
TASKS = 4


@pytest.mark.slow
def test_the_rejection_arm_keeps_graded_passes_trains_on_them_and_is_evaluated(tmp_path: Path) -> None:
    out = tmp_path / "abl"

    def teacher(req: dict, i: int) -> Reply:
        tasks = [json.loads(x) for x in (out / "data" / "grpo.jsonl").open(encoding="utf-8")]
        prompt = req["messages"][-1]["content"]
        task = next(t for t in tasks if all(s in prompt for s in t["steps"]))
        return Reply([task["gold_verification"], "no verdict here"][:int(req.get("n") or 1)])

    with ScriptedServer(teacher) as srv:
        cmd = [sys.executable, str(REPO / "benchmarks" / "ablate"), "--quick", "--model", "tiny", "--seeds", "0",
               "--steps", "1", "--arms", "training,rejection", "--out", str(out), "--report-dir",
               str(tmp_path / "report"), "--json", str(tmp_path / "ablations.json"), "--rejection-endpoint", srv.url,
               "--sizes", f"sft_tasks=8,sft_steps=2,grpo_tasks=8,eval_tasks=4,eval_passes=2,kpass_tasks=4,"
                          f"kpass_max=2,max_tokens=16,rejection_tasks={TASKS},rejection_passes=2",
               "--grpo-override", "use_vllm=false", "--grpo-override", "max_completion_length=16",
               "--grpo-override", "eval_max_new_tokens=16"]
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=REPO)
    assert got.returncode == 0, got.stdout[-4000:] + got.stderr[-4000:]
    report = json.loads((tmp_path / "ablations.json").read_text())
    (run,) = report["arms"]["rejection"]["runs"]
    assert (run["sampled"], run["kept"], run["invalid"], run["grader_failures"]) == (2 * TASKS, TASKS, TASKS, 0)
    assert run["levels"] == {"EXACT_MATCH": TASKS} and run["steps"] >= 1 and run["after"]["n_proofs"] == 4
    gold = {t["proof_id"]: t["gold_verification"] for t in map(json.loads, (out / "data" / "grpo.jsonl").open())}
    kept = [json.loads(x) for x in (out / "runs" / "rejection-s0" / "kept_tasks.jsonl").open(encoding="utf-8")]
    assert len(kept) == TASKS and all(t["gold_verification"] == gold[t["proof_id"]] for t in kept)
    plan = json.loads((out / "runs" / "rejection-s0" / "model" / "sft_plan.json").read_text())
    assert plan["time_budget_s"] is not None  # SFT for the GRPO arm's time less the sampling's
    assert "rejection" in (tmp_path / "report" / "ABLATIONS.md").read_text()
