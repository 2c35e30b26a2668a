"""Calibration (proofcheck.calibration): the table from known pass outcomes against counts worked
out by hand (every k-subset and every reading order enumerated on paper), the operating point under
both objectives, and the card round trip (proofcheck.prompt_card)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.calibration import (
    ProofPasses,
    calibration_record,
    calibration_table,
    choose,
    expected_reads,
    row_at,
)
from proofcheck.prompt_card import (
    CARD_FILE,
    card_rule,
    read_calibration,
    read_prompt_card,
    write_calibration,
    write_prompt_card,
)

A, R, INV = "accept", "reject", "invalid"
# two correct and two flawed proofs, 3 passes each, with each pass's tokens
PROOFS = [ProofPasses(True, [A, A, R], [10, 20, 30], "p1"), ProofPasses(True, [A, A, A], [5, 5, 5], "p2"),
          ProofPasses(False, [R, R, A], [1, 2, 3], "p3"), ProofPasses(False, [R, INV, R], [4, 4, 4], "p4")]

# By hand, P(accept) of each proof is the share of its k-subsets with >= t accepts:
#   (k, t): p1, p2 | p3, p4  ->  TPR = mean(p1, p2), TNR = mean(1 - p3, 1 - p4)
HAND = {
    (1, 1): ((2 / 3, 1), (1 / 3, 0)),   # a/3
    (2, 1): ((1, 1), (2 / 3, 0)),       # pairs of p3: RR RA RA
    (2, 2): ((1 / 3, 1), (0, 0)),       # pairs of p1: AA AR AR
    (3, 1): ((1, 1), (1, 0)),
    (3, 2): ((1, 1), (0, 0)),
    (3, 3): ((0, 1), (0, 0)),
}
# Expected passes read / tokens per proof with early stop, by enumerating the 6 reading orders per proof:
#   (3, 2): p1 8/3 (RAA 3, ARA 3, AAR 2), p2 2, p3 8/3, p4 2; tokens p1 50, p2 10, p3 5, p4 8
#   (2, 2): p1 5/3, p2 2, p3 4/3, p4 1; tokens p1 35, p2 10, p3 2.5, p4 4
#   (3, 3): tokens p1 45, p2 15, p3 2.5, p4 4;   (1, 1): tokens p1 20, p2 5, p3 2, p4 4
COST = {(3, 2): ((8 / 3 + 2 + 8 / 3 + 2) / 4, (50 + 10 + 5 + 8) / 4), (2, 2): ((5 / 3 + 2 + 4 / 3 + 1) / 4, 51.5 / 4),
        (3, 3): (None, 66.5 / 4), (1, 1): (1.0, 31 / 4)}


@pytest.mark.parametrize(("k", "t"), sorted(HAND))
def test_table_equals_hand_counts(k: int, t: int) -> None:
    row = row_at(calibration_table(PROOFS, resamples=50), k, t)
    (p1, p2), (p3, p4) = HAND[(k, t)]
    tpr, tnr = (p1 + p2) / 2, ((1 - p3) + (1 - p4)) / 2
    assert row["tpr"] == pytest.approx(tpr) and row["tnr"] == pytest.approx(tnr)
    assert row["false_accept_rate"] == pytest.approx(1 - tnr)
    f1 = 0.0 if tpr + tnr == 0 else 2 * tpr * tnr / (tpr + tnr)
    assert row["bal_f1"] == pytest.approx(f1)
    # standard errors over proofs: sample SD / sqrt(n) of the two per-proof shares = |a - b| / 2
    assert row["tpr_se"] == pytest.approx(abs(p1 - p2) / 2)
    assert row["tnr_se"] == pytest.approx(abs(p3 - p4) / 2)
    if (k, t) in COST:
        passes, tokens = COST[(k, t)]
        if passes is not None:
            assert row["passes_per_proof"] == pytest.approx(passes)
        assert row["tokens_per_proof"] == pytest.approx(tokens)


def test_table_shape_and_names() -> None:
    table = calibration_table(PROOFS, resamples=50)
    assert [(r["k"], r["t"]) for r in table] == [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3)]
    assert [r["rule"] for r in table if r["k"] == 3] == ["any", "majority", "unanimous"]
    assert calibration_table(PROOFS, max_k=2, resamples=50)[-1]["k"] == 2


@pytest.mark.parametrize(("a", "n", "k", "t", "acc", "non"), [
    (2, 3, 3, 2, 2.0, 2 / 3),  # p1 at (3, 2): RAA AAR ARA
    (3, 3, 3, 2, 2.0, 0.0),
    (0, 3, 3, 3, 0.0, 1.0),    # unanimous: the first pass rejects
    (8, 8, 8, 8, 8.0, 0.0),
    (0, 8, 8, 1, 0.0, 8.0),    # any of 8, nothing accepts: all 8 read
])
def test_expected_reads(a: int, n: int, k: int, t: int, acc: float, non: float) -> None:
    assert expected_reads(a, n, k, t) == pytest.approx((acc, non))


def test_default_choice_beats_one_pass_without_losing_tnr() -> None:
    c = choose(calibration_table(PROOFS, resamples=50))
    # by hand: TNR >= 5/6 (one pass's) leaves (1,1) .833, (2,2) .8, (3,2) 1.0, (3,3) .667
    assert (c["k"], c["t"], c["rule"]) == (3, 2, "majority") and c["bal_f1"] == pytest.approx(1.0)
    assert "not below one pass's" in c["reason"]


@pytest.mark.parametrize(("ceiling", "kt"), [(0.0, (2, 2)), (0.5, (1, 1)), (1.0, (1, 1))])
def test_false_accept_ceiling_at_fewest_tokens(ceiling: float, kt: tuple[int, int]) -> None:
    """TNR 1 (false accepts 0): (2,2) 12.9 tokens, (3,2) 18.25, (3,3) 16.6 -> (2,2); a ceiling of .5
    lets one pass (7.75 tokens, false accepts 1/6) in."""
    c = choose(calibration_table(PROOFS, resamples=50), max_false_accept=ceiling)
    assert (c["k"], c["t"]) == kt and c["false_accept_rate"] <= ceiling


def test_no_rule_meets_an_impossible_ceiling() -> None:
    flawed_accepts = [ProofPasses(True, [A, A]), ProofPasses(False, [A, A])]
    assert choose(calibration_table(flawed_accepts, resamples=20), max_false_accept=0.1) is None


@pytest.mark.parametrize(("proofs", "max_k", "words"), [
    ([], None, "needs labelled proofs"),
    ([ProofPasses(True, [A])], None, "both correct and flawed"),
    ([ProofPasses(True, [A, A]), ProofPasses(False, [R])], 2, "has 1 passes"),
])
def test_table_refuses_what_it_cannot_measure(proofs: list, max_k: int | None, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        calibration_table(proofs, max_k=max_k)


def test_a_pass_without_verdict_is_refused() -> None:
    with pytest.raises(ValueError, match="--resume"):
        ProofPasses(True, [A, "error"])


def _record() -> dict:
    table = calibration_table(PROOFS, resamples=50)
    return calibration_record(table, choose(table), {"data": "held.jsonl", "n_proofs": 4, "max_k": 3})


def test_card_round_trip(tmp_path: Path) -> None:
    write_prompt_card(tmp_path, True, "abc", max_completion_length=512)
    rec = _record()
    write_calibration(tmp_path, rec)
    assert read_calibration(tmp_path) == json.loads(json.dumps(rec))
    card = read_prompt_card(tmp_path)
    assert card["with_reference"] is True and card["max_completion_length"] == 512  # the rest of the card kept
    rule, passes, why = card_rule(card)
    assert (rule, passes) == ("at_least:2", 3)
    assert "Balanced F1 1.000" in why and "4 proofs of held.jsonl" in why and "unanimous of 3" in why


def test_calibration_into_a_folder_without_card(tmp_path: Path) -> None:
    write_calibration(tmp_path, _record())
    assert read_prompt_card(tmp_path) is None  # its training settings stay unknown: the defaults apply
    assert card_rule({"calibration": read_calibration(tmp_path)})[:2] == ("at_least:2", 3)


@pytest.mark.parametrize(("card", "words"), [
    (None, "proofcheck calibrate"),
    ({"with_reference": False}, "no calibrated rule"),
    ({"calibration": {"rule": "at_least:5", "passes": 4}}, "needs 5 accepts"),
    ({"calibration": {"rule": "vibes", "passes": 4}}, "unknown rule"),
    ({"calibration": {"rule": "at_least:2", "passes": "4"}}, "not a whole number"),
])
def test_card_rule_refuses_with_the_fix(card: dict | None, words: str) -> None:
    with pytest.raises(ValueError) as e:
        card_rule(card, "m")
    assert words in str(e.value) and "--rule card" in str(e.value)


def test_a_malformed_record_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_calibration(tmp_path, {"rule": "at_least:9", "passes": 8})
    assert not (tmp_path / CARD_FILE).exists()


def test_training_writes_the_held_out_calibration_into_every_saved_card(tmp_path: Path) -> None:
    """The final held-out evaluation's passes (grade_row's `outcome`s) -> the card's calibration, for every
    saved folder, with the same table `proofcheck calibrate` derives from those outcomes."""
    from types import SimpleNamespace

    from proofcheck.train.data import TrainingData
    from proofcheck.train.saving import write_cards

    results = [{"proof_id": p.proof_id, "is_correct": p.is_correct, "trials": [{"outcome": o} for o in p.outcomes]}
               for p in PROOFS]
    eval_cb = SimpleNamespace(last_results=results, _last_step=40, temperature=1.0, max_new_tokens=256)
    saved = {"merged": str(tmp_path / "merged"), "adapter": str(tmp_path / "adapter")}
    for folder in saved.values():
        Path(folder).mkdir()
    training = SimpleNamespace(chat_template_kwargs=None, max_completion_length=256)
    write_cards(saved, TrainingData([], []), training, eval_cb)
    for folder in saved.values():
        rec = read_calibration(folder)
        assert (rec["rule"], rec["passes"]) == ("at_least:2", 3)  # majority of 3, by hand above
        assert rec["measured_on"]["n_proofs"] == 4 and rec["measured_on"]["step"] == 40
        assert [(r["k"], r["t"]) for r in rec["table"]] == [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3)]
        assert read_prompt_card(folder)["max_completion_length"] == 256
    write_cards(saved, TrainingData([], []), training, None)  # no held-out evaluation: no calibration
    assert read_calibration(saved["merged"]) is None
