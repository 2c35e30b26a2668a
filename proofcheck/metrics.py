"""Benchmark metrics (docs/scoring.md), pure Python over plain records.

VerifierBench (per proof over R repeats, as the AdvancedMathBench release computes them):
  rough = share of the R requested repeats that are valid and have the right polarity
  (a missing or invalid repeat earns 0: the denominator is fixed);
  rough_accuracy = mean rough over all proofs;
  TPR = mean rough over correct proofs, TNR = mean rough over incorrect proofs;
  Balanced F1 = 2*TPR*TNR/(TPR+TNR), 0 when both are 0, None when a class is absent.
ProverBench (pessimistic): a proof is correct iff all k passes are valid accepts;
  problem score = mean over its samples; overall = mean over problems.
Held-out evaluation (training, the demo, the ablations): `eval_metrics` over graded k-pass results,
each metric with its standard error over proofs (`<name>_se`); the metric names and their short
labels are `EVAL_METRICS` and `SHORT_NAMES`, used by training, the demo's report and the ablations'; the
benchmarks' metric names are `VERIFIER_SCORES` and `PROVER_SCORES`, used by every scoring report.

Example:
    >>> balanced_f1(1.0, 0.5)
    0.6666666666666666
    >>> balanced_f1(None, 0.5) is None
    True
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from proofcheck.parsing import NON_STOP_FINISH

# The share of verifier passes that are valid answers (`proof_valid_rate` per proof), under its one name
# in code: VALID_RATE, VerifierBench's and ProverBench's key. The held-out evaluation files it as
# EVAL_VALID_RATE: training's logs (`eval_verify/valid_rate`), its run_summary.json and the demo's
# summary.json (before/after) have always used the short key, kept for compatibility; the rename is
# written once, here (`EVAL_RENAMES`, `eval_keys`), and every caller names the key by these constants.
VALID_RATE = "verifier_valid_rate"
EVAL_VALID_RATE = "valid_rate"
EVAL_RENAMES = {VALID_RATE: EVAL_VALID_RATE}
# VerifierBench's and ProverBench's metric names, in the order every report shows them: the scoring summaries
# withhold the scores of an incomplete run (bench/scoring.py), and `proofcheck score`, `proofcheck metrics` and a
# run's report.md print the counts and then the scores. One list each, read by all of them.
VERIFIER_COUNTS = ("n_proofs", "n_trials")
VERIFIER_SCORES = ("rough_accuracy", "rough_tpr", "rough_tnr", "rough_bal_f1", "balanced_accuracy",
                   "first_error_step_accuracy", "first_error_step_accuracy_incorrect", VALID_RATE,
                   "meta_ver_tpr", "meta_ver_tnr", "meta_ver_bal_f1", "meta_score_mean", "meta_valid_rate")
PROVER_COUNTS = ("n_problems", "n_submissions", "n_problems_without_submission")
PROVER_SCORES = ("pessimistic", "pass_any_sample", VALID_RATE)
RUN_FAILURES = ("generation_failure_rate", "errored_passes")  # a scoring run's own failures (`proofcheck score`)
# The held-out evaluation's metrics, in the order the reports show them.
EVAL_METRICS = ("rough_bal_f1", "rough_tpr", "rough_tnr", "discrimination", EVAL_VALID_RATE, "reward_mean",
                "first_error_step_accuracy", "kpass_bal_f1", "kpass_tpr", "kpass_tnr")
SHORT_NAMES = {"rough_bal_f1": "Bal-F1", "rough_tpr": "TPR", "rough_tnr": "TNR", EVAL_VALID_RATE: "valid",
               "reward_mean": "reward", "first_error_step_accuracy": "1st-err", "discrimination": "TPR+TNR-1",
               "kpass_bal_f1": "k-pass Bal-F1", "kpass_tpr": "k-pass TPR", "kpass_tnr": "k-pass TNR"}


def balanced_f1(tpr: float | None, tnr: float | None) -> float | None:
    """Harmonic mean of TPR and TNR; 0 if both are 0; None if either class is absent."""
    if tpr is None or tnr is None:
        return None
    if tpr + tnr == 0:
        return 0.0
    return 2 * tpr * tnr / (tpr + tnr)


def _mean(xs: list[float]) -> float | None:
    return fmean(xs) if xs else None


@dataclass
class Trial:
    """One verifier pass over one proof: validity, predicted first error, optional meta score."""

    valid: bool
    first_error_step: int | None = None
    meta_score: float | None = None
    meta_valid: bool = False  # a meta evaluation was made and is valid (for `meta_valid_rate`)


@dataclass
class ProofTrials:
    """A gold-labelled proof and the verifier's repeats on it."""

    proof_id: str
    is_correct: bool
    first_error_step: int
    domain: str
    trials: list[Trial] = field(default_factory=list)


