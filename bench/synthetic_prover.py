"""A synthetic prover whose proofs are valid at a known rate, for scoring a verifier that can check them.

ProverBench scores a prover by what its verifier accepts. Scored with a verifier trained on arithmetic
chains, real olympiad proofs say nothing: the verifier cannot check them. This module turns labelled
curriculum proofs the verifier was never trained on (the demo's dev set) into ProverBench inputs,
`problems.jsonl` and `submissions.jsonl`, chosen so that exactly `round(valid_rate * n)` of the `n`
submissions are valid. The prover's true score is then known, and the score the verifier gives it
(pessimistic, per pass, calibrated) can be read against it.

Each labelled task is one problem with one proof (sample 0). Its reference solution is left out: the
curriculum's solution states the answer, and the verifier was trained without it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLICY = "synthetic-prover"
PROBLEM_KEYS = ("problem_id", "problem", "reference_answer", "domain", "subject", "source_id")


@dataclass(frozen=True)
class SyntheticProver:
    """The inputs written (`problems`, `submissions`) and what is known about them."""

    problems: Path
    submissions: Path
    n: int
    n_valid: int

    @property
    def true_rate(self) -> float:
        """The share of submissions that are valid: the score a perfect verifier gives this prover."""
        return self.n_valid / self.n


def choose(tasks: list[dict[str, Any]], valid_rate: float, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` labelled tasks (`is_correct`), `round(valid_rate * n)` of them valid, in a seeded random order.

    Raises ValueError with the counts when the tasks hold too few of either kind, or the rate is not in [0, 1].

    >>> ts = [{"proof_id": str(i), "is_correct": i % 2 == 0} for i in range(8)]
    >>> sum(t["is_correct"] for t in choose(ts, 0.75, 4))
    3
    """
    if not 0.0 <= valid_rate <= 1.0:
        raise ValueError(f"valid_rate={valid_rate}: give a share between 0 and 1")
    if n < 1:
        raise ValueError(f"n={n}: the prover needs at least one submission")
    n_valid = round(valid_rate * n)
    valid = [t for t in tasks if t.get("is_correct") is True]
    flawed = [t for t in tasks if t.get("is_correct") is False]
    if len(valid) < n_valid or len(flawed) < n - n_valid:
        raise ValueError(f"{n} submissions valid at {valid_rate:g} need {n_valid} valid and {n - n_valid} flawed "
                         f"proofs; the tasks hold {len(valid)} and {len(flawed)}: give more tasks or a smaller n")
    rng = random.Random(seed)
    picked = rng.sample(valid, n_valid) + rng.sample(flawed, n - n_valid)
    rng.shuffle(picked)
    return picked


def to_prover_records(tasks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """ProverBench problems and submissions (one sample per problem) from labelled tasks."""
    problems, submissions = [], []
    for t in tasks:
        problems.append({k: t[k] for k in PROBLEM_KEYS if t.get(k) is not None})
        submissions.append({"problem_id": t["problem_id"], "sample": 0, "policy": POLICY, "steps": list(t["steps"])})
    return problems, submissions


def write_synthetic_prover(tasks: list[dict[str, Any]], out: Path, valid_rate: float, n: int,
                           seed: int = 0) -> SyntheticProver:
    """Write `problems.jsonl`, `submissions.jsonl` and `truth.json` (the rate and each proof's label) under `out`."""
    picked = choose(tasks, valid_rate, n, seed)
    problems, submissions = to_prover_records(picked)
    out.mkdir(parents=True, exist_ok=True)

    def jsonl(rows: list[dict[str, Any]]) -> str:
        return "".join(json.dumps(r) + "\n" for r in rows)

    (out / "problems.jsonl").write_text(jsonl(problems), encoding="utf-8")
    (out / "submissions.jsonl").write_text(jsonl(submissions), encoding="utf-8")
    n_valid = sum(bool(t["is_correct"]) for t in picked)
    truth = {"n": n, "n_valid": n_valid, "true_rate": n_valid / n, "valid_rate_asked": valid_rate, "seed": seed,
             "labels": {t["problem_id"]: bool(t["is_correct"]) for t in picked}}
    (out / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    return SyntheticProver(out / "problems.jsonl", out / "submissions.jsonl", n, n_valid)


def per_pass_rate(records: list[dict[str, Any]]) -> float | None:
    """The share of answered passes that accept: the score one pass would give (cancelled and invalid passes
    count as not accepting only when they answered; a cancelled pass gave no answer and is left out)."""
    from proofcheck.bench.scoring import reparse

    outcomes = [reparse(t, r["n_steps"]).outcome for r in records if not r.get("failed")
                for t in r.get("verifier_trials", [])]
    answered = [o for o in outcomes if o != "cancelled"]
    return sum(o == "accept" for o in answered) / len(answered) if answered else None


def rates_by_label(records: list[dict[str, Any]], labels: dict[str, bool]) -> dict[str, float | None]:
    """Per-pass accept rate on the valid and on the flawed submissions (TPR and 1 - TNR of one pass)."""
    valid = [r for r in records if labels.get(r["problem_id"]) is True]
    flawed = [r for r in records if labels.get(r["problem_id"]) is False]
    return {"per_pass_accept_valid": per_pass_rate(valid), "per_pass_accept_flawed": per_pass_rate(flawed)}
