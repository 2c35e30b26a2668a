"""The gold rationale an SFT row teaches, in one of two forms (`RATIONALE_FORMS`), from a synthetic task.

- `checks` (the default, what `gold_verification` holds and every warm-up so far trained on): each step's
  check in its family's own shorthand, up to the first error (`Step 0: 38+8=46 ok. ... Step 2: grouping
  ok.`). Some lines recompute (chains, stories, equations), others only assert (`grouping ok.`, `the
  identity follows.`, `every case agrees ok.`).
- `recomputed`: the same form in every family, each step recomputed from the true state *before* its verdict,
  then what the step says, then `ok` or `wrong`:
  `Step 1: recompute 46 - 13 = 33; the step says 35: wrong.` A verifier that imitates it has to work out each
  step before it may judge it: the rationale is a check, not a template's verdict. The parts come from each
  family's generator (`step_checks`: [redo, says] per step up to the first error, `Proof.add`), so the
  recomputation is the generator's exact arithmetic.

Both end with the verdict sentence and the protocol's tags (`proofcheck.parsing.format_verdict`), so they
parse to the same labels and every reward reads them alike. The recomputed form is longer (about 1.6x the
characters of `checks` on the six families): budget the SFT sequence length for it.

For the SFT warm-up (train/sft.py builds its rows from `task["gold_verification"]`):
`with_rationale(tasks, "recomputed")` returns the tasks with `gold_verification` in that form, so
`sft_rows(with_rationale(tasks, form))` trains on it and nothing else changes.

Example:
    >>> import random
    >>> from proofcheck.data.families import make_family_task
    >>> t = make_family_task(random.Random(3), "prose", "arithmetic")
    >>> gold_rationale(t, "recomputed").split("</assessment>")[0]  # doctest: +ELLIPSIS
    '<assessment>Step 0: recompute ...: wrong. The first error is in step ...'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from proofcheck.parsing import format_verdict

RATIONALE_FORMS = ("checks", "recomputed")


def recomputed_lines(task: dict[str, Any]) -> list[str]:
    """One `Step i: recompute ...; the step says ...: ok|wrong.` line per step checked (up to the first error)."""
    checks = task.get("step_checks")
    if not checks:
        raise ValueError(f"task {task.get('proof_id')!r} has no step_checks (drawn before data.rationale existed, "
                         "or not synthetic): draw it again, or use the 'checks' form")
    first = int(task["first_error_step"])
    return [f"Step {i}: recompute {redo}; the step says {says}: {'wrong' if i == first else 'ok'}."
            for i, (redo, says) in enumerate(checks)]


def gold_rationale(task: dict[str, Any], form: str = "checks") -> str:
    """The task's gold verification in `form` (`RATIONALE_FORMS`); a ValueError names an unknown form."""
    if form not in RATIONALE_FORMS:
        raise ValueError(f"unknown rationale form {form!r}; choose one of {', '.join(RATIONALE_FORMS)}")
    if form == "checks":
        return str(task["gold_verification"])
    first = int(task["first_error_step"])
    verdict = "The proof is correct." if first < 0 else f"The first error is in step {first}."
    reason = (task.get("annotation") or {}).get("first_error_reason") or ""
    return format_verdict(" ".join([*recomputed_lines(task), verdict]), [(first, reason)] if first >= 0 else [],
                          first)


def with_rationale(tasks: list[dict[str, Any]], form: str = "checks") -> list[dict[str, Any]]:
    """Copies of `tasks` whose `gold_verification` is in `form` (the SFT rows' completion; `checks`: as drawn)."""
    return [{**t, "gold_verification": gold_rationale(t, form)} for t in tasks]


def longest_rationale(tasks: list[dict[str, Any]], count: Callable[[str], int]) -> int:
    """The longest gold verification of `tasks` in `count`'s units (a tokenizer's tokens), over every form a task
    can be written in (the recomputed form needs `step_checks`): what a pass must be allowed to write."""
    return max((count(gold_rationale(t, form)) for t in tasks for form in RATIONALE_FORMS
                if form == "checks" or t.get("step_checks")), default=0)


def fit_max_tokens(longest: int, floor: int | None, headroom: float = 0.15, step: int = 32) -> int:
    """Tokens per pass that hold the longest gold verification with `headroom` to spare, rounded up to `step`,
    and never below `floor` (the length the model was trained with). A pass cut at its limit is invalid, never an
    accept: below what the proofs need, a valid proof cannot be accepted, and the limit is measured, not the
    verifier."""
    if longest < 0 or headroom < 0 or step < 1:
        raise ValueError(f"fit_max_tokens needs longest >= 0, headroom >= 0, step >= 1 (got {longest}, {headroom}, "
                         f"{step})")
    need = -(-math.ceil(longest * (1 + headroom)) // step) * step
    return max(need, floor or 0)
