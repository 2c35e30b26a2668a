"""The harder held-out split (data/heldout.py) and the variants it draws under: labels still exact, checked by
the independent checkers of tests/family_checkers.py; a wrong label (off by one step, a flawed proof called
valid) is caught; held-out wordings never reach training; longer proofs are longer, larger numbers larger."""

from __future__ import annotations

import json
import random
import re

import pytest
from family_checkers import label_problems

from proofcheck.data.families import ALL, FAMILIES, make_family_task
from proofcheck.data.families._base import HELDOUT_WORDINGS, TRAINING, Variant, drawing
from proofcheck.data.heldout import (
    HARDER,
    SPLIT_FILE,
    VARIED_TRAINING,
    harder_splits,
    heldout_wordings_in,
    leaks,
    write_harder,
)
from proofcheck.data.synth import disjoint_splits
from proofcheck.schemas import AnnotatedProof

VARIANTS = {"training": TRAINING, **HARDER, "any-wording": Variant(wordings="any", longer=1, scale=3),
            **{f"warm-up-{name}": v for name, v in VARIED_TRAINING.items()}}
SEEDS = range(25)


def draw(variant: Variant, family: str, kind: str, seed: int) -> dict:
    with drawing(variant):
        return make_family_task(random.Random(seed), family, kind, seed)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("family", ALL)
def test_labels_are_exact_in_every_variant(variant: str, family: str) -> None:
    """Every kind, many seeds: the checker's first wrong step is the label, a flawed proof is never valid."""
    for kind in FAMILIES[family].kinds:
        for seed in SEEDS:
            t = draw(VARIANTS[variant], family, kind, seed)
            assert label_problems(t) == [], (variant, kind, seed, t["problem"], t["steps"])
            assert t["is_correct"] == (kind == "valid")
            AnnotatedProof.model_validate(t)


def _relabelled(t: dict, first: int) -> dict:
    out = json.loads(json.dumps(t))
    out.update(first_error_step=first, is_correct=first < 0)
    out["annotation"]["first_fatal_error_step"] = first
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("family", ALL)
def test_a_wrong_label_is_caught(variant: str, family: str) -> None:
    """The checkers are exact: a first error moved by one step either way, a flawed proof labelled valid and a
    valid one labelled flawed are all reported (so the test above fails when a generator mislabels)."""
    for kind in FAMILIES[family].kinds:
        t = draw(VARIANTS[variant], family, kind, 7)
        first = t["first_error_step"]
        wrong = [-1, first - 1, first + 1] if first >= 0 else [0, len(t["steps"]) - 1]
        for label in (w for w in wrong if w != first and w >= -1):
            assert label_problems(_relabelled(t, label)), (variant, kind, first, label)


def test_training_draws_never_use_a_held_out_wording() -> None:
    for family in ALL:
        for kind in FAMILIES[family].kinds:
            for seed in range(40):
                for v in (TRAINING, Variant(longer=3), Variant(scale=10)):
                    t = draw(v, family, kind, seed)
                    assert heldout_wordings_in(t) == [], (family, kind, seed, t["steps"])


def test_held_out_wordings_are_drawn_and_every_one_is_used() -> None:
    used: set[str] = set()
    for family in ALL:
        for kind in FAMILIES[family].kinds:
            for seed in range(40):
                t = draw(HARDER["hard-wording"], family, kind, seed)
                found = heldout_wordings_in(t)
                assert found, (family, kind, seed, t["problem"], t["steps"])
                used |= {slot.split("[")[0] for slot in found}
    unknowns = {s for s in HELDOUT_WORDINGS if s.endswith(".unknown")}  # one letter: not looked for in text
    assert used == set(HELDOUT_WORDINGS) - unknowns


def _numbers(t: dict) -> list[int]:
    return [abs(int(n)) for n in re.findall(r"\d+", " ".join([t["problem"], *t["steps"]]))]


@pytest.mark.parametrize("family", ALL)
def test_longer_proofs_are_longer_and_larger_numbers_larger(family: str) -> None:
    def mean(v: Variant, key) -> float:
        vals = [key(draw(v, family, k, s)) for k in FAMILIES[family].kinds for s in range(30)]
        return sum(vals) / len(vals)

    steps = lambda t: len(t["steps"])  # noqa: E731
    assert mean(HARDER["hard-length"], steps) >= mean(TRAINING, steps) + 1
    assert mean(HARDER["hard-size"], lambda t: max(_numbers(t))) >= 3 * mean(TRAINING, lambda t: max(_numbers(t)))


