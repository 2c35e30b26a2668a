"""k-pass decisions: how several verifier passes over one proof become one decision.

Pure functions shared by serving, scoring and curation. A pass outcome is one of
"accept", "reject", "invalid" (an unparsable or unfinished output: never an accept) or
"cancelled" (stopped early because the decision was already fixed) or "error" (the endpoint
failed: no answer at all; never an accept, and the run that holds it is incomplete).

Example:
    >>> decide(["accept"] * 7 + ["reject"], "unanimous")
    'reject'
    >>> decide(["accept"] * 5 + ["invalid"] * 3, "majority")
    'accept'
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

Outcome = Literal["accept", "reject", "invalid", "cancelled", "error"]
Rule = Literal["unanimous", "majority", "any"]
RULES: tuple[str, ...] = ("unanimous", "majority", "any")
OUTCOMES: tuple[str, ...] = ("accept", "reject", "invalid", "cancelled", "error")


def decide(outcomes: list[str], rule: str = "unanimous") -> str:
    """"accept" or "reject" for a list of pass outcomes under `rule`.

    unanimous: every pass is a valid accept (pessimistic verification);
    majority: strictly more than half of all passes accept;
    any: at least one pass accepts.
    An empty list is rejected: no evidence is not acceptance.
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")
    bad = [o for o in outcomes if o not in OUTCOMES]
    if bad:
        raise ValueError(f"unknown pass outcome {bad[0]!r}; expected one of {', '.join(OUTCOMES)}")
    accepts = sum(o == "accept" for o in outcomes)
    if not outcomes:
        return "reject"
    if rule == "unanimous":
        ok = accepts == len(outcomes)
    elif rule == "majority":
        ok = 2 * accepts > len(outcomes)
    else:
        ok = accepts > 0
    return "accept" if ok else "reject"


def is_decided(outcomes: list[str], total: int, rule: str = "unanimous") -> bool:
    """True when the passes seen so far fix the decision whatever the remaining ones say.

    Used for early reject: under `unanimous` one non-accept settles it.
    """
    accepts = sum(o == "accept" for o in outcomes)
    others = len(outcomes) - accepts
    remaining = total - len(outcomes)
    if rule == "unanimous":
        return others > 0 or remaining == 0
    if rule == "majority":
        return 2 * accepts > total or 2 * (accepts + remaining) <= total
    if rule == "any":
        return accepts > 0 or remaining == 0
    raise ValueError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")


def vote_counts(outcomes: list[str]) -> dict[str, int]:
    """Counts for every outcome kind (zeros included, stable key order)."""
    c = Counter(outcomes)
    return {k: c.get(k, 0) for k in OUTCOMES}


def first_error_votes(steps: list[int | None]) -> dict[str, int]:
    """Histogram of first_error_step over valid passes (keys as strings for JSON)."""
    c = Counter(s for s in steps if s is not None)
    return {str(k): c[k] for k in sorted(c)}
