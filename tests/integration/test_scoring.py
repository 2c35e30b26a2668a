"""ProverBench / VerifierBench scoring runs: end to end, crash safety, faults, bad input."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proofcheck.data.loaders import SAMPLES_DIR
from proofcheck.parsing import format_verdict
from proofcheck.serve.scripted import Reply, ScriptedServer

PROBLEMS = str(SAMPLES_DIR / "problems.jsonl")
SUBMISSIONS = str(SAMPLES_DIR / "submissions.jsonl")
ANNOTATED = str(SAMPLES_DIR / "annotated.jsonl")


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def drop_timing(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in ("wall_time_s_this_run", "verification_time_s")}


def test_score_prover_against_vllm_end_to_end(vllm_server, tmp_path):
    out = tmp_path / "prover"
    r = cli("score", "prover", "--problems", PROBLEMS, "--submissions", SUBMISSIONS, "--endpoint", vllm_server.url,
            "--endpoint-model", "tiny", "--passes", "8", "--max-tokens", "24", "--seed", "0", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 25 and len({x["proof_id"] for x in records}) == 25
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_records"] == 25 and summary["passes"] == 8
    for name in ("report.md", "accuracy_by_split.png", "accuracy_by_subject.png", "votes.png"):
        assert (out / name).stat().st_size > 0, name
    again = cli("metrics", "--records", str(out / "records.jsonl"))
    assert again.returncode == 0, again.stderr
    assert drop_timing(json.loads(again.stdout)) == drop_timing(summary)
    # unanimity with early reject: a rejected proof has its remaining passes cancelled or all 8 recorded
    assert all(len(x["verifier_trials"]) == 8 for x in records if not x["failed"])


def test_score_verifier_against_vllm_end_to_end(vllm_server, tmp_path):
    data = tmp_path / "v.jsonl"
    data.write_text("".join(Path(ANNOTATED).read_text().splitlines(keepends=True)[:6]))
    out = tmp_path / "verifier"
    r = cli("score", "verifier", "--data", str(data), "--endpoint", vllm_server.url, "--repeats", "3",
            "--max-tokens", "24", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_proofs"] == 6 and summary["n_trials"] == 18
    assert "meta_ver_bal_f1" in summary  # structural meta grades are always present
    for name in ("report.md", "tpr_tnr.png", "confusion.png", "meta_levels.png"):
        assert (out / name).stat().st_size > 0, name
    again = cli("metrics", "--records", str(out / "records.jsonl"))
    assert drop_timing(json.loads(again.stdout)) == drop_timing(summary)


def verdict_for(req: dict) -> list[str]:
    """Deterministic per prompt: half the proofs accepted by every pass, the rest rejected at step 0."""
    user = req["messages"][-1]["content"]
    accept = int(hashlib.sha256(user.encode()).hexdigest(), 16) % 2 == 0
    text = format_verdict("checked", [], -1) if accept else format_verdict("bad", [(0, "wrong")], 0)
    return [text] * int(req.get("n") or 1)


def test_sigkill_then_resume_equals_clean_run(tmp_path):
    with ScriptedServer(lambda req, i: Reply(verdict_for(req), delay_s=0.4)) as srv:
        clean = tmp_path / "clean"
        r = cli("score", "prover", "--problems", PROBLEMS, "--submissions", SUBMISSIONS, "--endpoint", srv.url,
                "--endpoint-model", "scripted", "--concurrency", "2", "--out", str(clean))
        assert r.returncode == 0, r.stderr[-2000:]
        crashed = tmp_path / "crashed"
        proc = subprocess.Popen([sys.executable, "-m", "proofcheck.app.cli", "score", "prover", "--problems", PROBLEMS,
                                 "--submissions", SUBMISSIONS, "--endpoint", srv.url, "--endpoint-model", "scripted",
                                 "--concurrency", "2", "--out", str(crashed)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        records = crashed / "records.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if records.exists() and len(records.read_text().splitlines()) >= 5:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        n_before = len(records.read_text().splitlines())
        assert 5 <= n_before < 25
        refused = cli("score", "prover", "--problems", PROBLEMS, "--submissions", SUBMISSIONS, "--endpoint", srv.url,
                      "--endpoint-model", "scripted", "--out", str(crashed))
        assert refused.returncode == 1 and "--resume" in refused.stderr
        changed = cli("score", "prover", "--problems", PROBLEMS, "--submissions", SUBMISSIONS, "--endpoint", srv.url,
                      "--endpoint-model", "scripted", "--passes", "4", "--out", str(crashed), "--resume")
        assert changed.returncode == 1 and "passes" in changed.stderr
        r = cli("score", "prover", "--problems", PROBLEMS, "--submissions", SUBMISSIONS, "--endpoint", srv.url,
                "--endpoint-model", "scripted", "--concurrency", "2", "--out", str(crashed), "--resume")
        assert r.returncode == 0, r.stderr[-2000:]
    ids = [json.loads(x)["proof_id"] for x in records.read_text().splitlines()]
    assert len(ids) == 25 == len(set(ids))
    a = drop_timing(json.loads((clean / "summary.json").read_text()))
    b = drop_timing(json.loads((crashed / "summary.json").read_text()))
    assert a == b
    assert 0 < a["pessimistic"] < 1


# The first three submissions, each known by a phrase of its proof, and what the server does to it
# on each attempt (the client's policy: 4 attempts, i.e. 3 retries, on 5xx / 429 / garbage).
ACCEPT_BOTH = format_verdict("checked", [], -1)
FAULT_SCRIPT = {
    "least element": [Reply(status=500)] * 10,  # outlasts the retry policy: both passes errored
    "decimal expansion of": [Reply(status=429, headers={"Retry-After": "0"}), Reply(body="{garbage"),
                             Reply([ACCEPT_BOTH] * 2)],  # recovers on the third attempt: two accepts
    "fundamental theorem of arithmetic": [Reply(status=500), Reply([ACCEPT_BOTH] * 2, finish_reason="length")],
}


def scripted_faults(attempts: dict[str, int], healthy: dict[str, bool]):
    def respond(req: dict, i: int) -> Reply:
        user = req["messages"][-1]["content"]
        key = next(k for k in FAULT_SCRIPT if k in user)
        attempts[key] = attempts.get(key, 0) + 1
        return Reply([ACCEPT_BOTH] * 2) if healthy["now"] else FAULT_SCRIPT[key][attempts[key] - 1]
    return respond


def test_endpoint_faults_are_retried_then_recorded_as_errors(tmp_path):
    subs = tmp_path / "subs.jsonl"
    subs.write_text("".join(Path(SUBMISSIONS).read_text().splitlines(keepends=True)[:3]))
    out = tmp_path / "faults"
    args = ["score", "prover", "--problems", PROBLEMS, "--submissions", str(subs), "--endpoint-model", "scripted",
            "--passes", "2", "--concurrency", "1", "--out", str(out)]
    attempts: dict[str, int] = {}
    healthy = {"now": False}
    with ScriptedServer(scripted_faults(attempts, healthy)) as srv:
        r = cli(*args, "--endpoint", srv.url)
        # bounded retries: 4 attempts for the proof that always fails, the others stop once answered
        assert attempts == {"least element": 4, "decimal expansion of": 3, "fundamental theorem of arithmetic": 2}
        assert r.returncode == 3, r.stderr[-2000:]
        assert "incomplete" in r.stderr and "--resume" in r.stderr
        records = {x["sample"]: x for x in map(json.loads, (out / "records.jsonl").read_text().splitlines())}
        assert sorted(records) == [0, 1, 2]
        errored = records[0]["verifier_trials"]
        assert len(errored) == 2
        for t in errored:  # an endpoint error is its own status: never a verdict, never an invalid output
            assert (t["status"], t["valid"], t["error_status"]) == ("error", False, 500)
            assert "after 4 attempt(s)" in t["error"]
        recovered = records[1]["verifier_trials"]
        assert len(recovered) == 2 and all(t["status"] == "valid" and t["error"] is None for t in recovered)
        cut = records[2]["verifier_trials"]
        assert cut[0]["status"] == "invalid" and cut[0]["finish_reason"] == "length" and cut[0]["error"] is None
        summary = json.loads((out / "summary.json").read_text())
        assert summary["errored_passes"] == 2 and summary["complete"] is False

        healthy["now"] = True  # --resume against the mended server asks again for exactly the errored proof
        again = cli(*args, "--endpoint", srv.url, "--resume")
        assert again.returncode == 0, again.stderr[-2000:]
        assert attempts == {"least element": 5, "decimal expansion of": 3, "fundamental theorem of arithmetic": 2}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errored_passes"] == 0 and summary["complete"] is True


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"problem_id": "nope", "sample": 0, "proof": "<step>a</step>"}', "unknown problem 'nope'"),
        ('{"problem_id": "ugd-001", "sample": 0, "proof": "   "}', "empty"),
        ('{"problem_id": "ugd-001", "sample": 0, "proof": "x"', "invalid JSON"),
    ],
)
def test_malformed_submissions_fail_clearly(tmp_path, line, message):
    subs = tmp_path / "bad.jsonl"
    subs.write_text(line + "\n")
    with ScriptedServer(lambda req, i: Reply(verdict_for(req))) as srv:
        r = cli("score", "prover", "--problems", PROBLEMS, "--submissions", str(subs), "--endpoint", srv.url,
                "--endpoint-model", "scripted", "--out", str(tmp_path / "o"))
    if message == "empty":
        # an empty proof is a failed sample: scored 0, never sent to the verifier
        assert r.returncode == 0, r.stderr
        rec = json.loads((tmp_path / "o" / "records.jsonl").read_text())
        assert rec["failed"] and "empty" in rec["failure"] and rec["verifier_trials"] == []
    else:
        assert r.returncode == 1 and message in r.stderr and f"{subs}:1" in r.stderr
