"""What every proof family returns (`Draft`) and how it becomes a task (`to_task`).

A family generator writes one short proof of one kind (valid, or one error kind of its own) and
knows its exact labels: the first wrong step and why it is wrong. `to_task` turns that into the
task shape `proofcheck.data.synth.make_task` writes (AMB annotated-proof fields, `origin:
synthetic`, a gold verification that parses to the labels) plus `family` and `kind`.

The gold verification checks each step up to the first error (`Step 1: 20-5=15 ok.`), then names
it, as the arithmetic chain does: a short chain of thought a small verifier can imitate.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from proofcheck.parsing import format_verdict

T = TypeVar("T")


@dataclass
class Draft:
    """One generated proof with its exact labels.

    `checks` holds one gold check line per step, up to and including the first wrong step (the
    line without the `Step i:` prefix); `error` is (first wrong step, reason) or None when valid.
    `rechecks` holds, for the same steps, (the step recomputed from the true state, what the step
    says): the recomputed gold rationale's parts (`proofcheck.data.rationale`).
    """

    problem: str
    steps: list[str]
    checks: list[str]
    error: tuple[int, str] | None
    reference_solution: str
    reference_answer: str
    subject: str
    rechecks: list[tuple[str, str]] | None = None


class Proof:
    """Builds a `Draft` step by step: `add(text, ok_check, wrong_reason=None, redo=..., says=...)` records a
    step and, until the first wrong step, its gold check line and its recheck (`redo`: the step recomputed from
    the true state; `says`: what the step states).

    >>> p = Proof()
    >>> p.add("2 + 2 = 4.", "2+2=4 ok.", redo="2 + 2 = 4", says="4")
    >>> p.add("So 4 + 1 = 6.", "4+1=5, not 6.", "4 + 1 = 5, not 6.", redo="4 + 1 = 5", says="6")
    >>> p.error, p.checks, p.rechecks
    ((1, '4 + 1 = 5, not 6.'), ['2+2=4 ok.', '4+1=5, not 6.'], [('2 + 2 = 4', '4'), ('4 + 1 = 5', '6')])
    """

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.checks: list[str] = []
        self.rechecks: list[tuple[str, str]] = []
        self.error: tuple[int, str] | None = None

    def add(self, text: str, check: str, wrong: str | None = None, *, redo: str, says: str) -> None:
        """Append step `text`; `check` is its gold check line; `wrong` (a reason) marks it wrong; `redo` and
        `says` are its recheck (the step recomputed from the true state, what the step states)."""
        if self.error is None:
            self.checks.append(check)
            self.rechecks.append((redo, says))
            if wrong is not None:
                self.error = (len(self.steps), wrong)
        self.steps.append(text)

    def draft(self, problem: str, reference_solution: str, reference_answer: str, subject: str) -> Draft:
        """The finished `Draft` of the steps added so far."""
        return Draft(problem, self.steps, self.checks, self.error, reference_solution, reference_answer, subject,
                     self.rechecks)


@dataclass(frozen=True)
class Variant:
    """How a draw departs from the proofs training sees (the default: it does not).

    `wordings`: "train" draws only the wordings training uses (each `pick`'s first tuple), "heldout" only
    the ones no training proof uses (its second), "any" either. `longer` > 0: proofs `longer` steps longer (chains and
    stories more steps; equations `longer` brackets to expand first, expansions `longer` more brackets each in
    a step of its own, bounds the constant added in `longer` + 1 moves; parity proofs `longer` steps more per
    case, up to 3: the residues (or, in parity words, the parities) of n^2, a n^2 and b n first). `scale`: number sizes multiplied
    (operands, constants, start values, intervals). With the default every draw is exactly the one made
    before variants existed (same `rng` calls, same choices).
    """

    wordings: str = "train"
    longer: int = 0
    scale: int = 1

    def __post_init__(self) -> None:
        if self.wordings not in ("train", "heldout", "any") or self.longer < 0 or self.scale < 1:
            raise ValueError(f"{self}: wordings is train, heldout or any; longer >= 0; scale >= 1")


TRAINING = Variant()
_VARIANT: ContextVar[Variant] = ContextVar("proofcheck_variant", default=TRAINING)
# every held-out wording tuple a family declares, by name (the split record lists them)
HELDOUT_WORDINGS: dict[str, tuple[Any, ...]] = {}


def variant() -> Variant:
    """The variant the current draw is made under (`drawing`)."""
    return _VARIANT.get()


@contextmanager
def drawing(v: Variant) -> Iterator[Variant]:
    """Draw every task in the block under variant `v`.

    >>> with drawing(Variant(scale=10)):
    ...     big(9)
    90
    """
    token = _VARIANT.set(v)
    try:
        yield v
    finally:
        _VARIANT.reset(token)


def big(n: int) -> int:
    """`n` scaled by the current variant (`n` itself in training's draws)."""
    return n * _VARIANT.get().scale


def heldout(name: str, options: tuple[Any, ...]) -> tuple[Any, ...]:
    """Declare `options` as the held-out wordings `name` (recorded in `HELDOUT_WORDINGS`); returns them."""
    HELDOUT_WORDINGS[name] = options
    return options


def reword(rng: random.Random, text: T, unseen: Sequence[T]) -> T:
    """Training's one wording `text`, or (held-out / any variants) one drawn with `unseen`: unlike `pick`,
    training's draw takes no random number, so a slot that had one wording keeps every draw as it was."""
    return text if _VARIANT.get().wordings == "train" else pick(rng, (text,), unseen)


def pick(rng: random.Random, options: Sequence[T], unseen: Sequence[T] = ()) -> T:
    """One wording, drawn with `rng`: from `options` (training's) or `unseen` (held out) as the current
    variant asks (`Variant.wordings`); in training's draws exactly `rng.choice(options)`."""
    mode = _VARIANT.get().wordings
    if mode == "heldout" and unseen:
        return rng.choice(unseen)
    return rng.choice(list(options) + list(unseen) if mode == "any" else options)


def signed(c: int, first: bool = False) -> str:
    """`c` as a term of a sum: `+ 3`, `- 3` (or `3`, `-3` when it is the first term)."""
    if first:
        return str(c)
    return f"+ {c}" if c >= 0 else f"- {-c}"


def linear(coef: int, var: str, const: int) -> str:
    """`coef*var + const` written as a person would: `3x + 5`, `x - 2`, `-x`, `4`."""
    parts = []
    if coef:
        parts.append({1: var, -1: f"-{var}"}.get(coef, f"{coef}{var}"))
    if const or not parts:
        parts.append(signed(const, first=not parts))
    return " ".join(parts)


def to_task(draft: Draft, family: str, kind: str, index: int = 0) -> dict[str, Any]:
    """The task dict (same shape as `synth.make_task`'s, plus `family` and `kind`).

    Raises ValueError when the draft's labels disagree with its kind (a generator bug).
    """
    if (kind == "valid") != (draft.error is None):
        raise ValueError(f"{family}:{kind}: the generator's error {draft.error} does not fit the kind")
    first = draft.error[0] if draft.error else -1
    errors = [draft.error] if draft.error else []
    checks = " ".join(f"Step {i}: {c}" for i, c in enumerate(draft.checks))
    verdict = "The proof is correct." if first < 0 else f"The first error is in step {first}."
    pid = f"synth-{index:05d}"
    return {
        "problem_id": pid,
        "problem": draft.problem,
        "reference_solution": draft.reference_solution,
        "reference_answer": draft.reference_answer,
        "domain": "ugd",
        "subject": draft.subject,
        "source_id": "proofcheck-synth",
        "proof_id": f"{pid}-p0",
        "steps": draft.steps,
        "policy": "synthetic",
        "annotation": {
            "first_fatal_error_step": first,
            "recoverable_error_steps": [-1],
            "reviewer_comment": f"Step {first}: {draft.error[1]}" if draft.error else "Every step is correct.",
            "first_error_reason": draft.error[1] if draft.error else "",
            "remark": f"synthetic:{family}:{kind}",
        },
        "is_correct": first < 0,
        "first_error_step": first,
        "origin": "synthetic",
        "family": family,
        "kind": kind,
        "gold_verification": format_verdict(f"{checks} {verdict}", errors, first),
        "step_checks": [list(r) for r in draft.rechecks or []],
    }
