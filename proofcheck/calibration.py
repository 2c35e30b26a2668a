"""Calibrating the k-pass decision: every rule "at least t of k" measured from one run of max-k passes.

`proofcheck calibrate` (bench/) and the final held-out evaluation of a GRPO run (train/) verify
labelled proofs with max-k passes once; this module derives from those outcomes the whole table,
every k <= max-k and t <= k, and picks an operating point. Pure Python, no model.

How a k < max-k is measured (documented in docs/serving.md): **the average over all subsets**.
A proof verified with n passes, a of them accepts, is accepted by "at least t of k" with the
probability that a random k of its n passes hold >= t accepts (hypergeometric):
    P = sum_{j >= t} C(a, j) C(n - a, k - j) / C(n, k).
That is the expected decision over every k-subset (and every order) of the passes, so each k uses
all the passes (lower variance than the first k alone) and, at k = n, it is the rule itself.
TPR is the mean of P over correct proofs, TNR the mean of 1 - P over flawed ones; their standard
errors are over proofs, and Balanced F1's is a bootstrap over proofs within each class
(`proofcheck.metrics`), as the held-out evaluation reports its own.

Cost with early stop (`proofcheck.decision.is_decided`): passes are read one at a time in random
order and reading stops once t accepts, or k - t + 1 non-accepts, are in. `passes_per_proof` is
the expected number read; `tokens_per_proof` the expected completion tokens of those passes (each
pass's own count; None when the run did not record tokens, e.g. training's evaluation). This is
the cost of sequential passes; the service runs its k passes concurrently, so a stopped pass has
already spent the tokens it generated until the stop.

Example:
    >>> round(accept_probability(2, 3, 2, 2), 4)  # 2 accepts of 3 passes: 1 of the 3 pairs is both accepts
    0.3333
    >>> table = calibration_table([ProofPasses(True, ["accept"] * 2), ProofPasses(False, ["reject", "accept"])])
    >>> [(r["k"], r["t"], r["tpr"], r["tnr"]) for r in table]
    [(1, 1, 1.0, 0.5), (2, 1, 1.0, 0.0), (2, 2, 1.0, 1.0)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb
from typing import Any

from proofcheck.decision import rule_for
from proofcheck.metrics import bal_f1_se, balanced_f1, standard_error

METHOD = "all-subsets"  # how k < max-k is derived (module docstring)
OBJECTIVE_DEFAULT = "max_bal_f1_tnr_at_least_one_pass"
OBJECTIVE_FALSE_ACCEPT = "min_tokens_false_accept_at_most"
EPS = 1e-12


@dataclass
class ProofPasses:
    """One labelled proof and its passes' outcomes (`proofcheck.decision.OUTCOMES`), in order, with
    each pass's completion tokens when known."""

    is_correct: bool
    outcomes: list[str]
    tokens: list[int] | None = None
    proof_id: str = ""
    accepts: int = field(init=False)

    def __post_init__(self) -> None:
        if self.tokens is not None and len(self.tokens) != len(self.outcomes):
            raise ValueError(f"proof {self.proof_id!r}: {len(self.tokens)} token counts for {len(self.outcomes)} passes")
        bad = [o for o in self.outcomes if o in ("cancelled", "error")]
        if bad:
            raise ValueError(f"proof {self.proof_id!r}: a {bad[0]} pass has no verdict; calibration needs every pass "
                             "run to the end (rerun the missing passes, e.g. with --resume)")
        self.accepts = sum(o == "accept" for o in self.outcomes)


def accept_probability(a: int, n: int, k: int, t: int) -> float:
    """P(a random k of n passes, a of them accepts, hold at least t accepts)."""
    return sum(comb(a, j) * comb(n - a, k - j) for j in range(t, min(a, k) + 1)) / comb(n, k)


