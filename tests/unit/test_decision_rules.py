"""The k-pass rules (proofcheck.decision): at_least:t of k, the named rules as its special cases,
early stop for every rule checked over every order of outcomes for k <= 8, and bad rules refused
with the fix in the message."""

from __future__ import annotations

import itertools

import pytest

from proofcheck.decision import check_rule_name, decide, is_decided, rule_for, threshold

A, R, INV = "accept", "reject", "invalid"


@pytest.mark.parametrize(("rule", "k", "t"), [
    ("unanimous", 8, 8), ("unanimous", 1, 1), ("majority", 8, 5), ("majority", 7, 4), ("majority", 1, 1),
    ("majority", 2, 2), ("any", 8, 1), ("at_least:1", 8, 1), ("at_least:6", 8, 6), ("at_least:8", 8, 8),
])
def test_threshold_by_hand(rule: str, k: int, t: int) -> None:
    assert threshold(rule, k) == t


@pytest.mark.parametrize(("outcomes", "rule", "decision"), [
    ([A] * 3 + [R] * 5, "at_least:3", "accept"),
    ([A] * 2 + [R] * 6, "at_least:3", "reject"),
    ([A] * 3 + [INV] * 5, "at_least:3", "accept"),
    ([A] * 2 + ["cancelled"] * 6, "at_least:3", "reject"),  # a cancelled pass never accepts
    ([A] * 2 + ["error"] * 2, "at_least:2", "accept"),
    ([A] * 4, "at_least:4", "accept"),
    ([], "at_least:1", "reject"),  # no evidence is not acceptance
])
def test_decide_at_least(outcomes: list[str], rule: str, decision: str) -> None:
    assert decide(outcomes, rule) == decision


@pytest.mark.parametrize(("t", "k", "name"), [(8, 8, "unanimous"), (5, 8, "majority"), (1, 8, "any"),
                                              (6, 8, "at_least:6"), (1, 1, "unanimous"), (2, 3, "majority")])
def test_rule_for_names_the_named_rules(t: int, k: int, name: str) -> None:
    assert rule_for(t, k) == name


@pytest.mark.parametrize(("rule", "k", "words"), [
    ("at_least:9", 8, ["needs 9 accepts", "only 8 passes", "T <= 8", "at least 9 passes"]),
    ("at_least:0", 8, ["whole number >= 1"]),
    ("at_least:-1", 8, ["whole number >= 1"]),
    ("at_least:two", 8, ["whole number >= 1"]),
    ("at_least:03", 8, ["whole number >= 1"]),
    ("vibes", 8, ["unknown rule 'vibes'", "at_least:T"]),
    ("card", 8, ["resolved where the card is read", "at_least:T"]),
    ("unanimous", 0, ["k must be >= 1"]),
])
def test_bad_rules_name_the_fix(rule: str, k: int, words: list[str]) -> None:
    with pytest.raises(ValueError) as e:
        threshold(rule, k)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_card_is_a_rule_name_where_a_card_is_read() -> None:
    assert check_rule_name("card", allow_card=True) == "card"
    with pytest.raises(ValueError, match="card"):
        check_rule_name("cards", allow_card=True)


def _rules(k: int) -> list[tuple[str, int]]:
    """(rule, t by hand) for every rule that decides k passes."""
    named = [("unanimous", k), ("majority", k // 2 + 1), ("any", 1)]
    return named + [(f"at_least:{t}", t) for t in range(1, k + 1)]


@pytest.mark.parametrize("k", range(1, 9))
def test_early_stop_never_changes_a_decision(k: int) -> None:
    """Every order of accept / reject / invalid outcomes of k passes, every rule: stopping where
    `is_decided` first says so (the rest cancelled) decides as all k passes do (accepts >= t, by hand),
    and it stops at the first pass where the by-hand rule is settled (t accepts or k - t + 1 others)."""
    alphabet = (A, R, INV)
    for rule, t in _rules(k):
        for seq in itertools.product(alphabet, repeat=k):
            full = "accept" if seq.count(A) >= t else "reject"
            stop = next(j for j in range(k + 1) if is_decided(list(seq[:j]), k, rule))
            cut = list(seq[:stop]) + ["cancelled"] * (k - stop)
            assert decide(cut, rule) == full, (rule, seq, stop)
            acc = [seq[:j].count(A) for j in range(k + 1)]
            settled = next(j for j in range(k + 1) if acc[j] >= t or j - acc[j] >= k - t + 1)
            assert stop == settled, (rule, seq, stop, settled)
