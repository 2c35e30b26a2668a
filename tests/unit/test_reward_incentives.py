"""The accept/reject incentives (`reward_scale`) and the per-batch checking diagnostics, by hand.

Every expected number below is computed by hand from the README "Rewards" table, not by the code.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from proofcheck.parsing import format_verdict
from proofcheck.reward.diagnostics import Outcome, batch_diagnostics, zero_spread_shares
from proofcheck.reward.functions import MetaVerifierReward, balance_groups
from proofcheck.reward.levels import INCENTIVES, GradeResult, Level, indifference_belief, invalid_result

FLAWED = json.dumps({"first_fatal_error_step": 2, "recoverable_error_steps": [0],
                     "remark": "synthetic:linear:sign_slip"})
VALID = json.dumps({"first_fatal_error_step": -1, "recoverable_error_steps": [-1], "remark": "synthetic:parity:valid"})


def out(flagged: list[int]) -> str:
    return format_verdict("checked", [(s, "wrong") for s in flagged], min(flagged) if flagged else -1)


EXACT, BASIC, POOR, ACCEPT = out([0, 2]), out([2]), out([3]), out([])
INVALID = "no verdict here"

# One GRPO-shaped batch: proof "f" (flawed) answered 4 times, proof "v" (valid) answered 4 times.
TEXTS = [EXACT, POOR, ACCEPT, INVALID, ACCEPT, ACCEPT, BASIC, ACCEPT]
ANNS = [FLAWED] * 4 + [VALID] * 4
IDS = ["f"] * 4 + ["v"] * 4

# incentive -> the 8 rewards, by hand:
#  training:  EXACT 1, POOR .25, accept-flawed 0, invalid 0 | accept-valid 1, 1, reject-valid 0, 1
#  benchmark: POOR earns .5
#  polarity:  every right-polarity answer 1
#  balanced:  rejections of "f" graded 1 and .25 (mean .625): 1 + .5 * (+.375) = 1.1875, 1 + .5 * (-.375) = .8125
EXPECTED = {
    "training": [1.0, 0.25, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0],
    "benchmark": [1.0, 0.5, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0],
    "polarity": [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0],
    "balanced": [1.1875, 0.8125, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0],
}


def columns(**extra: Any) -> dict[str, Any]:
    return {"annotation": ANNS, "n_steps": [4] * len(TEXTS), "proof_id": IDS, **extra}


@pytest.mark.parametrize("incentive", INCENTIVES)
def test_each_incentive_rewards_the_batch_as_the_table_says(incentive: str) -> None:
    fn = MetaVerifierReward(scale=incentive)
    assert fn(TEXTS, **columns()) == pytest.approx(EXPECTED[incentive])
    assert pickle.loads(pickle.dumps(fn))(TEXTS, **columns()) == pytest.approx(EXPECTED[incentive])


@pytest.mark.parametrize(("incentive", "level", "belief"), [
    # p* = 1 / (1 + reward of a rejection at that level); accept-valid earns 1
    ("training", Level.EXACT_MATCH, 0.5), ("training", Level.BASIC_MATCH, 0.6667),
    ("training", Level.POOR_MATCH, 0.8),
    ("benchmark", Level.BASIC_MATCH, 0.5714), ("benchmark", Level.POOR_MATCH, 0.6667),
    ("polarity", Level.POOR_MATCH, 0.5), ("balanced", Level.POOR_MATCH, 0.5), ("balanced", Level.EXACT_MATCH, 0.5),
])
def test_indifference_belief(incentive: str, level: Level, belief: float) -> None:
    assert indifference_belief(incentive, level) == pytest.approx(belief, abs=1e-4)


def test_balanced_rejections_average_one_per_group_whatever_their_grades() -> None:
    g = [GradeResult(level=lvl, score=None, valid=True) for lvl in
         (Level.BASIC_MATCH, Level.POOR_MATCH, Level.POOR_MATCH, Level.EXACT_MATCH)]
    got = balance_groups(g, [True] * 4, ["a", "a", "a", "b"])
    # group a: grades .5, .25, .25 (mean 1/3): 1 + .5 * (1/6), 1 - .5 * (1/12) twice; b alone: exactly 1
    assert got == pytest.approx([1 + 0.5 / 6, 1 - 0.5 / 12, 1 - 0.5 / 12, 1.0])
    assert sum(got[:3]) / 3 == pytest.approx(1.0)


def test_balanced_keeps_a_grader_failure_none_and_needs_groups() -> None:
    failed = GradeResult(level=None, score=None, valid=True, grader_error="judge down")
    assert balance_groups([failed, invalid_result("x")], [True, True], ["a", "a"]) == [None, 0.0]
    with pytest.raises(ValueError, match="proof_id"):
        MetaVerifierReward(scale="balanced")(TEXTS, annotation=ANNS, n_steps=[4] * len(TEXTS))


def test_unknown_incentive_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="training, benchmark, balanced, polarity"):
        MetaVerifierReward(scale="generous")


def test_the_batch_diagnostics_reach_log_metric() -> None:
    logged: dict[str, float] = {}
    MetaVerifierReward()(TEXTS, **columns(), log_metric=lambda k, v: logged.__setitem__(k, v))
    # flawed "f": EXACT, POOR, accept, invalid -> 1 accept of 4; valid "v": accept, accept, reject, accept -> 3 of 4
    assert logged["checking/accept_rate_flawed"] == pytest.approx(0.25)
    assert logged["checking/accept_rate_valid"] == pytest.approx(0.75)
    assert logged["checking/discrimination"] == pytest.approx(0.5)  # 0.75 - 0.25
    # levels of 8 graded: EXACT 4 (1 flawed + 3 valid accepts), POOR 1, WRONG_POLARITY 2, invalid 1
    assert logged["checking/level/EXACT_MATCH"] == pytest.approx(4 / 8)
    assert logged["checking/level/POOR_MATCH"] == pytest.approx(1 / 8)
    assert logged["checking/level/BASIC_MATCH"] == 0.0
    assert logged["checking/level/WRONG_POLARITY"] == pytest.approx(2 / 8)
    assert logged["checking/level/invalid"] == pytest.approx(1 / 8)
    assert not any("zero_spread" in k for k in logged)  # the trainer's, on the total reward (train/trainer.py)
    # rewards by family: linear (flawed) 1.25 / 4; parity (valid) 3 / 4
    assert logged["checking/reward_family/linear"] == pytest.approx(0.3125)
    assert logged["checking/reward_family/parity"] == pytest.approx(0.75)


def _o(flawed: bool, accepted: bool, level: Level | None, reward: float | None,
       failed: bool = False) -> Outcome:
    r = (GradeResult(level=None, score=None, valid=True, grader_error="down") if failed
         else invalid_result("x") if level is None else GradeResult(level=level, score=reward, valid=True))
    return Outcome(flawed, accepted, r, reward, None)


@pytest.mark.parametrize(("outcomes", "expected"), [
    # two groups of two, one without spread (both 1.0): half the groups teach nothing
    ([_o(False, True, Level.EXACT_MATCH, 1.0), _o(False, True, Level.EXACT_MATCH, 1.0),
      _o(True, False, Level.POOR_MATCH, 0.25), _o(True, True, Level.WRONG_POLARITY, 0.0)],
     {"accept_rate_valid": 1.0, "accept_rate_flawed": 0.5, "discrimination": 0.5, "level/EXACT_MATCH": 0.5, "level/POOR_MATCH": 0.25, "level/WRONG_POLARITY": 0.25, "level/invalid": 0.0}),
    # all invalid on flawed proofs: no valid proofs -> no accept_rate_valid key
    ([_o(True, False, None, 0.0), _o(True, False, None, 0.0)],
     {"accept_rate_flawed": 0.0, "level/invalid": 1.0}),
    # a grader failure is counted apart and left out of the level shares and the spread
    ([_o(True, False, Level.EXACT_MATCH, 1.0), _o(True, False, None, None, failed=True)],
     {"grader_failure": 1.0, "level/EXACT_MATCH": 1.0}),
])
def test_batch_diagnostics_table(outcomes: list[Outcome], expected: dict[str, float]) -> None:
    got = batch_diagnostics(outcomes)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value), key
    if not any(not o.gold_flawed for o in outcomes):
        assert "accept_rate_valid" not in got and "discrimination" not in got


@pytest.mark.parametrize(("totals", "groups", "flawed", "expected"), [
    # two groups of two, one without spread: half the groups teach nothing
    ([1.0, 1.0, 0.25, 0.0], ["a", "a", "b", "b"], [False, False, True, True],
     {"zero_spread_groups": 0.5, "zero_spread_valid": 1.0, "zero_spread_flawed": 0.0}),
    # equal meta-verifier grades (1.0) but one completion lost the format reward (weight 0.2): the total has
    # spread, so the group has a signal (issue 48: it was counted as "no signal" from meta_verifier alone)
    ([1.0 + 0.2, 1.0 + 0.0], ["a", "a"], [True, True], {"zero_spread_groups": 0.0, "zero_spread_flawed": 0.0}),
    # a row without reward (NaN: its grade failed) is left out: one graded completion has no spread to measure
    ([float("nan"), 0.5, 0.5, 0.5], ["a", "a", "b", "b"], [True, True, False, False],
     {"zero_spread_groups": 1.0, "zero_spread_valid": 1.0}),
])
def test_zero_spread_is_measured_on_the_total_reward(totals: list[float], groups: list[str], flawed: list[bool],
                                                     expected: dict[str, float]) -> None:
    assert zero_spread_shares(totals, groups, flawed) == pytest.approx(expected)
