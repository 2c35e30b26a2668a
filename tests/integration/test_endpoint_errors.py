"""Endpoint errors are never scores: scoring and generation against a real HTTP server that fails.

A pass that gets a 4xx / 5xx / timeout is recorded as an error (status, message), the run says
it is incomplete and exits 3, and `--resume` re-runs exactly the errored passes. A wrong key or
model stops the run at once with the fix; an unset `--endpoint-api-key-env` is exit 2 before any request.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proofcheck.data.loaders import SAMPLES_DIR
from proofcheck.parsing import format_verdict
from proofcheck.serve.scripted import Reply, ScriptedServer

ANNOTATED = SAMPLES_DIR / "annotated.jsonl"
OK = format_verdict("checked", [], -1)


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def three_proofs(tmp_path: Path) -> Path:
    data = tmp_path / "three.jsonl"
    data.write_text("".join(ANNOTATED.read_text().splitlines(keepends=True)[:3]))
    return data


def score(data: Path, url: str, out: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return cli("score", "verifier", "--data", str(data), "--endpoint", url, "--endpoint-model", "scripted",
               "--repeats", "2", "--concurrency", "1", "--out", str(out), *extra, env=env)


def test_400_passes_are_errors_then_resume_reruns_exactly_them(tmp_path: Path) -> None:
    data = three_proofs(tmp_path)
    first_proof = json.loads(data.read_text().splitlines()[0])["steps"][-1][:30]

    state = {"fail": True}

    def failing_first(req: dict, i: int) -> Reply:
        if state["fail"] and first_proof in req["messages"][-1]["content"]:
            return Reply(status=400, body='{"error": {"message": "maximum context length is 8 tokens"}}')
        return Reply(OK)

    out = tmp_path / "run"
    srv = ScriptedServer(failing_first).__enter__()
    try:
        r = score(data, srv.url, out)
        assert r.returncode == 3, r.stderr[-2000:]
        records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        n_before = len(srv.calls)
        state["fail"] = False
        r2 = score(data, srv.url, out, "--resume")
        calls = srv.calls[n_before:]
    finally:
        srv.__exit__(None, None, None)
    assert "2 errored passes" in r.stderr and "--resume" in r.stderr
    errored = [t for rec in records for t in rec["verifier_trials"] if t["status"] == "error"]
    assert len(errored) == 2 and all(t["error_status"] == 400 and not t["valid"] for t in errored)
    assert all(t["meta"]["score"] in (0.0, None) for t in errored)
    assert r2.returncode == 0, r2.stderr[-2000:]
    assert [c.get("n") for c in calls if "messages" in c] == [2]  # exactly the two errored passes, one request
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["errored_passes"] == 0 and summary["n_records"] == 3
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(t["status"] == "valid" for rec in records for t in rec["verifier_trials"])


def test_401_stops_the_run_with_the_fix(tmp_path: Path) -> None:
    with ScriptedServer(lambda req, i: Reply(status=401)) as srv:
        r = score(three_proofs(tmp_path), srv.url, tmp_path / "run", "--endpoint-api-key-env", "PC_TEST_KEY",
                  env={"PC_TEST_KEY": "wrong"})
        n_calls = len([c for c in srv.calls if "messages" in c])
    assert r.returncode == 3 and "HTTP 401" in r.stderr and "--endpoint-api-key-env" in r.stderr
    assert n_calls == 1  # stopped at once, not once per pass


def test_unset_api_key_env_is_exit_2_before_any_request(tmp_path: Path) -> None:
    with ScriptedServer(lambda req, i: Reply(OK)) as srv:
        r = score(three_proofs(tmp_path), srv.url, tmp_path / "run", "--endpoint-api-key-env", "PC_SURELY_UNSET_VAR")
        g = cli("generate", "--problems", str(SAMPLES_DIR / "problems.jsonl"), "--endpoint", srv.url,
                "--endpoint-model", "scripted", "--endpoint-api-key-env", "PC_SURELY_UNSET_VAR", "--out", str(tmp_path / "subs.jsonl"))
        calls = list(srv.calls)
    assert r.returncode == 2 and "PC_SURELY_UNSET_VAR" in r.stderr
    assert g.returncode == 2 and "PC_SURELY_UNSET_VAR" in g.stderr
    assert calls == []


def test_generate_errors_are_not_submissions_and_resume_fills_them(tmp_path: Path) -> None:
    problems = tmp_path / "p.jsonl"
    problems.write_text("".join((SAMPLES_DIR / "problems.jsonl").read_text().splitlines(keepends=True)[:2]))
    out = tmp_path / "subs.jsonl"
    with ScriptedServer(lambda req, i: Reply(status=503) if i < 6 else Reply("<step>a</step><step>b</step>")) as srv:
        args = ("generate", "--problems", str(problems), "--endpoint", srv.url, "--endpoint-model", "scripted",
                "--samples", "2", "--concurrency", "1", "--out", str(out))
        r = cli(*args)
        assert r.returncode == 3 and "endpoint error" in r.stderr, r.stderr[-2000:]
        first = [json.loads(x) for x in out.read_text().splitlines()]
        r2 = cli(*args, "--resume")
    assert r2.returncode == 0, r2.stderr[-2000:]
    subs = [json.loads(x) for x in out.read_text().splitlines()]
    assert not any(s.get("failed") for s in first + subs)  # an endpoint error is never a failed (0) sample
    assert sorted((s["problem_id"], s["sample"]) for s in subs) == sorted(
        (json.loads(x)["problem_id"], k) for x in problems.read_text().splitlines() for k in range(2))
