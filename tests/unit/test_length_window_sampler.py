"""The warm-up's batch order (train/sft_trainer.py LengthWindowSampler): every row once an epoch, batches of
similar length, and no walk from the longest rows to the shortest (transformers' group_by_length order)."""

from __future__ import annotations

import random
import statistics

import pytest

from proofcheck.train.sft_trainer import LengthWindowSampler, window_batches


def _batches(order: list[int], size: int) -> list[list[int]]:
    return [order[k:k + size] for k in range(0, len(order), size)]


def _length_trend(lengths: list[int], batches: list[list[int]], span: int) -> float:
    """The largest |correlation| between a batch's position and its mean length, over stretches of `span`
    batches (a longest-first walk gives about 1)."""
    worst = 0.0
    for s in range(0, len(batches) - span + 1, span):
        means = [statistics.mean(lengths[i] for i in b) for b in batches[s:s + span]]
        worst = max(worst, abs(statistics.correlation(list(range(span)), means)))
    return worst


@pytest.mark.parametrize("n,size,window", [(640, 8, 8), (1024, 8, 8), (37, 4, 3), (5, 8, 8)])
def test_every_row_once_full_batches_first(n: int, size: int, window: int) -> None:
    lengths = [random.Random(n).randint(300, 700) for _ in range(n)]
    sampler = LengthWindowSampler(lengths, size, seed=0, window=window)
    for _ in range(2):
        order = list(sampler)
        assert sorted(order) == list(range(n)) and len(sampler) == n
        batches = _batches(order, size)
        assert all(len(b) == size for b in batches[:-1])  # the DataLoader's batches are the sampler's


def test_batches_pad_little_and_epochs_differ() -> None:
    rng = random.Random(1)
    lengths = [rng.randint(300, 700) for _ in range(640)]
    sampler = LengthWindowSampler(lengths, 8, seed=3)
    first, second = list(sampler), list(sampler)
    assert first != second
    spread = statistics.mean(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in _batches(first, 8))
    shuffled = rng.sample(range(640), 640)
    random_spread = statistics.mean(max(lengths[i] for i in b) - min(lengths[i] for i in b)
                                    for b in _batches(shuffled, 8))
    assert spread < random_spread / 3
    assert list(LengthWindowSampler(lengths, 8, seed=3)) == first  # seeded


def test_no_longest_first_walk() -> None:
    from transformers.trainer_pt_utils import get_length_grouped_indices

    rng = random.Random(2)
    lengths = [rng.randint(300, 700) for _ in range(640)]
    ours = window_batches(lengths, 8, random.Random(0))
    theirs = _batches(get_length_grouped_indices(lengths, 8), 8)
    assert _length_trend(lengths, theirs, 20) > 0.9  # the order the warm-up no longer takes
    assert _length_trend(lengths, ours, 20) < 0.7