def expected_reads(a: int, n: int, k: int, t: int) -> tuple[float, float]:
    """(accepts, non-accepts) expected to be read before "at least t of k" is decided, drawing the
    n passes (a accepts) in random order without replacement and stopping at t accepts or k - t + 1
    non-accepts."""
    acc_read = non_read = 0.0
    states = {(0, 0): 1.0}  # (accepts read, non-accepts read) -> probability, undecided states only
    while states:
        nxt: dict[tuple[int, int], float] = {}
        for (x, y), p in states.items():
            left = n - x - y
            for dx, dy, ways in ((1, 0, a - x), (0, 1, n - a - y)):
                if ways <= 0:
                    continue
                q = p * ways / left
                acc_read += q * dx
                non_read += q * dy
                x2, y2 = x + dx, y + dy
                if x2 < t and y2 < k - t + 1:
                    nxt[(x2, y2)] = nxt.get((x2, y2), 0.0) + q
        states = nxt
    return acc_read, non_read


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _pass_tokens(p: ProofPasses) -> tuple[float, float] | None:
    """Mean tokens of the proof's accept passes and of its other passes (0 where it has none)."""
    if p.tokens is None:
        return None
    acc = [n for o, n in zip(p.outcomes, p.tokens, strict=True) if o == "accept"]
    non = [n for o, n in zip(p.outcomes, p.tokens, strict=True) if o != "accept"]
    return (sum(acc) / len(acc) if acc else 0.0), (sum(non) / len(non) if non else 0.0)


def calibration_table(proofs: list[ProofPasses], max_k: int | None = None, seed: int = 0,
                      resamples: int = 1000) -> list[dict[str, Any]]:
    """One row per (k, t), k = 1..max_k, t = 1..k: `rule`, `tpr`, `tnr`, `bal_f1`, `false_accept_rate`
    (1 - TNR) with standard errors, `passes_per_proof` and `tokens_per_proof` (early stop).

    `max_k`: default the fewest passes any proof has; a proof with fewer is a ValueError. Needs at
    least one correct and one flawed proof.
    """
    if not proofs:
        raise ValueError("calibration needs labelled proofs; got none")
    fewest = min(len(p.outcomes) for p in proofs)
    max_k = fewest if max_k is None else max_k
    if max_k < 1 or fewest < max_k:
        short = next(p for p in proofs if len(p.outcomes) < max(max_k, 1))
        raise ValueError(f"max-k {max_k}: proof {short.proof_id!r} has {len(short.outcomes)} passes; every proof "
                         f"needs at least max-k (>= 1) passes")
    if all(p.is_correct for p in proofs) or not any(p.is_correct for p in proofs):
        raise ValueError("calibration needs both correct and flawed proofs (TPR and TNR); the data has only "
                         f"{'correct' if proofs[0].is_correct else 'flawed'} ones")
    with_tokens = all(p.tokens is not None for p in proofs)
    rows = []
    for k in range(1, max_k + 1):
        for t in range(1, k + 1):
            pos, neg, passes, tokens = [], [], [], []
            for p in proofs:
                n = len(p.outcomes)
                pa = accept_probability(p.accepts, n, k, t)
                (pos if p.is_correct else neg).append(pa if p.is_correct else 1.0 - pa)
                ea, en = expected_reads(p.accepts, n, k, t)
                passes.append(ea + en)
                if with_tokens:
                    ta, tn = _pass_tokens(p) or (0.0, 0.0)
                    tokens.append(ea * ta + en * tn)
            tpr, tnr = _mean(pos), _mean(neg)
            rows.append({"k": k, "t": t, "rule": rule_for(t, k), "tpr": tpr, "tnr": tnr,
                         "bal_f1": balanced_f1(tpr, tnr), "false_accept_rate": None if tnr is None else 1.0 - tnr,
                         "tpr_se": standard_error(pos), "tnr_se": standard_error(neg),
                         "bal_f1_se": bal_f1_se(pos, neg, seed=seed, resamples=resamples),
                         "passes_per_proof": _mean(passes), "tokens_per_proof": _mean(tokens) if with_tokens else None})
    return rows


def _cost(row: dict[str, Any]) -> float:
    """Tokens per proof where the run recorded them, else passes per proof."""
    return row["tokens_per_proof"] if row["tokens_per_proof"] is not None else row["passes_per_proof"]


def row_at(table: list[dict[str, Any]], k: int, t: int) -> dict[str, Any]:
    """The table's row for "at least t of k"."""
    return next(r for r in table if r["k"] == k and r["t"] == t)


