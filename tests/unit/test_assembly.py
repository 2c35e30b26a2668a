"""The one dataset-assembly rule set (`proofcheck.data.assembly`): hold-out by normalised problem,
mix by origin. `proofcheck data build` and `train/grpo.py` both go through it (checked at the end)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from proofcheck.data import assembly
from proofcheck.data.assembly import MixError, hold_out, mix, problem_key


def rows(origin: str, n: int) -> list[dict]:
    return [{"origin": origin, "problem": f"{origin} problem {i}", "proof_id": f"{origin}-{i}"} for i in range(n)]


def origin(r: dict) -> str:
    return r["origin"]


def problem(r: dict) -> str:
    return r["problem"]


@pytest.mark.parametrize(("ratios", "size", "expected"), [
    (None, None, {"expert": 10, "repaired": 4, "synthetic": 6}),
    ({"expert": 1, "repaired": 1}, None, {"expert": 4, "repaired": 4}),        # repaired (4) limits: none repeated
    ({"expert": 0.5, "synthetic": 0.5}, None, {"expert": 6, "synthetic": 6}),
    ({"expert": 1, "repaired": 1}, 20, {"expert": 10, "repaired": 10}),        # repaired repeated to fill its share
    ({"expert": 3, "repaired": 1, "synthetic": 0}, 8, {"expert": 6, "repaired": 2}),
])
def test_mix_counts(ratios: dict | None, size: int | None, expected: dict) -> None:
    out = mix(rows("expert", 10) + rows("repaired", 4) + rows("synthetic", 6), ratios, size, 0, origin)
    counts = {o: sum(r["origin"] == o for r in out) for o in assembly.ORIGINS}
    assert {k: v for k, v in counts.items() if v} == expected


def test_mix_repeats_evenly() -> None:
    out = mix(rows("expert", 5), {"expert": 1}, 10, 0, origin)
    assert sorted(r["proof_id"] for r in out) == sorted([f"expert-{i}" for i in range(5)] * 2)


@pytest.mark.parametrize(("items", "ratios", "match"), [
    (rows("expert", 3), {"expert": 1, "repaired": 1}, "repaired rows a share, but the data has none"),
    (rows("expert", 3), {"human": 1}, "non-negative shares for expert, repaired, synthetic"),
    (rows("expert", 3), {"expert": 0}, "positive sum"),
])
def test_mix_errors(items: list, ratios: dict, match: str) -> None:
    with pytest.raises(MixError, match=match):
        mix(items, ratios, None, 0, origin)


@pytest.mark.parametrize(("text", "key"), [
    ("Prove  that\nx > 0.", "prove that x > 0."),
    ("  PROVE that x > 0.  ", "prove that x > 0."),
])
def test_problem_key_folds_case_and_whitespace(text: str, key: str) -> None:
    assert problem_key(text) == key


@pytest.mark.parametrize(("n_problems", "fraction", "n_held"), [
    (10, 0.2, 2), (10, 0.25, 2), (10, 0.0, 0), (1, 0.5, 0), (2, 0.9, 1), (3, 0.01, 1), (4, 1.0, 3),
])
def test_hold_out_counts_whole_problems(n_problems: int, fraction: float, n_held: int) -> None:
    items = [{"problem": f"P{i % n_problems}", "k": i} for i in range(3 * n_problems)]
    train, held = hold_out(items, fraction, 1, problem)
    assert len({r["problem"] for r in held}) == n_held
    assert len(train) + len(held) == len(items)
    assert not {r["problem"] for r in train} & {r["problem"] for r in held}


def test_hold_out_groups_the_same_problem_written_differently() -> None:
    items = [{"problem": "Prove x > 0.", "id": "a"}, {"problem": "prove  x > 0.", "id": "b"},
             {"problem": "Prove y > 0.", "id": "c"}, {"problem": "Prove z > 0.", "id": "d"}]
    for seed in range(6):
        train, held = hold_out(items, 0.34, seed, problem)
        ids = {r["id"] for r in held}
        assert ids in ({"a", "b"}, {"c"}, {"d"})  # a and b go together, always


def test_build_and_training_use_the_same_split(tmp_path: Path) -> None:
    """The same records, fraction and seed: `data build` and the trainer hold out the same problems."""
    import json

    from proofcheck.data.build import build_dataset
    from proofcheck.data.synth import make_tasks
    from proofcheck.train.config import ProofcheckScriptArguments
    from proofcheck.train.data import build_training_data

    tasks = [{**t, "origin": "expert", "problem_id": f"p{i}", "proof_id": f"p{i}-x"}
             for i, t in enumerate(make_tasks(12, seed=4))]
    src = tmp_path / "expert.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    build_dataset(tmp_path / "built", expert=str(src), eval_fraction=0.25, seed=7)
    built_eval = {json.loads(x)["proof_id"] for x in (tmp_path / "built" / "eval.jsonl").read_text().splitlines()}
    data = build_training_data(ProofcheckScriptArguments(expert_files=[str(src)], eval_fraction=0.25, mix_seed=7,
                                                         eval_max_samples=100))
    assert built_eval and {r["proof_id"] for r in data.eval} == built_eval


def _split(n_train: int, n_eval: int) -> tuple[list[dict], list[dict]]:
    from proofcheck.data.synth import disjoint_splits

    sets = disjoint_splits({"eval": n_eval, "grpo": n_train}, seed=0)
    return sets["grpo"], sets["eval"]


def test_a_curriculum_trains_every_row_once_whatever_its_origin(tmp_path: Path) -> None:
    """The demo's and the ablations' curricula go through the trainer's own assembly: the eval split is the
    held-out set and the mix keeps every training row, repaired positives included (a mix of `0 0 1`, the
    old switch-off, dropped them)."""
    from proofcheck.app.launch import data_args
    from proofcheck.train.config import ProofcheckScriptArguments
    from proofcheck.train.data import build_training_data

    train, held = _split(12, 4)
    train = [{**t, "origin": "repaired", "proof_id": t["proof_id"] + "-rep"} if i % 4 == 0 and t["is_correct"] else t
             for i, t in enumerate(train)]
    cur = assembly.write_curriculum(tmp_path / "dataset", train, held)
    n_rep = sum(t.get("origin") == "repaired" for t in train)
    assert n_rep and cur.train_by_origin == {"synthetic": 12 - n_rep, "repaired": n_rep} and cur.n_eval == 4
    args = data_args(cur)
    assert args[:4] == ["--expert_files", str(tmp_path / "dataset"), "--synthetic_count", "0"]
    assert args[4:] == ["--mix_ratios", "0", str(n_rep), str(12 - n_rep), "--train_size", "12", "--eval_fraction", "0"]
    ratios = [float(x) for x in args[5:8]]
    data = build_training_data(ProofcheckScriptArguments(expert_files=[str(tmp_path / "dataset")], synthetic_count=0,
                                                         mix_ratios=ratios, train_size=12, eval_fraction=0.0,
                                                         eval_max_samples=100))
    assert sorted(r["proof_id"] for r in data.train) == sorted(t["proof_id"] for t in train)
    assert sorted(r["proof_id"] for r in data.eval) == sorted(t["proof_id"] for t in held)
    assert assembly.read_curriculum(tmp_path / "dataset") == cur


def test_an_all_synthetic_curriculum_mixes_as_before() -> None:
    """The demo's curriculum (synthetic rows only): the same training order as the `0 0 1` mix it had."""
    rows = [{"origin": "synthetic", "problem": f"P{i}", "proof_id": str(i)} for i in range(64)]
    old = mix(rows, dict(zip(assembly.ORIGINS, (0.0, 0.0, 1.0), strict=True)), None, 3, origin)
    new = mix(rows, dict(zip(assembly.ORIGINS, (0.0, 0.0, 64.0), strict=True)), 64, 3, origin)
    assert new == old


