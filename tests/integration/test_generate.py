"""`proofcheck generate`: prover submissions from an endpoint, failed samples kept, scoring accepts them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proofcheck.data.loaders import SAMPLES_DIR, load_records
from proofcheck.parsing import format_verdict
from proofcheck.serve.scripted import Reply, ScriptedServer

PROBLEMS = SAMPLES_DIR / "problems.jsonl"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", *args], capture_output=True, text=True, timeout=600)


def three_problems(tmp_path: Path) -> Path:
    p = tmp_path / "problems.jsonl"
    p.write_text("".join(PROBLEMS.read_text().splitlines(keepends=True)[:3]))
    return p


def prover(req: dict, i: int) -> Reply:
    """Sample 0 a stepped proof, sample 1 cut off, sample 2 empty (per request with n=3)."""
    system = req["messages"][0]["content"]
    if "writing rigorous proofs" not in system:  # a verifier call
        return Reply([format_verdict("ok", [], -1)] * int(req.get("n") or 1))
    assert "Reference solution" not in req["messages"][-1]["content"]  # the prover never sees it
    return Reply(["<step>First.</step>\n<step>Second.</step>", "<step>Cut", ""], finish_reason="stop")


def test_generate_keeps_failed_samples_and_feeds_scoring(tmp_path):
    problems = three_problems(tmp_path)
    out = tmp_path / "subs.jsonl"
    with ScriptedServer(prover) as srv:
        r = cli("generate", "--problems", str(problems), "--endpoint", srv.url, "--endpoint-model", "prover", "--samples", "3",
                "--out", str(out))
        assert r.returncode == 0, r.stderr[-2000:]
        subs = load_records(out, "submission")
        assert len(subs) == 9
        ok = [s for s in subs if not s.failed]
        assert len(ok) == 3 and all(s.step_list() == ["First.", "Second."] for s in ok)
        failed = [json.loads(x) for x in out.read_text().splitlines() if json.loads(x).get("failed")]
        assert {("empty" in f["failure"]) or ("no closed" in f["failure"]) for f in failed} == {True}
        again = cli("generate", "--problems", str(problems), "--endpoint", srv.url, "--endpoint-model", "prover", "--out",
                    str(out))
        assert again.returncode == 1 and "--resume" in again.stderr
        resumed = cli("generate", "--problems", str(problems), "--endpoint", srv.url, "--endpoint-model", "prover",
                      "--samples", "3", "--out", str(out), "--resume")
        assert resumed.returncode == 0 and len(out.read_text().splitlines()) == 9
        score = cli("score", "prover", "--problems", str(problems), "--submissions", str(out), "--endpoint", srv.url,
                    "--endpoint-model", "verifier", "--passes", "2", "--out", str(tmp_path / "score"), "--json")
        assert score.returncode == 0, score.stderr[-2000:]
    summary = json.loads((tmp_path / "score" / "summary.json").read_text())
    # one valid accepted sample of three per problem; failed samples score 0 without a verifier call
    assert abs(summary["pessimistic"] - 1 / 3) < 1e-9 and summary["pass_any_sample"] == 1.0
    records = [json.loads(x) for x in (tmp_path / "score" / "records.jsonl").read_text().splitlines()]
    assert sum(1 for x in records if x["failed"] and not x["verifier_trials"]) == 6


def test_generate_against_vllm_truncation_is_a_failed_sample(vllm_server, tmp_path):
    """One token per sample cannot hold a stepped proof: it is either the end-of-turn token (an empty
    answer) or a cut-off (finish_reason length). Every sample is therefore a failed one, raw text kept."""
    problems = three_problems(tmp_path)
    out = tmp_path / "subs.jsonl"
    r = cli("generate", "--problems", str(problems), "--endpoint", vllm_server.url, "--endpoint-model", "tiny", "--samples",
            "2", "--max-tokens", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "6 submissions (6 failed generations" in r.stdout
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 6
    for rec in recs:
        assert rec["failed"] is True and "raw" in rec and "proof" not in rec and "steps" not in rec
        assert rec["failure"] in ("generation not finished (finish_reason=length)", "empty answer"), rec
