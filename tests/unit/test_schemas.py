"""Schemas and loaders: every bad record is reported as file:line: field: reason."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from proofcheck.data.loaders import DataError, load_records, validate_records
from proofcheck.schemas import AnnotatedProof, Submission

BASE = {
    "problem_id": "p1", "problem": "Show 1+1=2.", "reference_solution": "Count.", "reference_answer": "",
    "domain": "ugd", "subject": "arithmetic", "source_id": "s", "proof_id": "p1-a", "steps": ["a", "b", "c"],
    "policy": "m", "annotation": {"first_fatal_error_step": 2, "recoverable_error_steps": [0],
                                  "reviewer_comment": "c", "first_error_reason": "r", "remark": ""},
    "is_correct": False, "first_error_step": 0,
}


def rec(**changes) -> dict:
    r = json.loads(json.dumps(BASE))
    for k, v in changes.items():
        if k.startswith("ann_"):
            r["annotation"][k[4:]] = v
        elif v is ...:
            r.pop(k)
        else:
            r[k] = v
    return r


# (record or raw line, field the error must name, words the reason must contain)
BAD = [
    ("{not json", "<line>", "invalid JSON"),
    ("[1, 2]", "<record>", "JSON object"),
    (rec(proof_id=...), "proof_id", "Field required"),
    (rec(domain="grad"), "domain", "'ugd' or 'qe'"),
    (rec(steps=[]), "steps", "at least 1"),
    (rec(steps=["a", "  ", "c"]), "steps", "step 1 is empty"),
    (rec(ann_first_fatal_error_step=True), "annotation.first_fatal_error_step", "integer"),
    (rec(ann_recoverable_error_steps=[]), "annotation.recoverable_error_steps", "not []"),
    (rec(ann_recoverable_error_steps=[-1, 0]), "annotation.recoverable_error_steps", "[-1]"),
    (rec(ann_first_fatal_error_step=7), "<record>", "has 3 steps"),
    (rec(is_correct=True), "<record>", "is_correct=True disagrees"),
    (rec(first_error_step=2), "<record>", "first_error_step=2 disagrees"),
    (rec(ann_first_fatal_error_step=-3), "annotation.first_fatal_error_step", "-1"),
]


def test_ten_kinds_of_bad_record_are_all_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = rec(proof_id="good")
    lines = [json.dumps(good)] + [b if isinstance(b, str) else json.dumps({**b, "proof_id": b.get("proof_id", f"x{i}")}
                                  if "proof_id" in b else b) for i, (b, _, _) in enumerate(BAD)]
    lines.append(json.dumps(good))  # duplicate id
    path.write_text("\n".join(lines) + "\n")
    records, problems = validate_records(path, "annotated")
    assert len(records) == 1
    for i, (_, field, words) in enumerate(BAD):
        line = i + 2
        hits = [p for p in problems if p.startswith(f"{path}:{line}: ")]
        assert hits, f"line {line} not reported"
        assert any(f": {field}: " in h and words in h for h in hits), hits
    assert any(p.startswith(f"{path}:{len(lines)}: proof_id: duplicate id") for p in problems)
    with pytest.raises(DataError) as e:
        load_records(path, "annotated")
    assert len(e.value.problems) == len(problems) >= 14


def test_validate_cli_names_every_bad_record_and_exits_1(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(b if isinstance(b, str) else json.dumps(b) for b, _, _ in BAD) + "\n")
    out = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "data", "validate", "--kind", "annotated", str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 1
    reported = {int(line.split(":")[1]) for line in out.stdout.splitlines() if line.startswith(str(path) + ":")
                and line.split(":")[1].isdigit()}
    assert reported == set(range(1, len(BAD) + 1))


def test_validate_cli_ok_file(tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps(BASE) + "\n")
    out = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "data", "validate", str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "1 valid annotated record(s), ok" in out.stdout


@pytest.mark.parametrize(
    ("fatal", "rec_steps", "correct", "first"),
    [(-1, [-1], True, -1), (2, [-1], False, 2), (3, [0, 1], False, 0), (-1, [2], False, 2)],
)
def test_derived_labels(fatal, rec_steps, correct, first):
    r = rec(ann_first_fatal_error_step=fatal, ann_recoverable_error_steps=rec_steps, is_correct=..., first_error_step=...)
    r["steps"] = ["a", "b", "c", "d"]
    p = AnnotatedProof.model_validate(r)
    assert p.gold_is_correct is correct and p.gold_first_error_step == first


def test_release_extra_fields_are_kept():
    p = AnnotatedProof.model_validate(rec(extra_field={"x": 1}))
    assert p.model_dump()["extra_field"] == {"x": 1}


@pytest.mark.parametrize(
    ("fields", "ok"),
    [({"proof": "<step>a</step>"}, True), ({"steps": ["a"]}, True), ({}, False),
     ({"proof": "a", "steps": ["a"]}, False), ({"failed": True}, True)],
)
def test_submission_body(fields, ok):
    data = {"problem_id": "p", "sample": 0, **fields}
    if ok:
        s = Submission.model_validate(data)
        assert s.proof_id == "p#0"
    else:
        with pytest.raises(ValueError):
            Submission.model_validate(data)


def test_shipped_samples_are_valid():
    from proofcheck.data.loaders import SAMPLES_DIR

    problems = load_records(SAMPLES_DIR / "problems.jsonl", "problem")
    proofs = load_records(SAMPLES_DIR / "annotated.jsonl", "annotated")
    subs = load_records(SAMPLES_DIR / "submissions.jsonl", "submission")
    ids = {p.problem_id for p in problems}
    assert len(problems) >= 20 and {p.domain for p in problems} == {"ugd", "qe"}
    assert len({p.subject for p in problems}) >= 4
    assert len(proofs) >= 40 and all(p.problem_id in ids for p in proofs)
    assert any(p.gold_is_correct for p in proofs) and any(not p.gold_is_correct for p in proofs)
    assert any(p.annotation.first_fatal_error_step == -1 and not p.gold_is_correct for p in proofs)
    assert all(s.problem_id in ids for s in subs) and all(s.step_list() for s in subs)