def test_a_curriculum_refuses_a_problem_in_both_sets(tmp_path: Path) -> None:
    train, held = _split(4, 2)
    with pytest.raises(ValueError, match="1 problem\\(s\\) in both"):
        assembly.write_curriculum(tmp_path / "d", train, [*held, {**train[0], "proof_id": "again"}])
    assert not (tmp_path / "d").exists()


def test_a_curriculum_written_before_its_record_is_read_from_its_splits(tmp_path: Path) -> None:
    train, held = _split(6, 2)
    cur = assembly.write_curriculum(tmp_path / "d", train, held)
    (tmp_path / "d" / assembly.CURRICULUM_FILE).unlink()
    assert assembly.read_curriculum(tmp_path / "d") == cur


@pytest.mark.parametrize("n", [12, 24, 60])
def test_a_cut_held_out_set_keeps_every_family_and_polarity(tmp_path: Path, n: int) -> None:
    """A held-out set cut to its first n (`eval_max_samples`: the long recipe on a slow host, the demo) holds each
    family's valid and flawed proofs alike; shuffled and cut, 60 of 192 held 7 chains and 14 equations."""
    from proofcheck.data.families import family_of
    from proofcheck.data.synth import disjoint_splits
    from proofcheck.train.config import ProofcheckScriptArguments
    from proofcheck.train.data import build_training_data

    sets = disjoint_splits({"eval": 192, "grpo": 24}, seed=0, families="all")
    assembly.write_curriculum(tmp_path / "dataset", sets["grpo"], sets["eval"])
    data = build_training_data(ProofcheckScriptArguments(expert_files=[str(tmp_path / "dataset")], synthetic_count=0,
                                                         mix_ratios=[0, 0, 24], train_size=24, eval_fraction=0.0,
                                                         eval_max_samples=n))
    strata = Counter((family_of(r), bool(r["is_correct"])) for r in data.eval)
    assert len(data.eval) == n and len(strata) == 12 and max(strata.values()) - min(strata.values()) <= 1


def test_strata_in_turn_keeps_each_stratum_in_its_order() -> None:
    rows = [("b", 1), ("a", 1), ("b", 2), ("b", 3), ("a", 2)]
    assert assembly.strata_in_turn(rows, lambda r: r[0]) == [("b", 1), ("a", 1), ("b", 2), ("a", 2), ("b", 3)]
    assert assembly.strata_in_turn([], lambda r: r) == []