def choose(table: list[dict[str, Any]], max_false_accept: float | None = None) -> dict[str, Any] | None:
    """The operating point: a copy of the chosen row plus `objective` and `reason`; None when no rule
    meets `max_false_accept`.

    Default: the highest Balanced F1 among rules whose TNR is not below one pass's (k = t = 1), ties
    to the cheaper rule. With `max_false_accept` X: among rules with false-accept rate (1 - TNR) <= X,
    the fewest tokens per proof (passes where tokens were not recorded), ties to the higher Balanced F1.
    """
    one = row_at(table, 1, 1)
    cost_name = "tokens" if one["tokens_per_proof"] is not None else "passes"
    if max_false_accept is None:
        ok = [r for r in table if r["tnr"] >= one["tnr"] - EPS]
        best = min(ok, key=lambda r: (-(r["bal_f1"] or 0.0), _cost(r), r["k"], -r["t"]))
        reason = (f"highest Balanced F1 ({best['bal_f1']:.3f}) among rules whose TNR is not below one pass's "
                  f"({one['tnr']:.3f})")
        return {**best, "objective": OBJECTIVE_DEFAULT, "reason": reason}
    if not 0.0 <= max_false_accept <= 1.0:
        raise ValueError(f"--max-false-accept {max_false_accept}: a rate, between 0 and 1")
    ok = [r for r in table if r["false_accept_rate"] <= max_false_accept + EPS]
    if not ok:
        return None
    best = min(ok, key=lambda r: (_cost(r), -(r["bal_f1"] or 0.0), r["k"]))
    reason = (f"fewest {cost_name} per proof ({_cost(best):.1f}) among rules whose false-accept rate is at most "
              f"{max_false_accept:g} (this one: {best['false_accept_rate']:.3f})")
    return {**best, "objective": OBJECTIVE_FALSE_ACCEPT, "max_false_accept": max_false_accept, "reason": reason}


def lowest_false_accept(table: list[dict[str, Any]]) -> dict[str, Any]:
    """The row with the lowest false-accept rate (what to say when `choose` finds none)."""
    return min(table, key=lambda r: (r["false_accept_rate"], _cost(r)))


def calibration_record(table: list[dict[str, Any]], choice: dict[str, Any], measured_on: dict[str, Any]) -> dict:
    """What the model card keeps (`proofcheck.prompt_card.write_calibration`): the chosen rule (`rule`
    at_least:t, `passes` k), why, the one-pass and unanimous-max-k baselines, the whole table, and the
    data it was measured on (file, proofs, passes, who measured)."""
    max_k = max(r["k"] for r in table)
    return {"rule": f"at_least:{choice['t']}", "passes": choice["k"], "named_rule": choice["rule"],
            "objective": choice["objective"], "reason": choice["reason"],
            "max_false_accept": choice.get("max_false_accept"), "method": METHOD,
            "choice": {k: v for k, v in choice.items() if k not in ("objective", "reason", "max_false_accept")},
            "one_pass": row_at(table, 1, 1), "unanimous": row_at(table, max_k, max_k),
            "measured_on": dict(measured_on), "table": table}


def describe(record: dict[str, Any]) -> str:
    """One line: the calibrated rule, its numbers against unanimity, and where they were measured.

    >>> describe({"rule": "at_least:3", "passes": 4, "named_rule": "majority", "reason": "best",
    ...           "choice": {"bal_f1": 0.9, "bal_f1_se": 0.02}, "unanimous": {"k": 4, "bal_f1": 0.5},
    ...           "measured_on": {"data": "held.jsonl", "n_proofs": 64}})
    'at_least:3 of 4 passes (majority): Balanced F1 0.900 +- 0.020 (unanimous of 4: 0.500), best; measured on 64 proofs of held.jsonl'
    """
    c, u, m = record["choice"], record["unanimous"], record.get("measured_on") or {}
    se = f" +- {c['bal_f1_se']:.3f}" if c.get("bal_f1_se") is not None else ""
    uf = "-" if u.get("bal_f1") is None else f"{u['bal_f1']:.3f}"
    return (f"{record['rule']} of {record['passes']} passes ({record['named_rule']}): Balanced F1 "
            f"{c['bal_f1']:.3f}{se} (unanimous of {u['k']}: {uf}), {record['reason']}; measured on "
            f"{m.get('n_proofs', '?')} proofs of {m.get('data', '?')}")
