"""`proofcheck data distill` (bench/distill.py) against scripted endpoints over real HTTP: a verifier whose passes
are chosen per proof, and a meta-verifier judge that answers a level, or garbage (a grader failure).

Expected counts are worked out by hand from the grading rules (docs/scoring.md): an accept of a valid proof is
EXACT_MATCH; a reject of a valid proof or an accept of a flawed one is WRONG_POLARITY; an answer without the tags
is invalid (no level); a reject of a flawed proof at its fatal step is EXACT_MATCH structurally, and in hybrid mode
the lower of that and the judge's level, or a grader failure when the judge cannot be read. A failed grade must
never be kept: the pass whose judge answer is garbage is structurally EXACT, so a filter that fell back on the
structural level would keep it and fail here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.app.cli import main
from proofcheck.parsing import format_verdict
from proofcheck.serve.scripted import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
PROOFS = ("ugd-001-p1", "ugd-001-p2", "ugd-004-p2")   # valid; fatal error at step 4; fatal error at step 1

ACCEPT = format_verdict("The proof is correct.", [], -1)


def reject(step: int, why: str) -> str:
    return format_verdict("The proof has an error.", [(step, why)], step)


# per proof: its four passes (a marker in the error text tells the judge what to answer)
PASSES = {
    "ugd-001-p1": [ACCEPT, reject(0, "wrong"), "I think it is fine.", ACCEPT],    # EXACT, WP, invalid, EXACT
    "ugd-001-p2": [reject(4, "judge-exact"), reject(4, "judge-garbage"), ACCEPT, reject(4, "judge-basic")],
    "ugd-004-p2": [reject(1, "judge-exact")] * 4,
}
JUDGE = {"judge-exact": "<level>EXACT_MATCH</level>", "judge-basic": "<level>BASIC_MATCH</level>",
         "judge-garbage": "I cannot decide."}


def annotated(tmp_path: Path) -> tuple[Path, dict[str, dict]]:
    rows = {r["proof_id"]: r for r in map(json.loads, (REPO / "data/samples/annotated.jsonl").open(encoding="utf-8"))
            if r["proof_id"] in PROOFS}
    path = tmp_path / "annotated.jsonl"
    path.write_text("".join(json.dumps(rows[p]) + "\n" for p in PROOFS), encoding="utf-8")
    return path, rows


def verifier(rows: dict[str, dict], down: set[str]):
    def respond(req: dict, i: int) -> Reply:
        prompt = json.dumps(req["messages"])
        pid = next(p for p in PROOFS if json.dumps(rows[p]["steps"][0])[1:-1] in prompt)
        if pid in down:
            return Reply(status=503, body='{"error": {"message": "overloaded"}}')
        return Reply(PASSES[pid][:int(req.get("n") or 1)])
    return respond


def judge(req: dict, i: int) -> Reply:
    prompt = json.dumps(req["messages"])
    return Reply(next(answer for marker, answer in JUDGE.items() if marker in prompt))


def distill(data: Path, out: Path, url: str, judge_url: str | None, *extra: str) -> int:
    argv = ["data", "distill", "--data", str(data), "--endpoint", url, "--endpoint-model", "teacher", "--passes", "4",
            "--out", str(out), "--json", *extra]
    if judge_url:
        argv += ["--judge-endpoint", judge_url, "--judge-model", "judge", "--judge-cache-dir", str(out.parent / "c")]
    return main(argv)


@pytest.mark.parametrize(("min_level", "kept"), [
    ("EXACT_MATCH", {("ugd-001-p1", 0), ("ugd-001-p1", 3), ("ugd-001-p2", 0), ("ugd-004-p2", 0), ("ugd-004-p2", 1),
                     ("ugd-004-p2", 2), ("ugd-004-p2", 3)}),
    ("BASIC_MATCH", {("ugd-001-p1", 0), ("ugd-001-p1", 3), ("ugd-001-p2", 0), ("ugd-001-p2", 3), ("ugd-004-p2", 0),
                     ("ugd-004-p2", 1), ("ugd-004-p2", 2), ("ugd-004-p2", 3)}),
])
def test_only_passes_graded_at_the_level_are_kept_and_a_failed_grade_never(tmp_path: Path, capsys, min_level: str,
                                                                           kept: set) -> None:
    data, rows = annotated(tmp_path)
    with ScriptedServer(verifier(rows, set())) as v, ScriptedServer(judge) as j:
        rc = distill(data, tmp_path / "run", v.url, j.url, "--min-level", min_level)
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0, summary
    sft = [json.loads(line) for line in (tmp_path / "run" / "sft.jsonl").open(encoding="utf-8")]
    assert {(r["provenance"]["proof_id"], r["provenance"]["pass"]) for r in sft} == kept
    assert ("ugd-001-p2", 1) not in kept  # the grader failure (judge garbage on a structurally EXACT reject)
    assert summary["grader_failures"] == 1 and summary["invalid"] == 1 and summary["kept"] == len(kept)
    assert summary["passes"] == 12 and summary["proofs_with_a_kept_pass"] == 3
    for r in sft:
        p = r["provenance"]
        assert p["model"] == "teacher" and p["min_level"] == min_level and p["grader"] == "hybrid"
        assert p["level"] in ("EXACT_MATCH", "BASIC_MATCH")[:1 + (min_level == "BASIC_MATCH")]
        assert r["completion"] == [{"role": "assistant", "content": PASSES[p["proof_id"]][p["pass"]]}]
        assert r["prompt"][-1]["role"] == "user" and rows[p["proof_id"]]["steps"][0][:30] in r["prompt"][-1]["content"]
    records = {r["proof_id"]: r for r in map(json.loads, (tmp_path / "run" / "records.jsonl").open(encoding="utf-8"))}
    failed = records["ugd-001-p2"]["verifier_passes"][1]
    assert failed["status"] == "grader_error" and not failed["kept"] and failed["structural_level"] == "EXACT_MATCH"


def test_structural_grading_keeps_exact_answers_and_drops_the_rest(tmp_path: Path, capsys) -> None:
    data, rows = annotated(tmp_path)
    with ScriptedServer(verifier(rows, set())) as v:
        assert distill(data, tmp_path / "run", v.url, None) == 0
    s = json.loads(capsys.readouterr().out)
    # every reject at the fatal step is EXACT without a judge: 2 accepts + 3 (ugd-001-p2) + 4 (ugd-004-p2)
    assert (s["kept"], s["grader_failures"], s["invalid"], s["levels"]) == (
        9, 0, 1, {"EXACT_MATCH": 9, "WRONG_POLARITY": 2})


def test_endpoint_errors_are_resumed_exactly_without_duplicates(tmp_path: Path, capsys) -> None:
    data, rows = annotated(tmp_path)
    out = tmp_path / "run"
    with ScriptedServer(verifier(rows, {"ugd-004-p2"})) as v:
        assert distill(data, out, v.url, None) == 3
    s = json.loads(capsys.readouterr().out)
    assert not s["complete"] and s["errored_passes"] == 4 and s["kept"] == 5
    with ScriptedServer(verifier(rows, set())) as v:
        assert distill(data, out, v.url, None, "--resume") == 0
    s = json.loads(capsys.readouterr().out)
    assert s["complete"] and s["kept"] == 9 and s["errored_passes"] == 0
    lines = [json.loads(x) for x in (out / "records.jsonl").open(encoding="utf-8")]
    assert sorted(r["proof_id"] for r in lines) == sorted(PROOFS)
    sft = [json.loads(x) for x in (out / "sft.jsonl").open(encoding="utf-8")]
    keys = [(r["provenance"]["proof_id"], r["provenance"]["pass"]) for r in sft]
    assert len(keys) == len(set(keys)) == 9