def _share(hits: list[bool], repeats: int | None) -> float:
    """Hits over the requested repeats (fixed denominator), or over the trials seen."""
    denom = repeats or len(hits)
    return sum(hits) / denom if denom else 0.0


def proof_rough(p: ProofTrials, repeats: int | None = None) -> float:
    """Rough correctness of one proof: the share of its repeats that are valid with the gold polarity.

    A repeat hits when it is valid and accepts a correct proof or rejects an incorrect one (at
    any step). The per-proof unit of `rough_accuracy`, TPR and TNR, and of their standard errors
    in training evaluation (`eval_metrics`), so both use one rule.
    """
    return _share([t.valid and ((t.first_error_step == -1) == p.is_correct) for t in p.trials], repeats)


def proof_kpass_right(p: ProofTrials, k: int | None = None) -> float:
    """1.0 when the k-pass decision of `proofcheck serve` on one proof is right, else 0.0.

    The service accepts only if every one of its k passes is a valid accept (`proofcheck.decision`,
    rule `unanimous`); an invalid pass is never an accept. `k` takes the proof's first k trials
    (all when None), so one evaluation with 8 passes gives the decision at every k <= 8. A proof
    without trials is rejected (no evidence is not acceptance).
    """
    from proofcheck.decision import decide

    trials = p.trials[:k] if k is not None else p.trials
    outcomes = ["accept" if t.valid and t.first_error_step == -1 else "reject" if t.valid else "invalid"
                for t in trials]
    return float((decide(outcomes, "unanimous") == "accept") == p.is_correct)


def kpass_metrics(proofs: list[ProofTrials], k: int | None = None) -> dict[str, float | None]:
    """Balanced F1, TPR and TNR of the k-pass unanimous decision over proofs (one decision a proof)."""
    tpr = _mean([proof_kpass_right(p, k) for p in proofs if p.is_correct])
    tnr = _mean([proof_kpass_right(p, k) for p in proofs if not p.is_correct])
    return {"kpass_bal_f1": balanced_f1(tpr, tnr), "kpass_tpr": tpr, "kpass_tnr": tnr}


def proof_first_error_step_accuracy(p: ProofTrials, repeats: int | None = None) -> float:
    """Share of one proof's repeats that are valid and name its gold first error step (-1: none).

    The per-proof unit of `first_error_step_accuracy` and of its standard error in training
    evaluation.
    """
    return _share([t.valid and t.first_error_step == p.first_error_step for t in p.trials], repeats)


def proof_valid_rate(p: ProofTrials, repeats: int | None = None) -> float:
    """Share of one proof's repeats that are valid verifier outputs.

    The per-proof unit of `verifier_valid_rate` (their mean over proofs) and of its standard
    error in training evaluation. With `repeats` fixed the mean equals the pooled share of all
    trials; without, every proof weighs the same, as in the rough metrics.
    """
    return _share([t.valid for t in p.trials], repeats)


def _verifier_split(proofs: list[ProofTrials], repeats: int | None = None) -> dict[str, float | int | None]:
    pos = [p for p in proofs if p.is_correct]
    neg = [p for p in proofs if not p.is_correct]
    tpr = _mean([proof_rough(p, repeats) for p in pos])
    tnr = _mean([proof_rough(p, repeats) for p in neg])
    trials = [t for p in proofs for t in p.trials]
    slots = len(proofs) * repeats if repeats else len(trials)
    out: dict[str, float | int | None] = {
        "n_proofs": len(proofs),
        "n_correct": len(pos),
        "n_incorrect": len(neg),
        "n_trials": len(trials),
        "rough_accuracy": _mean([proof_rough(p, repeats) for p in proofs]),
        "rough_tpr": tpr,
        "rough_tnr": tnr,
        "rough_bal_f1": balanced_f1(tpr, tnr),
        "balanced_accuracy": None if tpr is None or tnr is None else (tpr + tnr) / 2,
        "first_error_step_accuracy": _mean([proof_first_error_step_accuracy(p, repeats) for p in proofs]),
        "first_error_step_accuracy_incorrect": _mean([proof_first_error_step_accuracy(p, repeats) for p in neg]),
        VALID_RATE: _mean([proof_valid_rate(p, repeats) for p in proofs]) if slots else None,
    }
    if any(t.meta_score is not None for t in trials):
        def meta(p: ProofTrials) -> float:
            denom = repeats or len(p.trials)
            return sum((t.meta_score or 0.0) if t.valid else 0.0 for t in p.trials) / denom if denom else 0.0

        mtpr = _mean([meta(p) for p in pos])
        mtnr = _mean([meta(p) for p in neg])
        out.update(meta_ver_tpr=mtpr, meta_ver_tnr=mtnr, meta_ver_bal_f1=balanced_f1(mtpr, mtnr),
                   meta_score_mean=_mean([meta(p) for p in proofs]),
                   meta_valid_rate=sum(t.valid and t.meta_valid for t in trials) / slots if slots else None)
    return out


