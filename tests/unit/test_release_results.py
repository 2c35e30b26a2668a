"""`proofcheck metrics --records` reads the AdvancedMathBench release's results folders unchanged.

The folder below is written in the release's record shape (cli.py: `verifier_trials` entries
with `response` {text, finish_reason, error}, `parsed`, `valid`; `manifest.json` with `task`
and `settings`). Expected numbers are computed by hand from the table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.bench.scoring import summarise_records


def verdict(step: int) -> str:
    return f"<assessment>Checked.</assessment><errors>{'Bad' if step >= 0 else ''}</errors><first_error_step>{step}</first_error_step>"


def trial(i: int, text: str, finish: str | None = "stop", error: str | None = None) -> dict:
    return {"index": i, "response": {"text": text, "finish_reason": finish, "error": error}, "parsed": None,
            "error": error, "valid": False}


def write_run(root: Path, task: str, records: list[dict], repeats: int) -> Path:
    root.mkdir()
    manifest = {"evaluator_version": "0.1", "protocol": "basic-v1", "task": task, "selected_rows": len(records),
                "settings": {"samples": 1, "verifier_repeats": repeats, "meta": False, "domain": "all",
                             "use_reference_solution": task == "prover"}, "config": {"verifier": {"model": "v"}}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root / "results.jsonl"


def vrow(pid: str, correct: bool, trials: list[dict]) -> dict:
    return {"problem_id": pid, "proof_id": pid + "-v", "domain": "ugd", "subject": "Algebra", "sample_index": 0,
            "steps": ["a", "b"], "is_correct": correct, "first_error_step": -1 if correct else 1,
            "verifier_trials": trials}


def test_release_verifier_results(tmp_path: Path) -> None:
    records = [
        vrow("p1", True, [trial(0, verdict(-1)), trial(1, verdict(-1), finish=None)]),  # 1 of 2: null finish
        vrow("p2", False, [trial(0, verdict(1)), trial(1, "no tags at all")]),  # 1 of 2: invalid output
    ]
    s = summarise_records(write_run(tmp_path / "run", "verifier", records, 2))
    assert (s["rough_tpr"], s["rough_tnr"]) == (0.5, 0.5)
    assert s["rough_bal_f1"] == pytest.approx(0.5) and s["rough_accuracy"] == 0.5
    assert s["first_error_step_accuracy"] == 0.5 and s["verifier_valid_rate"] == 0.5
    assert s["errored_passes"] == 0 and s["complete"] is True


def test_release_results_with_an_endpoint_error_give_no_scores(tmp_path: Path) -> None:
    records = [
        vrow("p1", True, [trial(0, verdict(-1)), trial(1, verdict(-1))]),
        vrow("p2", False, [trial(0, verdict(1)), trial(1, "", finish=None, error="HTTP_401")]),  # endpoint error
    ]
    s = summarise_records(write_run(tmp_path / "run", "verifier", records, 2))
    assert s["errored_passes"] == 1 and s["complete"] is False  # the release's HTTP_401 is an error, not a verdict
    assert s["endpoint_errors"]["examples"] == {"None": "HTTP_401"}
    assert s["rough_bal_f1"] is None and s["splits"]["all"]["rough_tpr"] is None  # incomplete: no scores
    assert s["n_proofs"] == 2 and s["splits"]["all"]["complete"] is False


def test_release_prover_results(tmp_path: Path) -> None:
    records = [
        {"problem_id": "a", "domain": "qe", "subject": "S", "sample_index": 0, "steps": ["x"], "generation_error": None,
         "verifier_trials": [trial(0, verdict(-1)), trial(1, verdict(-1))]},
        {"problem_id": "b", "domain": "qe", "subject": "S", "sample_index": 0, "steps": [], "generation_error":
         "non_stop_finish", "verifier_trials": []},
    ]
    s = summarise_records(write_run(tmp_path / "run", "prover", records, 2))
    assert s["pessimistic"] == 0.5 and s["generation_failure_rate"] == 0.5 and s["complete"] is True
