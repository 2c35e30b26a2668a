"""The release's results files load unchanged: `metrics verifier --outputs`, `data validate`.

The results file is written in the AdvancedMathBench release's record shape (its cli.py: one
line per proof with `verifier_trials` entries {index, response {text, finish_reason, error},
parsed, error, valid}, plus `inputs`, `run_id`, `record_key`). Expected numbers are computed by
hand from the table below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.app.cli import main
from proofcheck.data.loaders import SAMPLES_DIR

DATA = SAMPLES_DIR / "annotated.jsonl"
# ugd-001-p1: correct, 5 steps; ugd-001-p2: fatal at 4; ugd-002-p1: first error 1.
ASSUMED = {"ugd-001-p1": (True, -1), "ugd-001-p2": (False, 4), "ugd-002-p1": (False, 1)}


def verdict(step: int) -> str:
    return (f"<assessment>Checked.</assessment><errors>{'None' if step < 0 else 'Item 1. wrong'}</errors>"
            f"<first_error_step>{step}</first_error_step>")


def release_row(pid: str, trials: list[tuple[str, str | None, str | None]]) -> dict:
    return {"problem_id": pid.rsplit("-", 1)[0], "domain": "ugd", "subject": "S", "sample_index": 0,
            "problem": "...", "inputs": {"verifier_prompt": "..."}, "proof_id": pid, "steps": ["s"] * 5,
            "is_correct": ASSUMED[pid][0], "first_error_step": ASSUMED[pid][1], "run_id": "abc",
            "record_key": "000000_000", "policy": None, "verifier": "v",
            "verifier_trials": [{"index": i, "response": {"text": t, "finish_reason": f, "error": e}, "parsed": None,
                                 "error": e, "valid": False} for i, (t, f, e) in enumerate(trials)]}


# (rows, R) -> hand-computed: rough per proof, then TPR (correct) / TNR (incorrect)
ROWS = [
    release_row("ugd-001-p1", [(verdict(-1), "stop", None), (verdict(2), "stop", None)]),  # rough 1/2
    release_row("ugd-001-p2", [(verdict(4), "stop", None), (verdict(4), "length", None)]),  # rough 1/2, fes 1/2
    release_row("ugd-002-p1", [(verdict(1), "stop", None), (verdict(-1), None, None)]),  # rough 1/2, fes 1/2
]


def write_release_run(root: Path, rows: list[dict], repeats: int = 2) -> Path:
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"task": "verifier", "selected_rows": len(rows),
                                                    "settings": {"samples": 1, "verifier_repeats": repeats}}))
    (root / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_samples_have_the_labels_assumed() -> None:
    rows = {json.loads(x)["proof_id"]: json.loads(x) for x in DATA.read_text().splitlines()}
    assert {k: (rows[k]["is_correct"], rows[k]["first_error_step"]) for k in ASSUMED} == ASSUMED


@pytest.mark.parametrize("as_folder", [False, True])
def test_metrics_verifier_reads_release_results(tmp_path: Path, as_folder: bool,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = write_release_run(tmp_path / "run", ROWS)
    target = run if as_folder else run / "results.jsonl"
    assert main(["metrics", "verifier", "--data", str(DATA), "--outputs", str(target), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["rough_tpr"], s["rough_tnr"]) == (0.5, 0.5) and s["rough_bal_f1"] == pytest.approx(0.5)
    assert s["first_error_step_accuracy"] == pytest.approx((0.5 + 0.5 + 0.5) / 3)  # p1: -1 once; p2, p3: once
    assert s["verifier_valid_rate"] == pytest.approx(4 / 6) and s["complete"] is True
    assert s["n_proofs"] == 3 and s["n_proofs_without_outputs"] == sum(1 for _ in DATA.open()) - 3


def test_metrics_verifier_release_endpoint_error_is_incomplete(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    rows = [*ROWS[:2], release_row("ugd-002-p1", [(verdict(1), "stop", None), ("", None, "HTTP 503: busy")])]
    run = write_release_run(tmp_path / "run", rows)
    assert main(["metrics", "verifier", "--data", str(DATA), "--outputs", str(run / "results.jsonl"), "--json"]) == 3
    captured = capsys.readouterr()
    s = json.loads(captured.out)
    assert s["complete"] is False and s["errored_passes"] == 1 and s["rough_bal_f1"] is None
    assert "1 errored passes" in captured.err


@pytest.mark.parametrize(("name", "lines", "kind", "why"), [
    ("results.jsonl", [ROWS[0]], "results", "line 1 has verifier_trials"),
    ("annotated.jsonl", None, "annotated", "line 1 has annotation"),
    ("outputs.jsonl", [{"proof_id": "x", "repeat": 0, "text": "t"}], "output", "line 1 has text and proof_id"),
    ("subs.jsonl", [{"problem_id": "p", "sample": 0, "proof": "a"}], "submission", "line 1 has sample"),
])
def test_validate_says_which_kind_it_read(tmp_path: Path, name: str, lines: list[dict] | None, kind: str, why: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA if lines is None else tmp_path / name
    if lines is not None:
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["data", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: read as {kind} records ({why})" in out


@pytest.mark.parametrize("kind", ["problem", "annotated", "submission"])
def test_a_results_file_given_as_inputs_is_rejected(tmp_path: Path, kind: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    results = write_release_run(tmp_path / "run", ROWS) / "results.jsonl"
    assert main(["data", "validate", "--kind", kind, str(results)]) == 1
    out = capsys.readouterr().out
    assert f"{results}:1: verifier_trials: this is a results file" in out and "metrics --records" in out
    assert f"{results}: 0 valid {kind} record(s)" in out


def test_score_prover_refuses_results_as_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = write_release_run(tmp_path / "run", ROWS) / "results.jsonl"
    rc = main(["score", "prover", "--problems", str(results), "--submissions", str(SAMPLES_DIR / "submissions.jsonl"),
               "--endpoint", "http://127.0.0.1:9/v1", "--endpoint-model", "m", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and f"{results}:1: verifier_trials: this is a results file" in err