def verifier_metrics(proofs: list[ProofTrials], repeats: int | None = None) -> dict:
    """VerifierBench metrics for all proofs and per domain split (`splits`: all/ugd/qe).

    `repeats` is R, the requested repeats per proof: the fixed denominator of every per-proof
    share (None: the trials each proof has). Meta keys (`meta_ver_tpr`, `meta_ver_tnr`,
    `meta_ver_bal_f1`, `meta_valid_rate`) appear when any trial carries a meta score; an
    invalid verifier output, a missing or failed meta evaluation counts 0.
    """
    splits = {"all": _verifier_split(proofs, repeats)}
    for dom in ("ugd", "qe"):
        sub = [p for p in proofs if p.domain == dom]
        if sub:
            splits[dom] = _verifier_split(sub, repeats)
    return {**splits["all"], "splits": splits}


@dataclass
class SubmissionPasses:
    """One submitted proof with its k pass outcomes (see proofcheck.decision)."""

    problem_id: str
    sample: int
    outcomes: list[str]
    rule: str = "unanimous"  # the decision that counts the proof correct (ProverBench's: unanimous)

    @property
    def correct(self) -> bool:
        from proofcheck.decision import decide

        return bool(self.outcomes) and decide(self.outcomes, self.rule) == "accept"


def _prover_split(problem_ids: list[str], by_problem: dict[str, list[SubmissionPasses]]) -> dict:
    scores, anys, n_valid, n_passes = [], [], 0, 0
    for pid in problem_ids:
        subs = by_problem.get(pid, [])
        scores.append(fmean([s.correct for s in subs]) if subs else 0.0)
        anys.append(float(any(s.correct for s in subs)))
        # passes cancelled by an early reject produced no answer: not part of the valid-output rate
        n_passes += sum(o != "cancelled" for s in subs for o in s.outcomes)
        n_valid += sum(o in ("accept", "reject") for s in subs for o in s.outcomes)
    return {
        "n_problems": len(problem_ids),
        "n_problems_without_submission": sum(1 for p in problem_ids if not by_problem.get(p)),
        "n_submissions": sum(len(by_problem.get(p, [])) for p in problem_ids),
        "pessimistic": _mean(scores),
        "pass_any_sample": _mean(anys),
        VALID_RATE: n_valid / n_passes if n_passes else None,
    }


def prover_metrics(problems: dict[str, tuple[str, str]], submissions: list[SubmissionPasses]) -> dict:
    """ProverBench pessimistic scores.

    `problems` maps problem_id -> (domain, subject). A problem without any submission scores
    0 (a missing proof is a failed proof) and is counted in `n_problems_without_submission`.
    Returns the `all` numbers at top level, `splits` (all/ugd/qe) and `subjects`.
    """
    unknown = sorted({s.problem_id for s in submissions} - problems.keys())
    if unknown:
        raise ValueError(f"submissions for unknown problem ids: {', '.join(unknown[:5])}")
    by_problem: dict[str, list[SubmissionPasses]] = defaultdict(list)
    for s in submissions:
        by_problem[s.problem_id].append(s)
    ids = sorted(problems)
    splits = {"all": _prover_split(ids, by_problem)}
    for dom in ("ugd", "qe"):
        sub = [p for p in ids if problems[p][0] == dom]
        if sub:
            splits[dom] = _prover_split(sub, by_problem)
    subjects = {
        subj: _prover_split([p for p in ids if problems[p][1] == subj], by_problem)
        for subj in sorted({v[1] for v in problems.values()})
    }
    return {**splits["all"], "splits": splits, "subjects": subjects}


def eval_keys(m: dict[str, Any]) -> dict[str, Any]:
    """`verifier_metrics`' keys under the held-out evaluation's names (`EVAL_RENAMES`).

    >>> eval_keys({"verifier_valid_rate": 0.5, "rough_tpr": 1.0})
    {'valid_rate': 0.5, 'rough_tpr': 1.0}
    """
    return {EVAL_RENAMES.get(k, k): v for k, v in m.items()}


