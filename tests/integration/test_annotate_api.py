"""The annotation API on real files: save, edit, resume, validation, auth, two annotators, agreement.

FastAPI's TestClient drives the real app (router + service on app.state) in-process; the CLI
checks run `proofcheck annotate` as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from proofcheck.data.annotate.app import create_app
from proofcheck.data.annotate.auth import Authenticator
from proofcheck.data.annotate.service import AnnotationService

BASE = {"problem": "Show $x = x$.", "reference_solution": "Trivial.", "reference_answer": "", "domain": "ugd",
        "subject": "algebra", "source_id": "t", "policy": "prover"}
ITEMS = [{**BASE, "problem_id": f"q{i}", "proof_id": pid, "steps": ["a", "b", "c", "d"][: 2 + i]}
         for i, pid in enumerate(["q0#0", "q1/sub#0", "q2#0"])]
FLAWED = {"first_fatal_error_step": 2, "recoverable_error_steps": [0], "reviewer_comment": "step 2 is wrong"}
CORRECT = {"first_fatal_error_step": -1, "recoverable_error_steps": [-1], "reviewer_comment": ""}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in ITEMS))
    return inp, tmp_path / "out.jsonl"


def make_client(inp: Path, out: Path, tokens: dict[str, str] | None = None) -> tuple[TestClient, AnnotationService]:
    service = AnnotationService.open(inp, out)
    return TestClient(create_app(service, Authenticator(tokens))), service


@pytest.fixture
def client(files: tuple[Path, Path]) -> Iterator[TestClient]:
    c, service = make_client(*files)
    yield c
    service.close()


def put(c: TestClient, who: str, pid: str, body: dict, kind: str = "annotations") -> Any:
    from urllib.parse import quote

    return c.put(f"/api/{kind}/{quote(pid, safe='')}", json=body, headers={"X-Annotator": who})


def test_page_and_katex_are_served_locally(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/static/katex/katex.min.js" in page.text
    assert "cdn" not in page.text.lower() and "https://" not in page.text
    for asset in ("app.js", "app.css", "katex/katex.min.js", "katex/katex.min.css",
                  "katex/contrib/auto-render.min.js", "katex/fonts/KaTeX_Main-Regular.woff2", "katex/LICENSE"):
        assert client.get(f"/static/{asset}").status_code == 200, asset


def test_save_then_edit_replaces_and_keeps_created_at(client: TestClient, files: tuple[Path, Path]) -> None:
    _, out = files
    r = put(client, "alice", "q1/sub#0", FLAWED)
    assert r.status_code == 200 and r.json()["progress"] == {"done": 1, "total": 3}
    first = lines(out)
    assert [(x["proof_id"], x["annotator"], x["is_correct"], x["first_error_step"]) for x in first] == [
        ("q1/sub#0", "alice", False, 0)]
    r = put(client, "alice", "q1/sub#0", CORRECT)
    assert r.status_code == 200 and r.json()["progress"]["done"] == 1
    (rec,) = lines(out)
    assert rec["is_correct"] is True and rec["annotation"]["first_fatal_error_step"] == -1
    assert rec["created_at"] == first[0]["created_at"] and rec["updated_at"] >= first[0]["updated_at"]
    mine = client.get("/api/items/q1%2Fsub%230", headers={"X-Annotator": "alice"}).json()["mine"]
    assert mine["kind"] == "annotated" and mine["annotation"]["recoverable_error_steps"] == [-1]


@pytest.mark.parametrize(("body", "words"), [
    ({**FLAWED, "recoverable_error_steps": []}, "not []"),
    ({**FLAWED, "first_fatal_error_step": 4}, "has 4 steps"),
    ({**FLAWED, "recoverable_error_steps": [3]}, "not before the fatal step 2"),
    ({**FLAWED, "reviewer_comment": ""}, "reviewer comment"),
    ({**FLAWED, "first_fatal_error_step": True}, "first_fatal_error_step"),
    ({"recoverable_error_steps": [-1]}, "first_fatal_error_step: Field required"),
])
def test_invalid_save_is_422_and_writes_nothing(client: TestClient, files: tuple[Path, Path], body: dict,
                                                words: str) -> None:
    _, out = files
    assert put(client, "alice", "q2#0", CORRECT).status_code == 200
    before = out.read_text(), (out.parent / "out.journal.jsonl").read_text()
    r = put(client, "alice", "q2#0", body)
    assert r.status_code == 422
    assert words in r.json()["error"]["message"] and r.json()["error"]["type"] == "invalid_request_error"
    assert (out.read_text(), (out.parent / "out.journal.jsonl").read_text()) == before


def test_unknown_proof_is_404(client: TestClient) -> None:
    assert put(client, "alice", "nope", CORRECT).status_code == 404
    assert client.get("/api/items/nope", headers={"X-Annotator": "alice"}).status_code == 404


def test_two_annotators_both_kept_and_broken_goes_aside(client: TestClient, files: tuple[Path, Path]) -> None:
    _, out = files
    assert put(client, "bob", "q0#0", CORRECT).status_code == 200
    assert put(client, "alice", "q0#0", {**FLAWED, "first_fatal_error_step": 1}).status_code == 200
    assert put(client, "alice", "q2#0", {"reason": "statement is garbled"}, "broken").status_code == 200
    assert put(client, "alice", "q2#0", {"reason": "  "}, "broken").status_code == 422
    assert [(r["proof_id"], r["annotator"]) for r in lines(out)] == [("q0#0", "alice"), ("q0#0", "bob")]
    broken = lines(out.parent / "out.broken.jsonl")
    assert [(r["proof_id"], r["annotator"], r["report_reason"]) for r in broken] == [
        ("q2#0", "alice", "statement is garbled")]
    assert "annotation" not in broken[0]
    # Changing one's mind moves the record from the broken file to the output.
    assert put(client, "alice", "q2#0", CORRECT).status_code == 200
    assert lines(out.parent / "out.broken.jsonl") == []
    assert ("q2#0", "alice") in [(r["proof_id"], r["annotator"]) for r in lines(out)]
    item = client.get("/api/items/q0%230", headers={"X-Annotator": "bob"}).json()
    assert item["n_annotators"] == 2 and item["mine"]["annotation"]["first_fatal_error_step"] == -1


def test_restart_resumes_queue_and_edits(files: tuple[Path, Path]) -> None:
    inp, out = files
    c, service = make_client(inp, out)
    assert put(c, "alice", "q0#0", CORRECT).status_code == 200
    assert put(c, "alice", "q1/sub#0", FLAWED).status_code == 200
    service.close()
    out.write_text("stale\n")  # a crash between journal append and rebuild: the journal wins
    c, service = make_client(inp, out)
    try:
        q = c.get("/api/queue", headers={"X-Annotator": "alice"}).json()
        assert q["resume_index"] == 2 and q["progress"]["done"] == 2
        assert [i["status"] for i in q["items"]] == ["annotated", "annotated", "todo"]
        assert c.get("/api/queue", headers={"X-Annotator": "bob"}).json()["resume_index"] == 0
        assert [r["proof_id"] for r in lines(out)] == ["q0#0", "q1/sub#0"]
        assert put(c, "alice", "q0#0", {**FLAWED, "first_fatal_error_step": 1}).status_code == 200
        assert [r["first_error_step"] for r in lines(out)] == [0, 0]
    finally:
        service.close()


def test_second_writer_and_orphaned_output_are_refused(files: tuple[Path, Path]) -> None:
    inp, out = files
    service = AnnotationService.open(inp, out)
    try:
        with pytest.raises(ValueError, match="locked"):
            AnnotationService.open(inp, out)
    finally:
        service.close()
    other = out.parent / "other.jsonl"
    other.write_text(json.dumps(ITEMS[0]) + "\n")
    with pytest.raises(ValueError, match="journal"):
        AnnotationService.open(inp, other)


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401),
    ({"X-Annotator": "alice"}, 401),
    ({"X-Annotator": "alice", "Authorization": "Bearer wrong"}, 401),
    ({"X-Annotator": "mallory", "Authorization": "Bearer s3cret"}, 401),
    ({"X-Annotator": "bob", "Authorization": "Bearer s3cret"}, 401),
    ({"X-Annotator": "alice", "Authorization": "Bearer s3cret"}, 200),
])
def test_tokens_gate_every_endpoint(files: tuple[Path, Path], headers: dict, status: int) -> None:
    c, service = make_client(*files, tokens={"alice": "s3cret", "bob": "hunter2"})
    try:
        assert c.get("/api/config").json()["auth_required"] is True
        assert c.get("/api/queue", headers=headers).status_code == status
        assert c.get("/api/items/q0%230", headers=headers).status_code == status
        r = c.put("/api/annotations/q0%230", json=CORRECT, headers=headers)
        assert r.status_code == status
        if status == 401:
            assert r.json()["error"]["type"] == "authentication_error"
            assert not lines(files[1])
    finally:
        service.close()


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "annotate", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_agreement_command(client: TestClient, files: tuple[Path, Path]) -> None:
    _, out = files
    put(client, "alice", "q0#0", CORRECT)
    put(client, "bob", "q0#0", CORRECT)
    put(client, "alice", "q1/sub#0", FLAWED)
    put(client, "bob", "q1/sub#0", {**FLAWED, "first_fatal_error_step": 1})
    put(client, "alice", "q2#0", CORRECT)
    put(client, "bob", "q2#0", {**FLAWED, "recoverable_error_steps": [-1]})
    res = run_cli("--agreement", str(out))
    assert res.returncode == 0, res.stderr
    assert "6 records, 3 proofs, 3 annotated by two or more" in res.stdout
    assert "| alice / bob | 3 | 0.667 | 0.400 | 0.333 | 0.667 |" in res.stdout
    assert "- q1/sub#0: alice: flawed, fatal 2, recoverable 0 | bob: flawed, fatal 1" in res.stdout
    assert "- q2#0: alice: correct" in res.stdout


@pytest.mark.parametrize(("args", "words", "code"), [
    (["--input", "MISSING", "--out", "o.jsonl"], "no such file", 1),
    (["--input", "BAD", "--out", "o.jsonl"], "BAD:2: steps", 1),
    (["--out", "o.jsonl"], "--input", 2),  # a usage error
    (["--agreement", "BAD"], "annotation: Field required", 1),
    (["--input", "BAD", "--out", "o.jsonl", "--token-env", "PC_NO_SUCH_VAR"], "not set", 2),
])
def test_cli_errors_name_the_problem(tmp_path: Path, args: list[str], words: str, code: int) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ITEMS[0]) + "\n" + json.dumps({**ITEMS[1], "steps": []}) + "\n")
    args = [str(bad) if a == "BAD" else str(tmp_path / "missing.jsonl") if a == "MISSING" else a for a in args]
    words = words.replace("BAD", str(bad))
    res = run_cli(*args)
    assert res.returncode == code and words in res.stderr, res.stderr
