"""`proofcheck grade` on the shipped samples: hand-computed levels, resume, errors, judge retries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proofcheck.app.cli import main
from proofcheck.data.loaders import SAMPLES_DIR
from proofcheck.io import read_jsonl_tolerant
from proofcheck.serve.scripted import Reply, ScriptedServer

DATA = SAMPLES_DIR / "annotated.jsonl"
# The labels the hand computation below relies on: (n_steps, fatal, recoverable).
ASSUMED = {"ugd-001-p1": (5, -1, [-1]), "ugd-001-p2": (5, 4, [-1]), "ugd-002-p1": (5, 3, [1]),
           "ugd-009-p1": (6, 3, [1, 2]), "qe-005-p2": (5, -1, [2, 4])}


def answer(flagged: list[int], first: int | None = None) -> str:
    """A hand-written verifier answer naming `flagged` steps."""
    errs = "\n".join(f"Step {s}: this does not follow." for s in flagged)
    k = (min(flagged) if flagged else -1) if first is None else first
    return f"<assessment>I read every step.</assessment>\n<errors>{errs}</errors>\n<first_error_step>{k}</first_error_step>"


# (proof_id, repeat, text, finish_reason, level by hand, training score)
OUTPUTS = [
    ("ugd-001-p1", 0, answer([]), "stop", "EXACT_MATCH", 1.0),  # both valid
    ("ugd-001-p1", 1, answer([2]), "stop", "WRONG_POLARITY", 0.0),  # flags a valid proof
    ("ugd-001-p2", 0, answer([]), "stop", "WRONG_POLARITY", 0.0),  # accepts a fatal error
    ("ugd-001-p2", 1, answer([4]), "stop", "EXACT_MATCH", 1.0),  # f=4 found
    ("ugd-002-p1", 0, answer([1, 3]), "stop", "EXACT_MATCH", 1.0),  # f=3 and r=1 found
    ("ugd-002-p1", 1, answer([3]), "stop", "BASIC_MATCH", 0.5),  # r=1 < f missed
    ("ugd-002-p1", 2, answer([2]), "stop", "POOR_MATCH", 0.25),  # f missed
    ("ugd-002-p1", 3, answer([1, 3, 4]), "stop", "EXACT_MATCH", 1.0),  # flag after f is no false positive
    ("ugd-002-p1", 4, answer([0, 1, 3]), "stop", "BASIC_MATCH", 0.5),  # false positive 0 < f
    ("ugd-002-p1", 5, answer([1, 3]), "length", None, 0.0),  # truncated: invalid
    ("ugd-009-p1", 0, answer([1, 3]), "stop", "BASIC_MATCH", 0.5),  # r=2 < f missed
    ("qe-005-p2", 0, answer([2, 4]), "stop", "EXACT_MATCH", 1.0),  # S == R'
    ("qe-005-p2", 1, answer([4]), "stop", "BASIC_MATCH", 0.5),  # overlap
    ("qe-005-p2", 2, answer([1]), "stop", "POOR_MATCH", 0.25),  # disjoint
    ("qe-005-p2", 3, answer([]), "stop", "WRONG_POLARITY", 0.0),
    ("qe-005-p2", 4, "I think it is fine.", "stop", None, 0.0),  # no tags: invalid
]


@pytest.fixture(scope="module")
def samples_checked() -> Path:
    found = {}
    for line in DATA.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r["proof_id"] in ASSUMED:
            a = r["annotation"]
            found[r["proof_id"]] = (len(r["steps"]), a["first_fatal_error_step"], a["recoverable_error_steps"])
    assert found == ASSUMED, "data/samples/annotated.jsonl changed: update the hand-computed levels here"
    return DATA


def write_outputs(path: Path, rows: list[tuple]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for pid, rep, text, fin, *_ in rows:
            f.write(json.dumps({"proof_id": pid, "repeat": rep, "text": text, "finish_reason": fin}) + "\n")
    return path


def by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    keys = [(r["proof_id"], r["repeat"]) for r in rows]
    assert len(keys) == len(set(keys)), "duplicate grades"
    return dict(zip(keys, rows, strict=True))


def test_structural_levels_by_hand_and_resume(samples_checked: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    outputs = write_outputs(tmp_path / "o.jsonl", OUTPUTS)
    out = tmp_path / "g.jsonl"
    assert main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(out),
                 "--scale", "training"]) == 0
    table = capsys.readouterr().out
    assert "structural" in table and "BASIC_MATCH" in table and "mean score" in table
    graded = by_key(read_jsonl_tolerant(out))
    assert set(graded) == {(o[0], o[1]) for o in OUTPUTS}
    for pid, rep, _, _, level, score in OUTPUTS:
        g = graded[(pid, rep)]
        assert (g["level"], g["score"], g["valid"], g["grader_error"]) == (level, score, level is not None, None), pid
    # a crash: the last three lines lost and a torn tail; the re-run grades only what is missing
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(lines[:-3]) + '{"proof_id": "ugd-0', encoding="utf-8")
    assert main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(out),
                 "--scale", "training", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert out.read_text(encoding="utf-8").splitlines(keepends=True) == lines
    assert summary["n_outputs"] == len(OUTPUTS) and summary["grader_failures"] == 0
    assert summary["levels"] == {"EXACT_MATCH": 5, "BASIC_MATCH": 4, "POOR_MATCH": 2, "WRONG_POLARITY": 3,
                                 "INVALID": 2, "GRADER_ERROR": 0}
    assert summary["mean_score"] == pytest.approx(sum(o[5] for o in OUTPUTS) / len(OUTPUTS))
    # nothing left to do: no new line
    assert main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(out),
                 "--scale", "training"]) == 0
    assert out.read_text(encoding="utf-8").splitlines(keepends=True) == lines


def test_benchmark_scale_by_default_as_score_verifier(samples_checked: Path, tmp_path: Path) -> None:
    outputs = write_outputs(tmp_path / "o.jsonl", OUTPUTS)
    out = tmp_path / "g.jsonl"
    assert main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(out)]) == 0
    # the benchmark scale of the hand-computed level of each row (not of the level the code wrote)
    bench = {"EXACT_MATCH": 1.0, "BASIC_MATCH": 0.75, "POOR_MATCH": 0.5, "WRONG_POLARITY": 0.0, None: 0.0}
    graded = by_key(read_jsonl_tolerant(out))
    assert len(graded) == len(OUTPUTS) == 16
    for pid, rep, _, _, level, _ in OUTPUTS:
        assert (graded[(pid, rep)]["level"], graded[(pid, rep)]["score"]) == (level, bench[level]), (pid, rep)


@pytest.mark.parametrize(("extra", "message"), [
    (["--mode", "judge"], "--mode judge needs a judge"),
    (["--mode", "hybrid"], "--mode hybrid needs a judge"),
    (["--judge-endpoint", "http://127.0.0.1:9/v1"], "--judge-model"),
])
def test_judge_modes_without_a_judge_fail_clearly(samples_checked: Path, tmp_path: Path, extra: list[str],
                                                   message: str, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = write_outputs(tmp_path / "o.jsonl", OUTPUTS[:1])
    rc = main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(tmp_path / "g"),
               *extra])
    assert rc == 2 and message in capsys.readouterr().err  # a usage error, found before any work
    assert not (tmp_path / "g").exists()


def test_bad_outputs_name_file_and_line(samples_checked: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    outputs = tmp_path / "o.jsonl"
    outputs.write_text(json.dumps({"proof_id": "nope", "repeat": 0, "text": "x"}) + "\n"
                       + json.dumps({"proof_id": "ugd-001-p1", "repeat": "zero", "text": "x"}) + "\n")
    rc = main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(tmp_path / "g")])
    err = capsys.readouterr().err
    assert rc == 1 and f"{outputs}:2: repeat" in err
    outputs.write_text(json.dumps({"proof_id": "nope", "repeat": 0, "text": "x"}) + "\n")
    rc = main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(tmp_path / "g")])
    assert rc == 1 and "'nope' is not in" in capsys.readouterr().err


@pytest.fixture
def flaky_judge() -> Iterator[tuple[ScriptedServer, dict[str, bool]]]:
    state = {"up": False}
    with ScriptedServer(lambda req, i: Reply("<level>POOR_MATCH</level>") if state["up"]
                        else Reply(status=503)) as srv:
        yield srv, state


def test_hybrid_grader_failures_are_retried_on_rerun(samples_checked: Path, tmp_path: Path,
                                                     flaky_judge: tuple[ScriptedServer, dict[str, bool]],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    srv, state = flaky_judge
    outputs = write_outputs(tmp_path / "o.jsonl", OUTPUTS)
    out = tmp_path / "g.jsonl"
    args = ["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(out),
            "--judge-endpoint", srv.url, "--judge-model", "judge", "--max-retries", "1", "--concurrency", "4",
            "--judge-cache-dir", str(tmp_path / "cache"), "--json"]
    # the judge is asked only where both sides say invalid with a valid output: 10 of the 16 outputs
    asked = {(o[0], o[1]) for o in OUTPUTS if o[4] in ("EXACT_MATCH", "BASIC_MATCH", "POOR_MATCH")
             and o[0] != "ugd-001-p1"}
    assert main(args) == 3  # incomplete: the judge endpoint failed
    captured = capsys.readouterr()
    first = json.loads(captured.out)
    assert "incomplete grading: 10 errored passes, 10 grader failures" in captured.err
    assert first["grader_failures"] == len(asked) == 10 and first["judge"]["failures"] == 10
    assert first["errored_passes"] == 10 and first["endpoint_errors"]["by_status"] == {"503": 10}
    assert first["complete"] is False and first["mean_score"] is None and first["mean_score_so_far"] is not None
    rows = by_key(read_jsonl_tolerant(out))
    assert {k for k, r in rows.items() if r["grader_error"]} == asked
    assert all(rows[k]["score"] is None and rows[k]["level"] is None for k in asked)
    assert all(rows[k]["endpoint_error"] and rows[k]["error_status"] == 503 for k in asked)
    state["up"] = True
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    rows = by_key(read_jsonl_tolerant(out))
    assert len(rows) == len(OUTPUTS) and second["grader_failures"] == 0
    assert second["complete"] is True and second["errored_passes"] == 0 and second["mean_score"] is not None
    for pid, rep, _, _, level, _ in OUTPUTS:
        g = rows[(pid, rep)]
        expect = "POOR_MATCH" if (pid, rep) in asked else level  # hybrid: min(structural, POOR)
        assert (g["level"], g["structural_level"]) == (expect, level), (pid, rep)
        assert g["judge_level"] == ("POOR_MATCH" if (pid, rep) in asked else None)
    # a third run: nothing to do, and the cache would answer anyway
    calls = len(srv.calls)
    assert main(args) == 0
    assert len(srv.calls) == calls and len(read_jsonl_tolerant(out)) == len(OUTPUTS)


def test_unparsable_judge_answers_are_grader_failures_not_endpoint_errors(samples_checked: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    outputs = write_outputs(tmp_path / "o.jsonl", OUTPUTS)
    with ScriptedServer(lambda req, i: Reply("no level tag here")) as srv:
        rc = main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(tmp_path / "g"),
                   "--judge-endpoint", srv.url, "--judge-model", "judge", "--max-retries", "0", "--json"])
    s = json.loads(capsys.readouterr().out)
    assert rc == 3 and s["grader_failures"] == 10 and s["errored_passes"] == 0 and s["complete"] is False


@pytest.mark.parametrize(("status", "fix"), [(401, "--judge-api-key-env"), (404, "served model name")])
def test_refused_judge_stops_at_once_with_the_fix(samples_checked: Path, tmp_path: Path, status: int, fix: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    outputs = write_outputs(tmp_path / "o.jsonl", OUTPUTS)
    with ScriptedServer(lambda req, i: Reply(status=status)) as srv:
        rc = main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(tmp_path / "g"),
                   "--judge-endpoint", srv.url, "--judge-model", "judge", "--concurrency", "1"])
        calls = len(srv.calls)
    err = capsys.readouterr().err
    assert rc == 3 and f"HTTP {status}" in err and fix in err
    assert calls == 1  # not once per output
    assert not any(r["grader_error"] for r in read_jsonl_tolerant(tmp_path / "g"))  # no error became a row


def test_unset_judge_key_variable_is_exit_2_before_any_request(samples_checked: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    outputs = write_outputs(tmp_path / "o.jsonl", OUTPUTS)
    with ScriptedServer(lambda req, i: Reply("<level>EXACT_MATCH</level>")) as srv:
        rc = main(["grade", "--data", str(samples_checked), "--outputs", str(outputs), "--out", str(tmp_path / "g"),
                   "--judge-endpoint", srv.url, "--judge-model", "judge", "--judge-api-key-env", "PC_SURELY_UNSET_VAR"])
        calls = list(srv.calls)
    err = capsys.readouterr().err
    assert rc == 2 and "PC_SURELY_UNSET_VAR" in err and "--judge-api-key-env" in err and calls == []
