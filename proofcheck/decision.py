"""k-pass decisions: how several verifier passes over one proof become one decision.

Pure functions shared by serving, scoring, curation and calibration. A pass outcome is one of
"accept", "reject", "invalid" (an unparsable or unfinished output: never an accept) or
"cancelled" (stopped early because the decision was already fixed) or "error" (the endpoint
failed: no answer at all; never an accept, and the run that holds it is incomplete).

A rule is a threshold: accept iff at least t of the k passes are valid accepts. `at_least:t`
names t directly; the three named rules are its special cases:
unanimous = at_least:k, majority = at_least:floor(k/2)+1, any = at_least:1.
`card` (the rule calibrated for a model and stored in its card, `proofcheck.calibration`) is
resolved to `at_least:t` of k passes by whoever reads the card (`proofcheck.prompt_card.card_rule`).

Example:
    >>> decide(["accept"] * 7 + ["reject"], "unanimous")
    'reject'
    >>> decide(["accept"] * 5 + ["invalid"] * 3, "majority")
    'accept'
    >>> decide(["accept"] * 3 + ["reject"] * 5, "at_least:3")
    'accept'
    >>> threshold("majority", 8), threshold("at_least:5", 8)
    (5, 5)
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

Outcome = Literal["accept", "reject", "invalid", "cancelled", "error"]
Rule = str  # "unanimous" | "majority" | "any" | "at_least:<t>"
RULES: tuple[str, ...] = ("unanimous", "majority", "any")
AT_LEAST = "at_least:"
CARD_RULE = "card"
OUTCOMES: tuple[str, ...] = ("accept", "reject", "invalid", "cancelled", "error")
RULE_SYNTAX = "unanimous, majority, any or at_least:T (accept iff at least T of the k passes accept, 1 <= T <= k)"


def _fix(rule: str) -> str:
    return f"unknown rule {rule!r}; use {RULE_SYNTAX}"


def check_rule_name(rule: str, allow_card: bool = False) -> str:
    """`rule` unchanged when it is well formed (whatever k); ValueError with the fix otherwise.

    >>> check_rule_name("at_least:2")
    'at_least:2'
    >>> check_rule_name("at_least:0")
    Traceback (most recent call last):
    ...
    ValueError: rule 'at_least:0': T must be a whole number >= 1 (e.g. at_least:5 accepts with 5 accepts of 8 passes)
    """
    if not isinstance(rule, str):
        raise ValueError(_fix(str(rule)))
    if rule in RULES or (allow_card and rule == CARD_RULE):
        return rule
    if rule.startswith(AT_LEAST):
        t = rule[len(AT_LEAST):]
        if not t.isdigit() or int(t) < 1 or t != str(int(t)):
            raise ValueError(f"rule {rule!r}: T must be a whole number >= 1 (e.g. at_least:5 accepts with 5 "
                             "accepts of 8 passes)")
        return rule
    if rule == CARD_RULE:
        raise ValueError(f"rule 'card' is the rule stored in a model's card; it is resolved where the card is read "
                         f"(proofcheck serve / verify --rule card), so use {RULE_SYNTAX} here")
    raise ValueError(_fix(rule) + (" (the model's calibrated rule: card)" if allow_card else ""))


def threshold(rule: str, k: int) -> int:
    """t, the accepts among k passes a rule needs. ValueError (with the fix) for a bad rule, k < 1 or t > k.

    >>> threshold("unanimous", 4), threshold("majority", 4), threshold("any", 4)
    (4, 3, 1)
    """
    check_rule_name(rule)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"passes: k must be >= 1, got {k!r}")
    if rule == "unanimous":
        return k
    if rule == "majority":
        return k // 2 + 1
    if rule == "any":
        return 1
    t = int(rule[len(AT_LEAST):])
    if t > k:
        raise ValueError(f"rule {rule!r} needs {t} accepts but only {k} passes run: use at_least:T with T <= {k}, "
                         f"or run at least {t} passes")
    return t


def check_rule(rule: str, k: int) -> None:
    """ValueError with the fix unless `rule` decides k passes (see `threshold`)."""
    threshold(rule, k)


def rule_for(t: int, k: int) -> str:
    """The canonical name of "at least t of k": the named rule when one fits, else at_least:t.

    >>> rule_for(8, 8), rule_for(5, 8), rule_for(1, 8), rule_for(6, 8)
    ('unanimous', 'majority', 'any', 'at_least:6')
    """
    threshold(f"{AT_LEAST}{t}", k)
    if t == k:
        return "unanimous"
    if t == k // 2 + 1:
        return "majority"
    if t == 1:
        return "any"
    return f"{AT_LEAST}{t}"


def _check_outcomes(outcomes: list[str]) -> int:
    bad = [o for o in outcomes if o not in OUTCOMES]
    if bad:
        raise ValueError(f"unknown pass outcome {bad[0]!r}; expected one of {', '.join(OUTCOMES)}")
    return sum(o == "accept" for o in outcomes)


def decide(outcomes: list[str], rule: str = "unanimous") -> str:
    """"accept" or "reject" for a list of pass outcomes under `rule` (k = len(outcomes)).

    unanimous: every pass is a valid accept (pessimistic verification);
    majority: strictly more than half of all passes accept;
    any: at least one pass accepts; at_least:t: at least t passes accept (t <= k, else ValueError).
    An empty list is rejected: no evidence is not acceptance.
    """
    check_rule_name(rule)
    accepts = _check_outcomes(outcomes)
    if not outcomes:
        return "reject"
    return "accept" if accepts >= threshold(rule, len(outcomes)) else "reject"


def is_decided(outcomes: list[str], total: int, rule: str = "unanimous") -> bool:
    """True when the passes seen so far fix the decision whatever the remaining ones say.

    Early stop for every rule: decided once t accepts are in, or k - t + 1 non-accepts (then even
    all the remaining passes accepting cannot reach t). Under `unanimous` one non-accept settles it.
    """
    t = threshold(rule, total)
    accepts = _check_outcomes(outcomes)
    others = len(outcomes) - accepts
    return accepts >= t or others >= total - t + 1 or len(outcomes) >= total


def vote_counts(outcomes: list[str]) -> dict[str, int]:
    """Counts for every outcome kind (zeros included, stable key order)."""
    c = Counter(outcomes)
    return {k: c.get(k, 0) for k in OUTCOMES}


def first_error_votes(steps: list[int | None]) -> dict[str, int]:
    """Histogram of first_error_step over valid passes (keys as strings for JSON)."""
    c = Counter(s for s in steps if s is not None)
    return {str(k): c[k] for k in sorted(c)}
