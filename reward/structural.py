"""The structural grader: step indices only, deterministic, no model (README "Rewards").

Let f = the expert's first fatal step, R = recoverable steps (R' = R without the -1 marker),
S = the steps the verifier flagged (from `<errors>`, else `{first_error_step}`).

- polarity differs (valid vs invalid) -> WRONG_POLARITY; both say valid -> EXACT_MATCH;
- both invalid, f >= 0: f not in S -> POOR; f in S, every r in R' with r < f in S, and no
  flagged step < f outside {f} ∪ R' -> EXACT; else BASIC (flags after f are not false positives);
- both invalid, f = -1: S == R' -> EXACT; S ∩ R' non-empty -> BASIC; else POOR.

Example:
    >>> from proofcheck.schemas import Annotation
    >>> a = Annotation(first_fatal_error_step=3, recoverable_error_steps=[1])
    >>> structural_level(a, {1, 3}).name, structural_level(a, {3}).name, structural_level(a, {2}).name
    ('EXACT_MATCH', 'BASIC_MATCH', 'POOR_MATCH')
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from proofcheck.parsing import ParseResult, Verdict, parse_verifier_output
from proofcheck.reward.levels import GradeResult, Level, Scale, get_scale, invalid_result
from proofcheck.schemas import Annotation


def coerce_annotation(value: Annotation | Mapping[str, Any] | str) -> Annotation:
    """An `Annotation` from itself, a dict, or its JSON text (the dataset column format).

    Raises ValueError (pydantic's, naming the field) on a bad annotation: that is a data error.
    """
    if isinstance(value, Annotation):
        return value
    if isinstance(value, str):
        return Annotation.model_validate(json.loads(value))
    if isinstance(value, Mapping):
        return Annotation.model_validate(dict(value))
    raise TypeError(f"annotation must be an Annotation, a dict or JSON text, not {type(value).__name__}")


def flagged_steps(verdict: Verdict) -> frozenset[int]:
    """S: the steps named in `<errors>`, else `{first_error_step}` (empty for an accept)."""
    if verdict.flagged_steps:
        return frozenset(verdict.flagged_steps)
    return frozenset() if verdict.first_error_step < 0 else frozenset({verdict.first_error_step})


def annotation_flawed(annotation: Annotation) -> bool:
    """The expert marks an error: a fatal step, or recoverable ones (the gold polarity of every grade)."""
    return annotation.first_fatal_error_step >= 0 or bool(annotation.recoverable)


def structural_level(annotation: Annotation, flagged: Iterable[int]) -> Level:
    """The level the step indices allow; `flagged` empty means the verifier said "valid"."""
    s = set(flagged)
    f = annotation.first_fatal_error_step
    r = set(annotation.recoverable)
    gold_invalid = annotation_flawed(annotation)
    pred_invalid = bool(s)
    if gold_invalid != pred_invalid:
        return Level.WRONG_POLARITY
    if not gold_invalid:
        return Level.EXACT_MATCH
    if f >= 0:
        if f not in s:
            return Level.POOR_MATCH
        misses_before = any(x < f and x not in s for x in r)
        false_pos_before = any(x < f and x not in r for x in s)
        return Level.BASIC_MATCH if misses_before or false_pos_before else Level.EXACT_MATCH
    if s == r:
        return Level.EXACT_MATCH
    return Level.BASIC_MATCH if s & r else Level.POOR_MATCH


def grade_parsed(parsed: ParseResult, annotation: Annotation, scale: str | Scale = "training") -> GradeResult:
    """Grade an already parsed verifier output (invalid -> 0, valid=False)."""
    if parsed.verdict is None:
        return invalid_result(parsed.invalid_reason)
    level = structural_level(annotation, flagged_steps(parsed.verdict))
    return GradeResult(level=level, score=get_scale(scale).score(level), valid=True, structural_level=level)


def grade_structural(text: str, n_steps: int, annotation: Annotation | Mapping[str, Any] | str,
                     finish_reason: str | None = "stop", scale: str | Scale = "training") -> GradeResult:
    """Parse one raw verifier completion and grade it by step indices.

    Example:
        >>> from proofcheck.parsing import format_verdict
        >>> out = format_verdict("step 1 is wrong", [(1, "bad")], 1)
        >>> grade_structural(out, 3, {"first_fatal_error_step": 1, "recoverable_error_steps": [-1]}).score
        1.0
    """
    parsed = parse_verifier_output(text, n_steps, finish_reason)
    return grade_parsed(parsed, coerce_annotation(annotation), scale)
