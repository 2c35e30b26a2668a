"""train/uncertainty.py without a model: the disagreement rank, the balanced pairing, the sampler's layout."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from proofcheck.train.config import ConfigError, ProofcheckScriptArguments
from proofcheck.train.uncertainty import UncertaintySampler, disagreement, rank_rows


def row(ok: bool, passes: list[int | None], scores: list[float] | None = None) -> dict[str, Any]:
    """A graded row: each pass is a first-error step (-1 = accept) or None (invalid)."""
    scores = scores or [1.0] * len(passes)
    return {"is_correct": ok, "trials": [{"outcome": "invalid" if p is None else "accept" if p == -1 else "reject",
                                          "score": s} for p, s in zip(passes, scores, strict=True)]}


@pytest.mark.parametrize(("r", "expected"), [
    (row(True, [-1, -1, -1, -1]), (False, 0.0, 0.0)),            # all accept: no signal
    (row(True, [-1, -1, 2, 3], [1, 1, 0, 0]), (True, 1.0, 1.0)),  # half accept: the most uncertain
    (row(False, [2, 2, 2, -1], [1, 1, 1, 0]), (True, 0.5, 1.0)),  # one accept in four
    (row(False, [2, 3, 3, 3], [1, .25, .25, .25]), (True, 0.0, 0.75)),  # all reject, located differently
    (row(False, [None, None, 2, 2], [0, 0, 1, 1]), (True, 0.0, 1.0)),   # invalid vs reject
    (row(False, [None, None], [0, 0]), (False, 0.0, 0.0)),        # all invalid: no signal
])
def test_disagreement(r: dict[str, Any], expected: tuple[bool, float, float]) -> None:
    assert disagreement(r) == pytest.approx(expected)


def test_rank_puts_disagreeing_rows_first_and_pairs_classes() -> None:
    results = [row(True, [-1, -1]), row(False, [2, -1], [1, 0]), row(True, [-1, 2], [1, 0]),
               row(False, [2, 2]), row(True, [2, 2], [0, 0]), row(False, [2, 3], [1, .25])]
    idx = [10, 11, 12, 13, 14, 15]
    # keys: 10 (F,0,0) 11 (T,1,1) 12 (T,1,1) 13 (F,0,0) 14 (F,0,0) 15 (T,0,.75)
    assert rank_rows(results, idx, balanced=False) == [11, 12, 15, 10, 13, 14]
    # valid by rank: 12, 10, 14; flawed: 11, 15, 13 -> pairs (12, 11), (10, 15), (14, 13)
    assert rank_rows(results, idx, balanced=True) == [12, 11, 10, 15, 14, 13]


class QueuePool:
    """What the sampler reads of a pool: a queue and a fallback order."""

    def __init__(self, queued: list[int], order: list[int]) -> None:
        self.queue, self.order = deque(queued), order

    def take(self) -> int | None:
        return self.queue.popleft() if self.queue else None


def test_sampler_serves_the_queue_first_in_repeat_sampler_layout() -> None:
    pool = QueuePool([7, 5, 3], [0, 1, 2, 3, 4, 5, 6, 7])
    s = UncertaintySampler(pool, num_samples=8, mini_repeat_count=2, batch_size=2, repeat_count=2)
    got = list(s)
    assert len(got) == len(s) == 4 * 2 * 2 * 2
    # batch 1 = queued 7, 5 (each twice, the batch twice); batch 2 = queued 3 then the fallback's first
    assert got[:8] == [7, 7, 5, 5, 7, 7, 5, 5]
    assert got[8:16] == [3, 3, 0, 0, 3, 3, 0, 0]
    assert got[16:20] == [1, 1, 2, 2]


def test_a_queue_refilled_while_iterating_is_served_next() -> None:
    pool = QueuePool([], [0, 1, 2, 3])
    it = iter(UncertaintySampler(pool, num_samples=4, mini_repeat_count=1, batch_size=1, repeat_count=1))
    assert next(it) == 0
    pool.queue.extend([3])  # a refresh between two batches
    assert next(it) == 3


@pytest.mark.parametrize(("kw", "match"), [
    ({"uncertainty_pool": -1}, "uncertainty_pool=-1"),
    ({"uncertainty_pool": 8, "uncertainty_passes": 1}, "uncertainty_passes=1"),
    ({"uncertainty_every": 0}, "uncertainty_every=0"),
])
def test_bad_pool_settings_are_refused_with_the_fix(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProofcheckScriptArguments(synthetic_count=8, **kw)