def _sd(values: list[float]) -> float:
    """Sample standard deviation (n - 1); needs two values or more."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def standard_error(values: list[float]) -> float | None:
    """Standard error of the mean of `values` (sample SD / sqrt n); None for fewer than two.

    >>> standard_error([0.0, 1.0, 0.0, 1.0])
    0.28867513459481287
    >>> standard_error([1.0]) is None
    True
    """
    return _sd(values) / math.sqrt(len(values)) if len(values) >= 2 else None


def bal_f1_se(pos: list[float], neg: list[float], seed: int = 0, resamples: int = 1000) -> float | None:
    """Bootstrap standard error of Balanced F1, resampling proofs within each class (seeded:
    reproducible); `pos` / `neg` are per-proof shares of the correct / incorrect proofs. None when a
    class has fewer than two proofs."""
    if len(pos) < 2 or len(neg) < 2:
        return None
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        tpr = sum(rng.choices(pos, k=len(pos))) / len(pos)
        tnr = sum(rng.choices(neg, k=len(neg))) / len(neg)
        draws.append(balanced_f1(tpr, tnr) or 0.0)
    return _sd(draws)


def _eval_proofs(results: list[dict]) -> list[ProofTrials]:
    """The held-out evaluation's per-proof results (`grade_row`'s dicts) as `ProofTrials`."""
    return [ProofTrials(r["proof_id"], r["is_correct"], r["first_error_step"], r["domain"],
                        [Trial(t["valid"], t["first_error_step"]) for t in r["trials"]]) for r in results]


def eval_metrics(results: list[dict]) -> dict[str, Any]:
    """Reward mean and VerifierBench metrics (rough Balanced F1, first-error-step accuracy...) of a
    held-out k-pass evaluation, each with its standard error over proofs (`<name>_se`).

    `results`: one dict per proof (`proof_id`, `is_correct`, `first_error_step`, `domain`, `trials`
    with `valid`, `first_error_step` and the reward `score`), as `proofcheck.train.eval_generation.grade_row`
    writes them. The per-proof shares behind the standard errors are this module's per-proof rules
    (`proof_rough`, `proof_valid_rate`, ...) over the same proofs as the metrics: a proof without
    passes counts 0 in both (`verifier_metrics`' rule), so each error qualifies its own metric.
    """
    proofs = _eval_proofs(results)
    m = eval_keys(verifier_metrics(proofs))
    scores = [t["score"] for r in results for t in r["trials"] if t["score"] is not None]
    pos = [proof_rough(p) for p in proofs if p.is_correct]
    neg = [proof_rough(p) for p in proofs if not p.is_correct]
    proof_rewards = [sum(t["score"] for t in r["trials"] if t["score"] is not None) / len(r["trials"])
                     for r in results if r["trials"]]
    tpr_se, tnr_se = standard_error(pos), standard_error(neg)
    return {
        "reward_mean": sum(scores) / len(scores) if scores else None,
        **{k: m[k] for k in ("rough_bal_f1", "rough_tpr", "rough_tnr", "first_error_step_accuracy", EVAL_VALID_RATE)},
        "reward_mean_se": standard_error(proof_rewards),
        "rough_bal_f1_se": bal_f1_se(pos, neg),
        "rough_tpr_se": tpr_se,
        "rough_tnr_se": tnr_se,
        "first_error_step_accuracy_se": standard_error([proof_first_error_step_accuracy(p) for p in proofs]),
        f"{EVAL_VALID_RATE}_se": standard_error([proof_valid_rate(p) for p in proofs]),
        # TPR + TNR - 1 (Youden's J): 0 for a verifier that only moves its accept bias, whatever Balanced F1 does
        "discrimination": m["rough_tpr"] + m["rough_tnr"] - 1 if None not in (m["rough_tpr"], m["rough_tnr"]) else None,
        "discrimination_se": math.hypot(tpr_se, tnr_se) if tpr_se is not None and tnr_se is not None else None,
        "n_proofs": len(results),
        "n_passes": sum(len(r["trials"]) for r in results),
        "n_cut_passes": cut_passes(results),
        **kpass_with_se(proofs),
        "kpass_curve": kpass_curve(proofs),
    }


def cut_passes(results: list[dict]) -> int:
    """Passes that ended without a stop (`proofcheck.parsing.NON_STOP_FINISH`): in a held-out evaluation, cut at
    the token limit. A cut pass is invalid, never an accept; counted apart so a limit too short for the proofs
    shows. A trial without `invalid_reason` (results not from `grade_row`) is not counted.

    >>> cut_passes([{"trials": [{"invalid_reason": "non_stop_finish"}, {"invalid_reason": "missing_tag"}, {}]}])
    1
    """
    return sum(t.get("invalid_reason") == NON_STOP_FINISH for r in results for t in r["trials"])


def kpass_with_se(proofs: list[ProofTrials]) -> dict[str, float | None]:
    """The service's decision (accept only if all k passes accept) with all the evaluation's passes:
    Balanced F1, TPR, TNR and their standard errors over proofs."""
    pos = [proof_kpass_right(p) for p in proofs if p.is_correct]
    neg = [proof_kpass_right(p) for p in proofs if not p.is_correct]
    return {**kpass_metrics(proofs), "kpass_bal_f1_se": bal_f1_se(pos, neg), "kpass_tpr_se": standard_error(pos),
            "kpass_tnr_se": standard_error(neg)}


def kpass_curve(proofs: list[ProofTrials]) -> list[dict[str, Any]]:
    """The decision's Balanced F1 / TPR / TNR at every k from 1 to the passes each proof has (the first k)."""
    most = min((len(p.trials) for p in proofs), default=0)
    return [{"k": k, **kpass_metrics(proofs, k)} for k in range(1, most + 1)]


def paired_gain(before: list[dict], after: list[dict], seed: int = 0, resamples: int = 1000) -> dict[str, Any]:
    """The change of rough Balanced F1 and TNR from `before` to `after`, two evaluations of the same proofs
    (`eval_metrics`' per-proof results, same order), with the standard errors of the *paired* differences:
    a bootstrap that resamples proofs within each class and scores both evaluations on the same draw, so a
    proof that is hard before and after adds no noise to the change. Raises ValueError when the two lists
    do not hold the same proofs.

    >>> r = lambda pid, ok, steps: {"proof_id": pid, "is_correct": ok, "first_error_step": -1 if ok else 2,
    ...     "domain": "d", "trials": [{"valid": True, "first_error_step": s} for s in steps]}
    >>> b = [r("a", True, [-1, 2]), r("b", True, [-1, -1]), r("c", False, [-1, -1]), r("d", False, [2, -1])]
    >>> a = [r("a", True, [-1, -1]), r("b", True, [-1, -1]), r("c", False, [2, -1]), r("d", False, [2, 2])]
    >>> g = paired_gain(b, a)  # before: TPR .75, TNR .25, F1 .375; after: 1.0, .75, .857
    >>> round(g["rough_bal_f1_gain"], 3), g["rough_tnr_gain"], g["n_proofs"]
    (0.482, 0.5, 4)
    """
    ids = [r["proof_id"] for r in before]
    if ids != [r["proof_id"] for r in after]:
        raise ValueError("paired_gain: the two evaluations must verify the same proofs in the same order "
                         f"({len(before)} and {len(after)} proofs)")

    def shares(results: list[dict], correct: bool) -> list[float]:
        return [proof_rough(p) for p in _eval_proofs(results) if p.is_correct == correct]

    pos0, pos1, neg0, neg1 = shares(before, True), shares(after, True), shares(before, False), shares(after, False)

    def f1(pos: list[float], neg: list[float]) -> float:
        return balanced_f1(sum(pos) / len(pos), sum(neg) / len(neg)) or 0.0

    out: dict[str, Any] = {"n_proofs": len(ids), "rough_bal_f1_gain": None, "rough_bal_f1_gain_se": None,
                           "rough_tnr_gain": None, "rough_tnr_gain_se": None}
    if neg0:
        out["rough_tnr_gain"] = sum(neg1) / len(neg1) - sum(neg0) / len(neg0)
        out["rough_tnr_gain_se"] = standard_error([y - x for x, y in zip(neg0, neg1, strict=True)])
    if not pos0 or not neg0:
        return out
    out["rough_bal_f1_gain"] = f1(pos1, neg1) - f1(pos0, neg0)
    if len(pos0) >= 2 and len(neg0) >= 2:
        rng = random.Random(seed)
        diffs = []
        for _ in range(resamples):
            ip = rng.choices(range(len(pos0)), k=len(pos0))
            ineg = rng.choices(range(len(neg0)), k=len(neg0))
            diffs.append(f1([pos1[i] for i in ip], [neg1[i] for i in ineg])
                         - f1([pos0[i] for i in ip], [neg0[i] for i in ineg]))
        out["rough_bal_f1_gain_se"] = _sd(diffs)
    return out
