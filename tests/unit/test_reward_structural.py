"""The structural meta-verifier grader: every grading rule (README "Rewards"), table-driven."""

from __future__ import annotations

import pytest

from proofcheck.parsing import format_verdict
from proofcheck.reward.levels import GradeResult, Level, Scale, get_scale
from proofcheck.reward.structural import grade_structural, structural_level
from proofcheck.schemas import Annotation

E, B, P, W = Level.EXACT_MATCH, Level.BASIC_MATCH, Level.POOR_MATCH, Level.WRONG_POLARITY
N_STEPS = 8


def ann(fatal: int, rec: list[int] | None = None) -> Annotation:
    return Annotation(first_fatal_error_step=fatal, recoverable_error_steps=rec or [-1])


def output(flagged: list[int]) -> str:
    """A valid verifier answer flagging `flagged` (empty = says valid)."""
    errs = [(s, f"something is wrong in step {s}") for s in sorted(flagged)]
    return format_verdict("checked each step", errs, min(flagged) if flagged else -1)


# (case, fatal, recoverable, flagged, expected level)
CASES = [
    ("both valid", -1, None, [], E),
    ("gold valid, verifier flags", -1, None, [2], W),
    ("gold fatal, verifier accepts", 3, None, [], W),
    ("gold recoverable only, verifier accepts", -1, [2], [], W),
    ("fatal found alone", 3, None, [3], E),
    ("fatal missed, earlier step flagged", 3, None, [1], P),
    ("fatal missed, later step flagged", 3, None, [5], P),
    ("fatal found, recoverable before it found", 3, [1], [1, 3], E),
    ("fatal found, recoverable before it missed", 3, [1], [3], B),
    ("fatal found, one of two earlier recoverables missed", 4, [0, 2], [0, 4], B),
    ("fatal found, recoverable after it not needed", 3, [5], [3], E),
    ("fatal found, recoverable after it also found", 3, [5], [3, 5], E),
    ("fatal found, false positive before it", 3, None, [0, 3], B),
    ("fatal found, false positives after it are fine", 3, None, [3, 4, 6], E),
    ("fatal found with recoverable, plus false positive before", 4, [1], [1, 2, 4], B),
    ("recoverable found but fatal missed", 3, [1], [1], P),
    ("fatal at step 0 found", 0, None, [0], E),
    ("fatal at step 0 missed", 0, None, [1], P),
    ("recoverable-only: S == R' exact", -1, [2, 5], [2, 5], E),
    ("recoverable-only: overlap basic (miss one)", -1, [2, 5], [2], B),
    ("recoverable-only: overlap basic (extra flag)", -1, [2], [2, 6], B),
    ("recoverable-only: disjoint poor", -1, [2], [4], P),
]


@pytest.mark.parametrize(("case", "fatal", "rec", "flagged", "expected"), CASES, ids=[c[0] for c in CASES])
def test_structural_rules(case: str, fatal: int, rec: list[int] | None, flagged: list[int], expected: Level) -> None:
    a = ann(fatal, rec)
    assert structural_level(a, flagged) is expected
    # the same through the parser: S comes from <errors>
    r = grade_structural(output(flagged), N_STEPS, a)
    assert r.valid and r.level is expected and r.structural_level is expected
    assert r.score == get_scale("training").score(expected)
    assert r.grader_error is None and r.judge_level is None


def test_flagged_falls_back_to_first_error_step() -> None:
    from proofcheck.parsing import Verdict
    from proofcheck.reward.structural import flagged_steps

    v = Verdict("a", (), 3, ())
    assert flagged_steps(v) == {3}
    assert flagged_steps(Verdict("a", (), -1, ())) == frozenset()


# invalid verifier outputs -> 0, valid=False, whatever the annotation
INVALID = [
    ("no tags", "the proof is fine", "stop", "missing_tag"),
    ("truncated", output([3]), "length", "non_stop_finish"),
    ("unclosed thinking", "<think>hmm " + output([3]), "stop", "unfinished_thinking"),
    ("empty", "", "stop", "empty_output"),
    ("step out of range", output([9]), "stop", "bad_step_index"),
    ("null finish reason", output([3]), None, "non_stop_finish"),
    ("duplicate verdict", output([3]) + output([3]), "stop", "duplicate_tag"),
]


@pytest.mark.parametrize(("case", "text", "finish", "reason"), INVALID, ids=[c[0] for c in INVALID])
@pytest.mark.parametrize("annotation", [ann(-1), ann(3, [1])], ids=["gold-valid", "gold-invalid"])
def test_invalid_outputs_score_zero(case: str, text: str, finish: str, reason: str, annotation: Annotation) -> None:
    r = grade_structural(text, N_STEPS, annotation, finish_reason=finish)
    assert r == GradeResult(level=None, score=0.0, valid=False, invalid_reason=reason)


@pytest.mark.parametrize(("scale", "scores"), [
    ("training", {E: 1.0, B: 0.5, P: 0.25, W: 0.0}),
    ("benchmark", {E: 1.0, B: 0.75, P: 0.5, W: 0.0}),
])
def test_scales(scale: str, scores: dict[Level, float]) -> None:
    for flagged, level in (([3], E), ([1, 3], B), ([5], P), ([], W)):
        r = grade_structural(output(flagged), N_STEPS, ann(3), scale=scale)
        assert r.level is level and r.score == scores[level]


@pytest.mark.parametrize("annotation", [
    '{"first_fatal_error_step": 3, "recoverable_error_steps": [1]}',
    {"first_fatal_error_step": 3, "recoverable_error_steps": [1]},
    ann(3, [1]),
], ids=["json-text", "dict", "model"])
def test_annotation_forms(annotation: object) -> None:
    assert grade_structural(output([1, 3]), N_STEPS, annotation).level is E


@pytest.mark.parametrize(("bad", "exc"), [
    ('{"first_fatal_error_step": true, "recoverable_error_steps": [-1]}', ValueError),
    ({"first_fatal_error_step": 2, "recoverable_error_steps": []}, ValueError),
    (42, TypeError),
])
def test_bad_annotation_raises(bad: object, exc: type) -> None:
    with pytest.raises(exc):
        grade_structural(output([3]), N_STEPS, bad)


def test_custom_and_unknown_scales() -> None:
    custom = get_scale({"EXACT_MATCH": 2, "BASIC_MATCH": 1, "POOR_MATCH": 0.5, "WRONG_POLARITY": -1})
    assert isinstance(custom, Scale) and custom.score(W) == -1.0
    with pytest.raises(ValueError, match="unknown scale"):
        get_scale("nope")
    with pytest.raises(ValueError, match="missing"):
        get_scale({"EXACT_MATCH": 1})


def test_result_to_dict_uses_level_names() -> None:
    d = grade_structural(output([3]), N_STEPS, ann(3)).to_dict()
    assert d["level"] == "EXACT_MATCH" and d["structural_level"] == "EXACT_MATCH" and d["judge_level"] is None


def test_level_order_and_parse() -> None:
    assert W < P < B < E
    assert Level.parse(" exact_match ") is E
    with pytest.raises(KeyError):
        Level.parse("GREAT_MATCH")