@pytest.mark.parametrize("family", ALL)
def test_length_is_graded_in_every_family(family: str) -> None:
    """Each `longer` adds steps to the same draws' proofs of every kind (a bracket, a move, a residue step per case:
    parity's `wrong_rule`, in parity words, once stayed as long), so training can draw one step longer and the
    length slice stay beyond it whatever the flaw."""
    def steps(longer: int, kind: str) -> float:
        return sum(len(draw(Variant(longer=longer), family, kind, s)["steps"]) for s in range(30)) / 30

    for kind in FAMILIES[family].kinds:
        means = [steps(n, kind) for n in range(4)]
        assert all(b >= a + 0.5 for a, b in zip(means, means[1:], strict=False)), (kind, means)


def test_harder_splits_are_balanced_disjoint_traceable_and_do_not_leak(tmp_path) -> None:
    sets = disjoint_splits({"eval": 24, "train": 96}, seed=3, families="all")
    hard = harder_splits(24, seed=3, avoid=sets["eval"] + sets["train"])
    assert list(hard) == list(HARDER)
    keys = [" ".join(t["problem"].lower().split()) for ts in [*sets.values(), *hard.values()] for t in ts]
    assert len(keys) == len(set(keys))
    for name, tasks in hard.items():
        assert len(tasks) == 24 and sum(t["is_correct"] for t in tasks) == 12
        assert {t["family"] for t in tasks} == set(ALL)
        assert all(t["variant"] == name and t["proof_id"].startswith(f"synth-{name}-") for t in tasks)
        assert all(label_problems(t) == [] for t in tasks)
    assert "variant" not in sets["train"][0]
    assert leaks(sets["train"], hard) == []
    assert harder_splits(24, seed=3, avoid=sets["eval"] + sets["train"]) == hard  # reproducible

    folder = write_harder(tmp_path / "hard", hard, seed=3, train=sets["train"])
    record = json.loads((folder / SPLIT_FILE).read_text())
    assert record["slices"]["hard-all"]["variant"] == {"wordings": "heldout", "longer": 3, "scale": 10}
    assert record["training"] == {"wordings": "train", "longer": 0, "scale": 1}
    assert record["avoided_variants"] == {"training": 96}
    assert set(record["heldout_wordings"]) == set(HELDOUT_WORDINGS)
    assert len((folder / "hard-size.jsonl").read_text().splitlines()) == 24


def test_the_record_counts_what_training_drew_beyond_the_plain_proofs(tmp_path) -> None:
    larger = VARIED_TRAINING["larger"]
    sets = disjoint_splits({"sft": 12, "sft-larger": 6}, seed=2, families="all", variants={"sft-larger": larger})
    train = sets["sft"] + sets["sft-larger"]
    folder = write_harder(tmp_path / "h", harder_splits(6, seed=2, avoid=train), seed=2, train=train)
    assert json.loads((folder / SPLIT_FILE).read_text())["avoided_variants"] == {"training": 12, "sft-larger": 6}


def test_a_leak_is_named_and_refused(tmp_path) -> None:
    train = disjoint_splits({"train": 12}, seed=1, families="all")["train"]
    hard = harder_splits(6, seed=1, avoid=train)
    shared = [*train, hard["hard-size"][0]]
    assert any("has the problem of training proof" in line for line in leaks(shared, hard))
    worded = [*train, draw(HARDER["hard-wording"], "linear", "valid", 0)]
    assert any("uses held-out wording" in line for line in leaks(worded, {}))
    with pytest.raises(ValueError, match="leaks into training"):
        write_harder(tmp_path / "h", hard, seed=1, train=shared)


def test_a_curriculum_records_its_split_and_counts_held_out_wordings_in_training(tmp_path) -> None:
    from proofcheck.data.assembly import CURRICULUM_FILE, read_curriculum, write_curriculum

    sets = disjoint_splits({"eval": 6, "grpo": 12}, seed=5, families="all")
    hard = harder_splits(6, seed=5, avoid=[*sets["eval"], *sets["grpo"]])
    cur = write_curriculum(tmp_path / "d", sets["grpo"], [*sets["eval"], *hard["hard-wording"]])
    assert cur.split["train"]["variants"] == {"training": 12} and cur.split["train_rows_with_heldout_wordings"] == 0
    assert cur.split["eval"]["variants"] == {"training": 6, "hard-wording": 6}
    assert read_curriculum(tmp_path / "d").split == cur.split
    assert json.loads((tmp_path / "d" / CURRICULUM_FILE).read_text())["split"]["eval"]["n"] == 12
    leaky = write_curriculum(tmp_path / "e", [*sets["grpo"], *hard["hard-all"][:2]], sets["eval"])
    assert leaky.split["train_rows_with_heldout_wordings"] == 2
