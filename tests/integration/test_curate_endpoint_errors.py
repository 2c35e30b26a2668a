"""Endpoint errors are never outcomes in `data select` and `data repair` (real HTTP servers on 127.0.0.1).

A pass or a repair generation that gets an endpoint error is recorded as an error (status and
message), the run exits 3 with `complete: false` and `errored_passes`, and `--resume` re-runs
exactly what failed: the errored passes of the verifier that failed, not the whole record; the
checker passes of a repair, not its generation. A refused key or unknown model stops at once
(also on `GET /v1/models`); an unset `--endpoint-api-key-env` is exit 2 before any request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from proofcheck.data.loaders import SAMPLES_DIR
from proofcheck.parsing import format_verdict
from proofcheck.serve.scripted import Reply, ScriptedServer

ANNOTATED = SAMPLES_DIR / "annotated.jsonl"
ACCEPT = format_verdict("fine", [], -1)
REJECT = format_verdict("no", [(0, "wrong")], 0)
REPAIRED = "<step>First corrected step.</step>\n<step>Second corrected step.</step>"


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def chat_calls(srv: ScriptedServer, since: int = 0) -> list[dict]:
    return [c for c in srv.calls[since:] if "messages" in c]


@contextmanager
def refusing_server(status: int) -> Iterator[tuple[str, list[str]]]:
    """An HTTP server that answers every request with `status` and an OpenAI-style error body."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            seen.append(f"{self.command} {self.path}")
            body = json.dumps({"error": {"message": f"refused ({status})"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _refuse

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1", seen
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=10)


def candidates(tmp_path: Path, n: int) -> tuple[Path, list[dict]]:
    recs = [json.loads(x) for x in ANNOTATED.read_text().splitlines()[:n]]
    recs[0]["problem"] += " (flaky-proof)"
    path = tmp_path / "cands.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path, recs


def test_select_errors_are_not_votes_and_resume_reruns_only_them(tmp_path: Path) -> None:
    cands, recs = candidates(tmp_path, 3)
    state = {"fail": True}

    def flaky(req: dict, i: int) -> Reply:  # the second verifier refuses the first proof (prompt too long)
        if state["fail"] and "flaky-proof" in req["messages"][-1]["content"]:
            return Reply(status=400, body='{"error": {"message": "maximum context length is 16 tokens"}}')
        n = int(req.get("n") or 1)
        return Reply(([ACCEPT, REJECT] * n)[:n])

    out = tmp_path / "sel"
    with ScriptedServer(lambda req, i: Reply([ACCEPT] * int(req.get("n") or 1))) as steady, \
            ScriptedServer(flaky) as shaky:
        args = ("data", "select", "--proofs", str(cands), "--verifier", steady.url + "#scripted", "--verifier",
                shaky.url + "#scripted", "--repeats", "4", "--min-entropy", "0.5", "--concurrency", "1",
                "--out", str(out))
        r = cli(*args)
        first = {x["proof_id"]: x for x in records(out / "records.jsonl")}
        summary1 = json.loads((out / "summary.json").read_text())
        n_steady, n_shaky = len(chat_calls(steady)), len(chat_calls(shaky))
        state["fail"] = False
        r2 = cli(*args, "--resume")
        again_steady, again_shaky = chat_calls(steady, n_steady), chat_calls(shaky, n_shaky)
    assert r.returncode == 3, r.stderr[-2000:]
    assert "4 errored passes" in r.stderr and "--resume" in r.stderr and "maximum context length" in r.stderr
    bad = first[recs[0]["proof_id"]]
    errored = [e for e in bad["verifier_passes"] if e["status"] == "error"]
    assert len(errored) == 4 and all(e["error_status"] == 400 and "context length" in e["error"] for e in errored)
    assert bad["per_model"][shaky.url + "#scripted"] == {"accept": 0, "reject": 0, "invalid": 0, "error": 4,
                                                        "entropy": 0.0}
    assert bad["invalid"] == 0 and bad["accept"] == 4  # errors are neither invalid outputs nor votes
    assert summary1["complete"] is False and summary1["errored_passes"] == 4 and summary1["proofs_with_errors"] == 1
    assert summary1["n_selected"] == 2  # the two whole proofs: 6 accepts + 2 rejects = 0.811 bits
    # the resume re-ran exactly the 4 errored passes of the verifier that failed: one request, n=4
    assert again_steady == [] and [c["n"] for c in again_shaky] == [4]
    assert r2.returncode == 0, r2.stderr[-2000:]
    summary2 = json.loads((out / "summary.json").read_text())
    assert summary2["complete"] is True and summary2["errored_passes"] == 0 and summary2["n_selected"] == 3
    final = {x["proof_id"]: x for x in records(out / "records.jsonl")}
    assert len(final) == len(records(out / "records.jsonl")) == 3
    kept = [e for e in final[recs[0]["proof_id"]]["verifier_passes"] if e["verifier"] == steady.url + "#scripted"]
    assert kept == [e for e in bad["verifier_passes"] if e["verifier"] == steady.url + "#scripted"]


def test_select_401_on_the_model_list_stops_with_the_fix(tmp_path: Path) -> None:
    cands, _ = candidates(tmp_path, 2)
    with refusing_server(401) as (url, seen):
        r = cli("data", "select", "--proofs", str(cands), "--verifier", url, "--out", str(tmp_path / "sel"),
                "--endpoint-api-key-env", "PC_TEST_KEY", env={"PC_TEST_KEY": "wrong"})
    assert r.returncode == 3, r.stderr[-2000:]
    assert "HTTP 401" in r.stderr and "--endpoint-api-key-env" in r.stderr and "Traceback" not in r.stderr
    assert not any(s.startswith("POST") for s in seen)  # no verification request was sent


def test_select_404_on_the_first_request_stops_at_once(tmp_path: Path) -> None:
    cands, _ = candidates(tmp_path, 3)
    with ScriptedServer(lambda req, i: Reply(status=404)) as srv:
        r = cli("data", "select", "--proofs", str(cands), "--verifier", srv.url + "#mistyped", "--concurrency", "1",
                "--out", str(tmp_path / "sel"))
        n = len(chat_calls(srv))
    assert r.returncode == 3 and "HTTP 404" in r.stderr and "model name" in r.stderr, r.stderr[-2000:]
    assert n == 1


def test_unset_api_key_env_is_exit_2_before_any_request(tmp_path: Path) -> None:
    cands, _ = candidates(tmp_path, 2)
    with ScriptedServer(lambda req, i: Reply(ACCEPT)) as srv:
        s = cli("data", "select", "--proofs", str(cands), "--verifier", srv.url + "#scripted", "--out",
                str(tmp_path / "sel"), "--endpoint-api-key-env", "PC_SURELY_UNSET_VAR")
        r = cli("data", "repair", "--rejected", str(ANNOTATED), "--repairer", srv.url + "#scripted", "--checker",
                srv.url + "#scripted", "--out", str(tmp_path / "rep"), "--endpoint-api-key-env", "PC_SURELY_UNSET_VAR")
        calls = list(srv.calls)
    for x in (s, r):
        assert x.returncode == 2 and "PC_SURELY_UNSET_VAR" in x.stderr, x.stderr[-2000:]
    assert calls == []


def test_repair_errors_resume_reruns_exactly_what_failed(tmp_path: Path) -> None:
    flawed = [json.loads(x) for x in ANNOTATED.read_text().splitlines()]
    flawed = [r for r in flawed if not r["is_correct"]][:3]
    flawed[0]["annotation"]["reviewer_comment"] += " gen-fails"
    flawed[1]["annotation"]["reviewer_comment"] += " check-fails"
    src = tmp_path / "rej.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in flawed))
    state = {"fail": True}

    def world(req: dict, i: int) -> Reply:
        user = req["messages"][-1]["content"]
        if "repairs flawed proofs" in req["messages"][0]["content"]:  # the repairer
            if state["fail"] and "gen-fails" in user:
                return Reply(status=422, body='{"error": {"message": "bad request: unsupported parameter"}}')
            tag = "Check-me" if "check-fails" in user else "First"
            return Reply(REPAIRED.replace("First", tag))
        if state["fail"] and "Check-me" in user:  # a checker pass on the second repair
            return Reply(status=400, body='{"error": {"message": "prompt is too long for this model"}}')
        return Reply([ACCEPT] * int(req.get("n") or 1))

    out = tmp_path / "rep"
    with ScriptedServer(world) as srv:
        args = ("data", "repair", "--rejected", str(src), "--repairer", srv.url + "#strong", "--checker",
                srv.url + "#scripted", "--passes", "3", "--concurrency", "1", "--out", str(out))
        r = cli(*args)
        first = {x["source_proof_id"]: x for x in records(out / "records.jsonl")}
        summary1 = json.loads((out / "summary.json").read_text())
        n1 = len(chat_calls(srv))
        state["fail"] = False
        r2 = cli(*args, "--resume")
        again = chat_calls(srv, n1)
    assert r.returncode == 3, r.stderr[-2000:]
    gen_err, check_err = first[flawed[0]["proof_id"]], first[flawed[1]["proof_id"]]
    assert (gen_err["status"], gen_err["stage"]) == ("error", "generation")
    assert gen_err["generation_passes"][0]["error_status"] == 422
    assert (check_err["status"], check_err["stage"]) == ("error", "check")
    assert [e["error_status"] for e in check_err["verifier_passes"]] == [400, 400, 400]
    assert first[flawed[2]["proof_id"]]["status"] == "accepted"
    assert summary1["complete"] is False and summary1["errored_passes"] == 4
    assert summary1["status_counts"] == {"error": 2, "accepted": 1} and summary1["n_accepted"] == 1
    # resume: the failed generation is generated and checked; the failed checks re-run alone (no new repair)
    kinds = ["repair" if "repairs flawed proofs" in c["messages"][0]["content"] else f"check n={c['n']}"
             for c in again]
    assert sorted(kinds) == ["check n=3", "check n=3", "repair"]
    assert r2.returncode == 0, r2.stderr[-2000:]
    summary2 = json.loads((out / "summary.json").read_text())
    assert summary2["complete"] is True and summary2["status_counts"] == {"accepted": 3}
    final = records(out / "records.jsonl")
    assert len(final) == 3 and len(records(out / "repaired.jsonl")) == 3
    assert next(x for x in final if x["source_proof_id"] == flawed[1]["proof_id"])["steps"][0] == "Check-me corrected step."
