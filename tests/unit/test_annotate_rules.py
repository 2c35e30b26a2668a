"""Annotation tool, no server: label rules on save, input validation, tokens, agreement maths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.data.annotate.agreement import Labels, cohen_kappa, compute_agreement, format_report
from proofcheck.data.annotate.auth import Authenticator, AuthError, parse_tokens
from proofcheck.data.annotate.models import QueueItem, SaveRequest
from proofcheck.data.annotate.service import ServiceError, build_record, load_queue, sidecar_paths
from proofcheck.data.loaders import DataError
from proofcheck.schemas import AnnotatedProof

RAW = {"problem_id": "p", "problem": "Show it.", "domain": "qe", "subject": "analysis", "proof_id": "p#0",
       "steps": ["s0", "s1", "s2", "s3"], "annotation": {"stale": True}, "is_correct": True, "custom": 7}


def req(fatal: int = -1, rec: list[int] | None = None, comment: str = "why") -> SaveRequest:
    return SaveRequest(first_fatal_error_step=fatal, recoverable_error_steps=rec or [-1], reviewer_comment=comment)


# (fatal, recoverable, comment) -> (is_correct, first_error_step)
GOOD = [
    (-1, [-1], "", (True, -1)),
    (2, [-1], "gap", (False, 2)),
    (2, [0], "gap", (False, 0)),
    (3, [1, 0], "gap", (False, 0)),
    (-1, [3], "minor slip", (False, 3)),
    (0, [-1], "wrong start", (False, 0)),
]


@pytest.mark.parametrize(("fatal", "rec", "comment", "expected"), GOOD)
def test_good_labels_give_amb_record(fatal: int, rec: list[int], comment: str, expected: tuple) -> None:
    out = build_record(RAW, "alice", req(fatal, rec, comment), "t0", "t1")
    assert (out["is_correct"], out["first_error_step"]) == expected
    assert out["annotation"]["first_fatal_error_step"] == fatal
    assert out["annotation"]["recoverable_error_steps"] == rec
    assert (out["annotator"], out["origin"], out["created_at"], out["updated_at"]) == ("alice", "expert", "t0", "t1")
    assert out["custom"] == 7 and "stale" not in out["annotation"]  # extras kept, old labels replaced
    AnnotatedProof.model_validate(out)  # loads as a VerifierBench record


# (fatal, recoverable, comment) -> words the 422 message must contain
BAD = [
    (2, [], "x", "not []"),
    (2, [-1, 0], "x", "[-1]"),
    (2, [0, 0], "x", "repeated"),
    (-2, [-1], "x", "-1"),
    (4, [-1], "x", "has 4 steps"),
    (-1, [9], "x", "has 4 steps"),
    (1, [1], "x", "not before the fatal step 1"),
    (1, [0, 2], "x", "not before the fatal step 1"),
    (2, [-1], "", "reviewer comment"),
    (-1, [0], "   ", "reviewer comment"),
]


@pytest.mark.parametrize(("fatal", "rec", "comment", "words"), BAD)
def test_bad_labels_are_422_with_reason(fatal: int, rec: list[int], comment: str, words: str) -> None:
    request = SaveRequest(first_fatal_error_step=fatal, recoverable_error_steps=rec, reviewer_comment=comment)
    with pytest.raises(ServiceError) as e:
        build_record(RAW, "alice", request, "t0", "t1")
    assert e.value.status == 422 and words in e.value.message


@pytest.mark.parametrize("body", [
    {"first_fatal_error_step": True, "recoverable_error_steps": [-1]},
    {"first_fatal_error_step": "2", "recoverable_error_steps": [-1]},
    {"first_fatal_error_step": 1, "recoverable_error_steps": [False]},
    {"first_fatal_error_step": 1, "recoverable_error_steps": [-1], "annotator": "mallory"},
])
def test_request_model_is_strict(body: dict) -> None:
    with pytest.raises(ValueError):
        SaveRequest.model_validate(body)


@pytest.mark.parametrize(("line", "words"), [
    ("{oops", "invalid JSON"),
    (json.dumps({**RAW, "steps": []}), "steps"),
    (json.dumps({**RAW, "steps": ["a", " "]}), "step 1 is empty"),
    (json.dumps({k: v for k, v in RAW.items() if k != "proof_id"}), "proof_id"),
    (json.dumps({**RAW, "domain": "grad"}), "domain"),
    (json.dumps(RAW), "duplicate id"),
])
def test_bad_input_names_file_line_field(tmp_path: Path, line: str, words: str) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(RAW) + "\n" + line + "\n")
    with pytest.raises(DataError) as e:
        load_queue(path)
    assert f"{path}:2:" in str(e.value) and words in str(e.value)


def test_selection_stats_are_collected() -> None:
    item = QueueItem.model_validate({**RAW, "selection": {"entropy_bits": 0.9}, "n_accept": 3, "verifier_passes": [{}]})
    assert item.selection_stats() == {"entropy_bits": 0.9, "n_accept": 3}


@pytest.mark.parametrize(("out", "broken", "journal"), [
    ("a/x.jsonl", "a/x.broken.jsonl", "a/x.journal.jsonl"),
    ("x.json", "x.json.broken.jsonl", "x.json.journal.jsonl"),
])
def test_sidecar_paths(out: str, broken: str, journal: str) -> None:
    assert sidecar_paths(out) == (Path(broken), Path(journal))


@pytest.mark.parametrize(("spec", "expected"), [
    ("alice:s3cret", {"alice": "s3cret"}),
    (" alice : a:b , bob:t ,", {"alice": "a:b", "bob": "t"}),
    ("alice", ValueError), ("alice:", ValueError), (":tok", ValueError), ("", ValueError),
    ("a:1,a:2", ValueError), ("bad/name:t", ValueError),
])
def test_parse_tokens(spec: str, expected: dict | type) -> None:
    if isinstance(expected, dict):
        assert parse_tokens(spec) == expected
    else:
        with pytest.raises(expected):
            parse_tokens(spec)


TOKENS = {"alice": "s3cret", "bob": "hunter2"}


@pytest.mark.parametrize(("tokens", "name", "auth", "expected"), [
    (None, "carol", None, "carol"),
    (None, "", None, AuthError),
    (None, "no/slash", None, AuthError),
    (TOKENS, "alice", "Bearer s3cret", "alice"),
    (TOKENS, "alice", "bearer s3cret", "alice"),
    (TOKENS, "alice", "Bearer hunter2", AuthError),
    (TOKENS, "alice", None, AuthError),
    (TOKENS, "alice", "Basic s3cret", AuthError),
    (TOKENS, "mallory", "Bearer s3cret", AuthError),
    (TOKENS, "mallory", "Bearer ", AuthError),
])
def test_identify(tokens: dict | None, name: str, auth: str | None, expected: str | type) -> None:
    a = Authenticator(tokens)
    if isinstance(expected, str):
        assert a.identify(name, auth) == expected
    else:
        with pytest.raises(expected):
            a.identify(name, auth)


@pytest.mark.parametrize(("pairs", "kappa"), [
    ([(True, True), (False, False), (True, False), (False, False)], 0.5),
    ([(True, True), (False, False)], 1.0),
    ([(True, False), (False, True)], -1.0),
    ([(True, True), (True, True)], None),  # no variation: undefined
    ([], None),
])
def test_cohen_kappa(pairs: list, kappa: float | None) -> None:
    got = cohen_kappa(pairs)
    assert got == kappa if kappa is None else got == pytest.approx(kappa)


def lab(who: str, fatal: int, rec: list[int] | None = None) -> Labels:
    rec = rec or []
    correct = fatal == -1 and not rec
    first = min(rec + ([fatal] if fatal >= 0 else [])) if not correct else -1
    return Labels(who, correct, fatal, rec, first, "")


def test_agreement_pairs_and_disagreements() -> None:
    data = [("p1", lab("a", -1)), ("p1", lab("b", -1)),
            ("p2", lab("a", 2)), ("p2", lab("b", 2, [0])),
            ("p3", lab("a", 1)), ("p3", lab("b", 3)),
            ("p4", lab("a", -1)), ("p4", lab("b", 0)),
            ("p5", lab("a", 1))]  # single annotator: not compared
    rep = compute_agreement(data)
    assert (rep.n_records, rep.n_items, rep.n_shared) == (9, 5, 4)
    s = rep.overall
    assert s.n == 4 and s.polarity_agreement == 0.75 and s.fatal_exact == 0.5 and s.first_error_exact == 0.25
    assert s.kappa == pytest.approx(cohen_kappa([(True, True), (False, False), (False, False), (True, False)]))
    assert [d[0] for d in rep.disagreements] == ["p3", "p4"]
    text = format_report(rep)
    assert "| a / b | 4 | 0.750 |" in text and "- p3: a: flawed, fatal 1" in text
