"""Every proof family's labels, recomputed by a checker that shares nothing with its generator
(`tests/family_checkers.py`: regular expressions and sympy over the problem and step texts): the first
step the checker finds wrong must be the labelled first error, for every kind and many seeds. The
held-out wordings, longer proofs and larger numbers are checked in test_harder_heldout.py.
"""

from __future__ import annotations

import json
import random

import pytest
from family_checkers import CHECKERS

from proofcheck.data.assembly import problem_key
from proofcheck.data.families import ALL, FAMILIES, family_of, make_family_task, resolve
from proofcheck.data.synth import balanced_tasks, disjoint_splits
from proofcheck.parsing import parse_verifier_output
from proofcheck.schemas import AnnotatedProof

SEEDS = range(30)

CASES = [(f, k) for f in ALL for k in FAMILIES[f].kinds]


def test_every_family_has_an_independent_checker_and_enough_kinds() -> None:
    assert set(CHECKERS) == set(ALL) and len(ALL) >= 6
    for f in ALL:
        assert FAMILIES[f].kinds[0] == "valid" and len(FAMILIES[f].flawed_kinds) >= 3


@pytest.mark.parametrize(("family", "kind"), CASES)
def test_labels_recomputed_independently(family: str, kind: str) -> None:
    """The checker's first wrong step is the label, over many seeds; the gold answer parses to it."""
    for seed in SEEDS:
        t = make_family_task(random.Random(seed), family, kind, seed)
        got = CHECKERS[family](t)
        assert got == t["first_error_step"], (seed, t["problem"], t["steps"], got)
        assert t["is_correct"] == (kind == "valid") == (got == -1)
        assert (t["family"], t["kind"]) == (family, kind)
        r = parse_verifier_output(t["gold_verification"], len(t["steps"]), "stop")
        assert r.valid and r.verdict.first_error_step == t["first_error_step"]
        AnnotatedProof.model_validate(t)


@pytest.mark.parametrize("family", ALL)
def test_errors_sit_at_several_places(family: str) -> None:
    """A family's first errors are not all at one step index (no positional shortcut)."""
    firsts = {make_family_task(random.Random(seed), family, kind)["first_error_step"]
              for kind in FAMILIES[family].flawed_kinds for seed in range(20)}
    assert len(firsts) >= 3, firsts


@pytest.mark.parametrize("family", ALL)
def test_the_family_survives_the_training_row(family: str) -> None:
    """Rows of the training dataset keep the annotation as JSON text and no `family` column."""
    t = make_family_task(random.Random(1), family, FAMILIES[family].flawed_kinds[0])
    assert family_of(t) == family
    assert family_of({"annotation": json.dumps(t["annotation"])}) == family
    assert family_of({"annotation": json.dumps({"remark": "expert"})}) is None


@pytest.mark.parametrize("family", ALL)
def test_wordings_vary(family: str) -> None:
    """Several wordings: the proofs of one family do not all open their steps with the same words."""
    openings = {" ".join(s.split()[:2]) for seed in range(40)
                for s in make_family_task(random.Random(seed), family, "valid")["steps"]}
    assert len(openings) >= 4, openings


def test_balanced_tasks_by_family_come_in_same_family_pairs() -> None:
    tasks = balanced_tasks(120, seed=2, families="all")
    for a, b in zip(tasks[::2], tasks[1::2], strict=True):
        assert a["is_correct"] != b["is_correct"] and a["family"] == b["family"]
    assert {f: sum(t["family"] == f for t in tasks) for f in ALL} == {f: 20 for f in ALL}
    for f in ALL:
        kinds = {t["kind"] for t in tasks if t["family"] == f and not t["is_correct"]}
        assert kinds == set(FAMILIES[f].flawed_kinds)


def test_disjoint_splits_by_family_leave_one_out_keeps_the_held_out_set() -> None:
    sizes = {"eval": 40, "dev": 20, "train": 120}
    full = disjoint_splits(sizes, seed=4, families="all")
    loo = disjoint_splits(sizes, seed=4, families="all", exclude={"train": ["linear"]})
    assert loo["eval"] == full["eval"] and loo["dev"] == full["dev"]
    assert "linear" not in {t["family"] for t in loo["train"]}
    for sets in (full, loo):
        keys = {n: {" ".join(t["problem"].lower().split()) for t in ts} for n, ts in sets.items()}
        assert not keys["train"] & keys["eval"] and not keys["train"] & keys["dev"] and not keys["dev"] & keys["eval"]
        for name, n in sizes.items():
            assert len(sets[name]) == n and sum(t["is_correct"] for t in sets[name]) == n // 2
    only = disjoint_splits({"eval": 10}, seed=4, families={"eval": ["parity"]})
    assert {t["family"] for t in only["eval"]} == {"parity"}


def test_default_draws_stay_chains() -> None:
    sets = disjoint_splits({"train": 20, "eval": 10}, seed=1)
    assert {t["family"] for ts in sets.values() for t in ts} == {"chain"}
    assert all(t["annotation"]["remark"] == f"synthetic:{t['kind']}" for t in sets["train"])


@pytest.mark.parametrize(("families", "exclude", "message"), [
    (["algebra"], (), "unknown proof family 'algebra'"),
    ("all", ["nope"], "unknown proof family 'nope'"),
    (["linear"], ["linear"], "no proof family left"),
])
def test_bad_family_choices_are_named(families, exclude, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve(families, exclude)


def test_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown linear kind 'miscopy'"):
        make_family_task(random.Random(0), "linear", "miscopy")


@pytest.mark.parametrize(("argv", "rc", "families"), [
    (["--families", "parity,linear"], 0, {"parity", "linear"}),
    (["--families", "all", "--exclude", "chain,prose,expand,inequality"], 0, {"linear", "parity"}),
    (["--exclude", "chain"], 0, set(ALL) - {"chain"}),
    ([], 0, {"chain"}),
    (["--families", "algebra"], 2, None),  # an option error: exit 2, as in every command
])
def test_data_synth_cli_draws_the_families_asked(tmp_path, capsys, argv: list[str], rc: int, families) -> None:
    from proofcheck.app.cli import main

    out = tmp_path / "tasks.jsonl"
    assert main(["data", "synth", "--n", "20", "--seed", "3", "--out", str(out), *argv]) == rc
    if families is None:
        assert "unknown proof family 'algebra'" in capsys.readouterr().err and not out.exists()
        return
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert {t["family"] for t in tasks} == families and len(tasks) == 20
    if argv:  # families asked: valid/flawed pairs (the default draws kinds at random, as before)
        assert sum(t["is_correct"] for t in tasks) == 10


@pytest.mark.parametrize("family", ALL)
def test_each_family_has_problems_enough_for_disjoint_training_sets(family: str) -> None:
    """Disjoint splits drop a repeated problem, so a family with few distinct problems runs out and is
    under-represented in a large warm-up: parity's 780 problems gave it 5% of a 7200-proof warm-up (2026-12-07).
    3000 draws of each family must hold at least 2400 distinct problems."""
    tasks = balanced_tasks(3000, seed=3, families=[family])
    assert len({problem_key(t["problem"]) for t in tasks}) >= 2400


def test_every_family_keeps_its_share_of_a_large_disjoint_warm_up() -> None:
    sets = disjoint_splits({"eval": 192, "sft": 3600}, seed=0, families="all")
    counts = {f: sum(t["family"] == f for t in sets["sft"]) for f in ALL}
    assert min(counts.values()) >= 0.8 * 3600 / len(ALL), counts
