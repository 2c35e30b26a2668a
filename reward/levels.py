"""Meta-verifier levels, their score scales, and the structured grade result (README "Rewards").

Levels are ordered (`WRONG_POLARITY < POOR_MATCH < BASIC_MATCH < EXACT_MATCH`) so that the
hybrid grader can take `min(structural, judge)`. A level becomes a number only through a
`Scale`: the training scale (1.0 / 0.5 / 0.25 / 0.0, the default) or the benchmark scale
(1.0 / 0.75 / 0.5 / 0.0, the AdvancedMathBench meta metric).

Example:
    >>> Level.parse("basic_match") is Level.BASIC_MATCH
    True
    >>> get_scale("benchmark").score(Level.POOR_MATCH)
    0.5
    >>> min(Level.EXACT_MATCH, Level.POOR_MATCH).name
    'POOR_MATCH'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import Any


class Level(IntEnum):
    """How well a verifier output matches the expert annotation (higher is better)."""

    WRONG_POLARITY = 0
    POOR_MATCH = 1
    BASIC_MATCH = 2
    EXACT_MATCH = 3

    @classmethod
    def parse(cls, name: str) -> Level:
        """The level named `name` (case-insensitive, surrounding space ignored); KeyError if none."""
        key = name.strip().upper()
        if key not in cls.__members__:
            raise KeyError(f"unknown level {name!r}; expected one of {', '.join(cls.__members__)}")
        return cls[key]


LEVEL_NAMES: tuple[str, ...] = tuple(lvl.name for lvl in sorted(Level, reverse=True))


@dataclass(frozen=True)
class Scale:
    """Scores for the four levels; `name` is for logs and reports."""

    name: str
    exact: float
    basic: float
    poor: float
    wrong_polarity: float = 0.0

    def score(self, level: Level) -> float:
        return {Level.EXACT_MATCH: self.exact, Level.BASIC_MATCH: self.basic,
                Level.POOR_MATCH: self.poor, Level.WRONG_POLARITY: self.wrong_polarity}[level]


SCALES: dict[str, Scale] = {
    "training": Scale("training", 1.0, 0.5, 0.25, 0.0),
    "benchmark": Scale("benchmark", 1.0, 0.75, 0.5, 0.0),
    "polarity": Scale("polarity", 1.0, 1.0, 1.0, 0.0),
}
DEFAULT_SCALE = "training"

# The accept/reject incentives a GRPO recipe can train with (`reward_scale`): the three fixed scales
# above, and `balanced`, the training scale's grades made polarity-neutral per group
# (`proofcheck.reward.functions.balance_groups`).
INCENTIVES: tuple[str, ...] = ("training", "benchmark", "balanced", "polarity")
BALANCED_BONUS = 0.5  # `balanced`: weight of a reject's location grade around its group's mean


def indifference_belief(incentive: str, level: Level) -> float:
    """The belief that a proof is flawed at which accepting and rejecting it earn the same expected reward,
    for a verifier whose rejections of flawed proofs are graded `level` (README "Rewards").

    Accepting earns the accept-valid reward (EXACT) with probability 1 - p and 0 otherwise; rejecting
    earns the level's reward with probability p and 0 otherwise, so p* = 1 / (1 + score(level)).
    Under `balanced` a correct rejection earns 1 on average over its group whatever its grade (the
    grade only moves rejections around their group's mean), so p* = 0.5 at every level.

    Example:
        >>> indifference_belief("training", Level.POOR_MATCH), indifference_belief("balanced", Level.POOR_MATCH)
        (0.8, 0.5)
    """
    if level is Level.WRONG_POLARITY:
        raise ValueError("a rejection of a flawed proof has the right polarity: grade it EXACT, BASIC or POOR")
    if incentive not in INCENTIVES:
        raise ValueError(f"unknown incentive {incentive!r}; choose one of {', '.join(INCENTIVES)}")
    reject = 1.0 if incentive == "balanced" else SCALES[incentive].score(level)
    return round(1.0 / (1.0 + reject), 4)


def get_scale(scale: str | Scale | Mapping[str, float]) -> Scale:
    """A `Scale` from a name in `SCALES`, a `Scale`, or a mapping of level name -> score."""
    if isinstance(scale, Scale):
        return scale
    if isinstance(scale, str):
        if scale not in SCALES:
            raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
        return SCALES[scale]
    if isinstance(scale, Mapping):
        missing = [n for n in LEVEL_NAMES if n not in scale]
        if missing:
            raise ValueError(f"a custom scale needs a score for every level; missing {missing}")
        return Scale("custom", float(scale["EXACT_MATCH"]), float(scale["BASIC_MATCH"]),
                     float(scale["POOR_MATCH"]), float(scale["WRONG_POLARITY"]))
    raise TypeError(f"scale must be a name, a Scale or a mapping, not {type(scale).__name__}")


@dataclass(frozen=True)
class GradeResult:
    """One verifier output graded against the annotation.

    - valid output, graded: `level` and `score` set;
    - invalid verifier output (a verifier failure): `valid=False`, `level=None`, `score=0.0`;
    - grader failure (judge down / unparsable after retries): `grader_error` set, `level=None`,
      `score=None` (TRL drops the sample) — never a silent 0.
    `structural_level` / `judge_level` keep what each grader said (None when not asked).
    """

    level: Level | None
    score: float | None
    valid: bool
    invalid_reason: str | None = None
    grader_error: str | None = None
    structural_level: Level | None = None
    judge_level: Level | None = None
    endpoint_error: bool = False  # the grader failure is the judge endpoint's (status below), not its answer
    error_status: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: levels as their names."""
        d = asdict(self)
        for k in ("level", "structural_level", "judge_level"):
            d[k] = d[k].name if d[k] is not None else None
        return d


def invalid_result(reason: str | None) -> GradeResult:
    """The grade of an invalid verifier output: 0, whatever the grader."""
    return GradeResult(level=None, score=0.0, valid=False, invalid_reason=reason)
