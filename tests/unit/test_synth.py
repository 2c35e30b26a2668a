"""The synthetic curriculum: exact labels, gold answers that parse to them, no shortcuts, balance, disjoint sets."""

from __future__ import annotations

import random
import re

import pytest

from proofcheck.data.synth import FLAWED_KINDS, KINDS, balanced_tasks, disjoint_splits, make_task
from proofcheck.parsing import parse_verifier_output

_NUM = re.compile(r"-?\d+")


def _last_number(text: str) -> int:
    return int(_NUM.findall(text)[-1])


def _claim(problem: str) -> int:
    return int(problem.rsplit("=", 1)[1].strip(" ."))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(25))
def test_labels_are_exact_and_the_gold_answer_parses_to_them(kind: str, seed: int) -> None:
    t = make_task(random.Random(seed), kind)
    n = len(t["steps"])
    assert t["is_correct"] == (kind == "valid")
    assert (t["first_error_step"] == -1) == (kind == "valid")
    assert t["annotation"]["first_fatal_error_step"] == t["first_error_step"]
    if kind == "conclusion":
        assert t["first_error_step"] == n - 1
    r = parse_verifier_output(t["gold_verification"], n, "stop")
    assert r.valid and r.verdict.first_error_step == t["first_error_step"]


@pytest.mark.parametrize("seed", range(40))
def test_steps_recomputed_independently_agree_with_the_label(seed: int) -> None:
    """Recompute the chain from the problem's definitions; the first step whose written value
    differs from the true value is the labelled first error."""
    t = make_task(random.Random(seed), KINDS[seed % len(KINDS)])
    start = int(re.search(r"x_0 = (\d+)", t["problem"]).group(1))
    ops = re.findall(r"x_\d+ = x_\d+ ([+-]) (\d+)", t["problem"])
    true, first = start, -1
    for i, (op, c) in enumerate(ops):
        true = true + int(c) if op == "+" else true - int(c)
        if first < 0 and _last_number(t["steps"][i].rstrip(".")) != true:
            first = i
    if first < 0 and _last_number(t["steps"][-1].split(",")[0]) != true:
        first = len(ops)
    assert first == t["first_error_step"]


@pytest.mark.parametrize("kind", FLAWED_KINDS)
def test_the_claim_is_what_the_proof_concludes(kind: str) -> None:
    """No shortcut: the problem claims the value the proof ends with, so comparing the conclusion
    with the claim never tells a flawed proof from a valid one."""
    for seed in range(30):
        t = make_task(random.Random(seed), kind)
        assert _last_number(t["steps"][-1].split(",")[0].rstrip(".")) == _claim(t["problem"])


def test_balanced_tasks_come_in_valid_flawed_pairs() -> None:
    tasks = balanced_tasks(60, seed=3)
    for a, b in zip(tasks[::2], tasks[1::2], strict=True):
        assert a["is_correct"] != b["is_correct"]
    kinds = [t["annotation"]["remark"].split(":")[1] for t in tasks if not t["is_correct"]]
    assert {k: kinds.count(k) for k in FLAWED_KINDS} == {k: 10 for k in FLAWED_KINDS}


def test_disjoint_splits_share_no_problem_and_stay_balanced() -> None:
    sets = disjoint_splits({"train": 300, "dev": 40, "eval": 64}, seed=1)
    keys = {name: {" ".join(t["problem"].lower().split()) for t in ts} for name, ts in sets.items()}
    assert not keys["train"] & keys["eval"] and not keys["train"] & keys["dev"] and not keys["dev"] & keys["eval"]
    for name, n in (("train", 300), ("dev", 40), ("eval", 64)):
        assert len(sets[name]) == n and sum(t["is_correct"] for t in sets[name]) == n // 2
    ids = [t["proof_id"] for ts in sets.values() for t in ts]
    assert len(ids) == len(set(ids))
    assert disjoint_splits({"train": 300, "dev": 40, "eval": 64}, seed=1)["eval"] == sets["eval"]


def test_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown synthetic kind 'fatal'"):
        make_task(random.Random(0), "fatal")
