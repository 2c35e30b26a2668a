"""What a GRPO batch says about checking: accept rates by class, level mix, groups without signal.

The training reward alone cannot tell a verifier that learns to check from one that learns to
accept: both raise it. `batch_diagnostics` splits one reward batch (the completions TRL hands a
reward function, with their dataset columns) into the numbers that tell them apart, and the
meta-verifier reward logs them through TRL's `log_metric` under `checking/...`, so every trainer
log (the CPU recipes' run_summary.json, a GPU user's wandb or tensorboard) carries them per step:

- `accept_rate_valid` / `accept_rate_flawed`: the share of completions on expert-valid / flawed
  proofs that are valid accepts (an invalid output never accepts); `discrimination`, their
  difference: a verifier that only shifts its bias moves both rates together and keeps it at 0;
- `level/<LEVEL>` and `level/invalid`: the level mix, shares of all graded completions (grader
  failures are left out and counted apart as `grader_failure`);
- `reward_family/<family>`: the mean reward on each proof family (`data.families.family_of`).

`zero_spread_shares` gives the trainer's own numbers, logged by the GRPO trainer (`train/trainer.py`) on the
weighted total of every reward function, the reward GRPO's advantage is computed from:
- `zero_spread_groups`: the share of groups (completions of the same proof) whose total rewards are
  all equal: GRPO's advantage is zero there, so the group teaches nothing; `zero_spread_valid` /
  `zero_spread_flawed`, the same share among the groups of valid / flawed proofs: in a step where
  one class has no spread, only the other class's proofs move the policy. A group whose spread is
  all in the format reward has a signal, and is not counted.

Completion length and truncation are TRL's own (`completions/mean_length`,
`completions/clipped_ratio`), as is `frac_reward_zero_std` on the weighted total reward.

Example:
    >>> from proofcheck.reward.levels import Level
    >>> ok = GradeResult(level=Level.EXACT_MATCH, score=1.0, valid=True)
    >>> d = batch_diagnostics([Outcome(False, True, ok, 1.0)] * 2)
    >>> d["accept_rate_valid"], zero_spread_shares([1.0, 1.0, 0.5, 1.0], ["p", "p", "q", "q"], [False] * 4)
    (1.0, {'zero_spread_groups': 0.5, 'zero_spread_valid': 0.5})
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proofcheck.reward.levels import LEVEL_NAMES, GradeResult

PREFIX = "checking/"
LEVEL_KEYS: tuple[str, ...] = (*LEVEL_NAMES, "invalid")


@dataclass(frozen=True)
class Outcome:
    """One graded completion as the diagnostics see it.

    gold_flawed: the annotation marks an error; accepted: a valid output whose verdict accepts;
    family: the proof family, None for expert data; reward: what the reward function returned.
    """

    gold_flawed: bool
    accepted: bool
    result: GradeResult
    reward: float | None
    family: str | None = None


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def _zero_spread(rows: Sequence[tuple[str, float | None]]) -> float | None:
    groups: dict[str, list[float]] = defaultdict(list)
    for group, reward in rows:
        if reward is not None and reward == reward:  # None or NaN: no reward (a failed grade)
            groups[group].append(reward)
    sized = [g for g in groups.values() if len(g) >= 2]  # one completion has no spread to measure
    return _share(sum(max(g) - min(g) < 1e-9 for g in sized), len(sized))


def zero_spread_shares(totals: Sequence[float | None], groups: Sequence[str], flawed: Sequence[bool]
                       ) -> dict[str, float]:
    """The shares of GRPO groups without reward spread (module docstring), from each completion's total reward
    (None or NaN: no reward, left out), its group and whether its proof is flawed; a share the batch cannot
    give is left out."""
    rows = list(zip(groups, totals, strict=True))
    out = {"zero_spread_groups": _zero_spread(rows),
           "zero_spread_valid": _zero_spread([r for r, f in zip(rows, flawed, strict=True) if not f]),
           "zero_spread_flawed": _zero_spread([r for r, f in zip(rows, flawed, strict=True) if f])}
    return {k: float(v) for k, v in out.items() if v is not None}


def batch_diagnostics(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """The batch's checking numbers (keys as in the module docstring, without the prefix); a number
    that the batch cannot give (no valid proofs, no groups of two) is left out, not 0."""
    valid = [o for o in outcomes if not o.gold_flawed]
    flawed = [o for o in outcomes if o.gold_flawed]
    graded = [o for o in outcomes if o.result.grader_error is None]
    acc_valid = _share(sum(o.accepted for o in valid), len(valid))
    acc_flawed = _share(sum(o.accepted for o in flawed), len(flawed))
    out: dict[str, float | None] = {
        "accept_rate_valid": acc_valid,
        "accept_rate_flawed": acc_flawed,
        "discrimination": acc_valid - acc_flawed if valid and flawed else None,
        "grader_failure": float(len(outcomes) - len(graded)),
    }
    for key in LEVEL_KEYS:
        hits = sum((o.result.level is None and not o.result.valid) if key == "invalid"
                   else (o.result.level is not None and o.result.level.name == key) for o in graded)
        out[f"level/{key}"] = _share(hits, len(graded))
    by_family: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        if o.family is not None and o.reward is not None:
            by_family[o.family].append(o.reward)
    out.update({f"reward_family/{fam}": sum(v) / len(v) for fam, v in sorted(by_family.items())})
    return {k: float(v) for k, v in out.items() if v is not None}


def annotation_facts(annotation: Any) -> tuple[bool, str | None]:
    """(the expert marks an error, the proof family named in the annotation's remark or None) for one
    annotation as the reward receives it (JSON text, a dict or an `Annotation`)."""
    from proofcheck.data.families import family_of
    from proofcheck.reward.structural import annotation_flawed, coerce_annotation

    ann = coerce_annotation(annotation)
    return annotation_flawed(ann), family_of({"annotation": {"remark": ann.remark}})


def log_diagnostics(diagnostics: dict[str, float], log_metric: Any) -> None:
    """Hand each number to TRL's `log_metric` (averaged over the step's batches) under `checking/`."""
    if callable(log_metric):
        for key, value in diagnostics.items():
            log_metric(PREFIX + key, value)
