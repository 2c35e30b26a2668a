"""Entropy, mix parsing and the training-set build (dedup, no problem leakage)."""

from __future__ import annotations

import json

import pytest

from proofcheck.data.build import build_dataset, parse_mix
from proofcheck.data.curate import entropy_bits, parse_verifier_spec
from proofcheck.data.loaders import SAMPLES_DIR


@pytest.mark.parametrize(
    ("a", "r", "bits"),
    [(3, 2, 0.971), (5, 0, 0.0), (0, 5, 0.0), (1, 1, 1.0), (0, 0, 0.0), (4, 4, 1.0), (1, 3, 0.811)],
)
def test_entropy(a, r, bits):
    assert entropy_bits(a, r) == pytest.approx(bits, abs=5e-4)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", None),
     ("expert=0.7,repaired=0.3", {"expert": 0.7, "repaired": 0.3, "synthetic": 0.0}),
     ("synthetic=2", {"expert": 0.0, "repaired": 0.0, "synthetic": 2.0})],
)
def test_parse_mix(text, expected):
    assert parse_mix(text) == expected


@pytest.mark.parametrize("bad", ["human=1", "expert", "expert=x", "expert=-1", "expert=0"])
def test_parse_mix_errors(bad):
    with pytest.raises(ValueError, match="--mix"):
        parse_mix(bad)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("http://h:1/v1", ("http://h:1/v1", None)), ("http://h:1/v1#m", ("http://h:1/v1", "m")),
     ("runs/model", (None, "runs/model"))],
)
def test_verifier_spec(spec, expected):
    assert parse_verifier_spec(spec) == expected


def test_build_dedups_and_splits_by_problem(tmp_path):
    src = [json.loads(x) for x in (SAMPLES_DIR / "annotated.jsonl").read_text().splitlines()]
    dup = dict(src[0], proof_id="dup-of-first", steps=[s.upper() + "  " for s in src[0]["steps"]])
    expert = tmp_path / "e.jsonl"
    expert.write_text("".join(json.dumps(r) + "\n" for r in [*src, dup]))
    repaired = tmp_path / "r.jsonl"
    rep = dict(src[1], proof_id="rep-1", steps=["A new step.", "Another."], origin="repaired",
               annotation={"first_fatal_error_step": -1, "recoverable_error_steps": [-1], "reviewer_comment": ""},
               is_correct=True, first_error_step=-1)
    repaired.write_text(json.dumps(rep) + "\n")
    card = build_dataset(tmp_path / "out", expert=str(expert), repaired=str(repaired), synthetic=20,
                         eval_fraction=0.25, seed=3)
    assert card["duplicates_removed"] == 1
    train = [json.loads(x) for x in (tmp_path / "out" / "train.jsonl").read_text().splitlines()]
    evals = [json.loads(x) for x in (tmp_path / "out" / "eval.jsonl").read_text().splitlines()]
    assert {r["problem"] for r in train}.isdisjoint({r["problem"] for r in evals})
    assert len(train) + len(evals) == len(src) + 1 + 20
    assert card["splits"]["train"]["origin"].get("repaired", 0) + card["splits"]["eval"]["origin"].get("repaired", 0) == 1
    import datasets

    dd = datasets.load_from_disk(str(tmp_path / "out" / "dataset"))
    assert set(dd) == {"train", "eval"} and "annotation" in dd["train"].column_names
    assert dd["train"].num_rows == len(train)


def test_build_mix_and_balance(tmp_path):
    # 48 expert samples, 40 synthetic; shares 1:2 -> the largest set repeating nothing: 60 = 20 + 40
    card = build_dataset(tmp_path / "o", expert=str(SAMPLES_DIR / "annotated.jsonl"), synthetic=40,
                         shares={"expert": 1.0, "repaired": 0.0, "synthetic": 2.0}, eval_fraction=0.0, seed=0)
    origin = card["splits"]["train"]["origin"]
    assert origin == {"expert": 20, "synthetic": 40}
    card = build_dataset(tmp_path / "s", expert=str(SAMPLES_DIR / "annotated.jsonl"), synthetic=40,
                         shares={"expert": 1.0, "repaired": 0.0, "synthetic": 1.0}, train_size=200,
                         eval_fraction=0.0, seed=0)
    assert card["splits"]["train"]["origin"] == {"expert": 100, "synthetic": 100}  # both repeated
    card = build_dataset(tmp_path / "b", expert=str(SAMPLES_DIR / "annotated.jsonl"), eval_fraction=0.0,
                         balance_labels=True, seed=0)
    lab = card["splits"]["train"]["label"]
    assert lab["valid"] == lab["invalid"] == 20
