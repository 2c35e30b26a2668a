"""`proofcheck data select|repair|build`: real endpoints, exact acceptance logic, resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proofcheck.data.loaders import SAMPLES_DIR
from proofcheck.parsing import format_verdict
from proofcheck.serve.scripted import Reply, ScriptedServer

ANNOTATED = SAMPLES_DIR / "annotated.jsonl"
ACCEPT = format_verdict("fine", [], -1)
REJECT = format_verdict("no", [(0, "wrong")], 0)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", *args], capture_output=True, text=True, timeout=600)


def first_lines(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "cands.jsonl"
    p.write_text("".join(ANNOTATED.read_text().splitlines(keepends=True)[:n]))
    return p


def mixed_votes(req: dict, i: int) -> Reply:
    """3 accepts + 2 rejects for proofs whose prompt mentions 'ugd-00', all accepts otherwise, one invalid."""
    n = int(req.get("n") or 1)
    user = req["messages"][-1]["content"]
    if "uncertain" in user:
        return Reply(([ACCEPT] * 3 + [REJECT] * 2 + ["garbage"] * n)[:n])
    return Reply([ACCEPT] * (n - 1) + ["not a verdict"])


def test_select_keeps_uncertain_proofs_exactly(tmp_path):
    recs = [json.loads(x) for x in ANNOTATED.read_text().splitlines()[:4]]
    recs[1]["problem"] += " (uncertain)"
    recs[3]["problem"] += " (uncertain)"
    cands = tmp_path / "c.jsonl"
    cands.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with ScriptedServer(mixed_votes) as srv:
        r = cli("data", "select", "--proofs", str(cands), "--verifier", srv.url + "#scripted", "--repeats", "5",
                "--min-entropy", "0.8", "--out", str(tmp_path / "sel"))
        assert r.returncode == 0, r.stderr[-2000:]
    selected = [json.loads(x) for x in (tmp_path / "sel" / "selected.jsonl").read_text().splitlines()]
    assert [s["proof_id"] for s in selected] == [recs[1]["proof_id"], recs[3]["proof_id"]]
    assert abs(selected[0]["selection"]["entropy"] - 0.971) < 1e-3
    summary = json.loads((tmp_path / "sel" / "summary.json").read_text())
    # certain proofs: 4 accepts + 1 invalid each -> entropy 0, the invalid is not an accept
    assert summary["invalid_outputs"] == 2 and summary["n_selected"] == 2
    assert (tmp_path / "sel" / "entropy.png").stat().st_size > 0


def test_select_two_verifiers_against_vllm_and_resume(vllm_server, tmp_path):
    cands = first_lines(tmp_path, 3)
    args = ["data", "select", "--proofs", str(cands), "--verifier", vllm_server.url, "--verifier",
            vllm_server.url + "#tiny", "--repeats", "2", "--max-tokens", "16", "--out", str(tmp_path / "sel")]
    r = cli(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    records = [json.loads(x) for x in (tmp_path / "sel" / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(len(x["verifier_passes"]) == 4 for x in records)
    for x in records:
        assert x["accept"] + x["reject"] + x["invalid"] == 4
    again = cli(*args, "--resume")
    assert again.returncode == 0
    assert len((tmp_path / "sel" / "records.jsonl").read_text().splitlines()) == 3


def test_select_constrained_to_the_answer_format_sees_both_decisions(vllm_server, tmp_path):
    """Structured outputs make every pass of the random model a valid verdict (known from the
    constraint); its sampled verdicts hold accepts and rejects, which is what the entropy counts."""
    cands = first_lines(tmp_path, 4)
    r = cli("data", "select", "--proofs", str(cands), "--verifier", vllm_server.url + "#tiny", "--repeats", "6",
            "--max-tokens", "1500", "--constrain-format", "--min-entropy", "0.1", "--out", str(tmp_path / "sel"))
    assert r.returncode == 0, r.stderr[-2000:]
    records = [json.loads(x) for x in (tmp_path / "sel" / "records.jsonl").read_text().splitlines()]
    # (a random byte-level model fills the 200-character fields, several tokens per non-ASCII character)
    assert all(x["invalid"] == 0 and x["accept"] + x["reject"] == 6 for x in records), records
    assert sum(x["accept"] for x in records) > 0 and sum(x["reject"] for x in records) > 0


REPAIRED_PROOF = "<step>First corrected step.</step>\n<step>Second corrected step.</step>"


def repair_world(req: dict, i: int) -> Reply:
    """Repairer answers a stepped proof; checkers accept it unanimously unless the source mentions 'qe'."""
    system = req["messages"][0]["content"]
    if "repairs flawed proofs" in system:
        user = req["messages"][-1]["content"]
        if "truncate-me" in user:
            return Reply(REPAIRED_PROOF, finish_reason="length")
        if "doubtful-source" in user:
            return Reply(REPAIRED_PROOF.replace("Second", "Doubtful second"))
        return Reply(REPAIRED_PROOF)
    n = int(req.get("n") or 1)
    return Reply([ACCEPT] * n)


def test_repair_accepts_only_unanimous_repairs(tmp_path):
    recs = [json.loads(x) for x in ANNOTATED.read_text().splitlines()]
    flawed = [r for r in recs if not r["is_correct"]][:3]
    flawed[0]["annotation"]["reviewer_comment"] += " doubtful-source"
    flawed[2]["annotation"]["reviewer_comment"] += " truncate-me"
    src = tmp_path / "rej.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [*flawed, next(r for r in recs if r["is_correct"])]))

    def strict_checker(req: dict, i: int) -> Reply:  # second checker: one of its passes rejects the doubtful repair
        n = int(req.get("n") or 1)
        doubtful = "Doubtful" in req["messages"][-1]["content"]
        return Reply([REJECT] + [ACCEPT] * (n - 1)) if doubtful else Reply([ACCEPT] * n)

    with ScriptedServer(repair_world) as world, ScriptedServer(strict_checker) as strict:
        r = cli("data", "repair", "--rejected", str(src), "--repairer", world.url + "#strong", "--checker",
                world.url + "#scripted", "--checker", strict.url + "#scripted", "--passes", "4", "--concurrency", "1",
                "--out", str(tmp_path / "rep"))
        assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert summary["n_rejected_inputs"] == 3
    assert summary["status_counts"] == {"rejected_by_checkers": 1, "accepted": 1, "generation_failed": 1}
    repaired = [json.loads(x) for x in (tmp_path / "rep" / "repaired.jsonl").read_text().splitlines()]
    assert len(repaired) == 1 and repaired[0]["origin"] == "repaired" and repaired[0]["is_correct"]
    assert repaired[0]["provenance"]["source_proof_id"] == flawed[1]["proof_id"]
    assert repaired[0]["steps"] == ["First corrected step.", "Second corrected step."]
    # the repaired file is a valid input for the training-set build
    b = cli("data", "build", "--expert", str(ANNOTATED), "--repaired", str(tmp_path / "rep" / "repaired.jsonl"),
            "--out", str(tmp_path / "ds"))
    assert b.returncode == 0, b.stderr[-2000:]
    assert "repaired" in json.loads((tmp_path / "ds" / "card.json").read_text())["splits"]["train"]["origin"] or \
        "repaired" in json.loads((tmp_path / "ds" / "card.json").read_text())["splits"]["eval"]["origin"]


def test_repair_against_vllm_accepts_nothing_without_unanimity(vllm_server, tmp_path):
    """A scripted repairer always writes a usable two-step proof, so every attempt reaches the real
    vLLM checker; the random tiny model never writes a valid accept, so no repair may be accepted
    (an invalid pass is never an accept, and unanimity needs all 4)."""
    recs = [json.loads(x) for x in ANNOTATED.read_text().splitlines()]
    src = tmp_path / "rej.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [r for r in recs if not r["is_correct"]][:2]))
    with ScriptedServer(repair_world) as world:
        r = cli("data", "repair", "--rejected", str(src), "--repairer", world.url + "#strong", "--checker",
                vllm_server.url, "--passes", "4", "--max-tokens", "16", "--out", str(tmp_path / "rep"))
        repair_calls = len(world.calls)
    assert r.returncode == 0, r.stderr[-2000:]
    assert repair_calls == 2  # one repair per flawed proof, none of them a checker call
    attempts = [json.loads(x) for x in (tmp_path / "rep" / "records.jsonl").read_text().splitlines()]
    assert len(attempts) == 2
    assert [a["status"] for a in attempts] == ["rejected_by_checkers"] * 2
    for a in attempts:
        assert a["steps"] == ["First corrected step.", "Second corrected step."]
        (votes,) = a["checker_votes"].values()
        assert votes["accept"] == 0 and votes["error"] == 0 and votes["invalid"] >= 1
    assert (tmp_path / "rep" / "repaired.jsonl").read_text() == ""
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert summary["n_accepted"] == 0 and summary["status_counts"] == {"rejected_by_checkers": 2}
