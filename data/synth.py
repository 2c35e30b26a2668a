"""Synthetic verification tasks with exact labels.

Each task is a chain of arithmetic definitions `x_{i} = x_{i-1} <op> c` and a claim about the
last value; the proof computes the chain step by step. Labels are exact by construction:
- valid: every step is right;
- fatal: step j computes a wrong value and every later step builds on it;
- recoverable: step j miscopies the previous value but states the right result (a slip that
  does not propagate), optionally followed by a fatal error later.

Example:
    >>> import random
    >>> t = make_task(random.Random(0), "fatal")
    >>> t["annotation"]["first_fatal_error_step"] >= 0
    True
"""

from __future__ import annotations

import random
from typing import Any

from proofcheck.parsing import format_verdict

KINDS = ("valid", "fatal", "recoverable", "recoverable_then_fatal")
_OPS = (("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b))


def _chain(rng: random.Random, length: int) -> tuple[int, list[tuple[str, int]]]:
    start = rng.randint(1, 20)
    ops = []
    for _ in range(length):
        sym = rng.choice("+-*")
        ops.append((sym, rng.randint(2, 4) if sym == "*" else rng.randint(1, 30)))
    return start, ops


def _apply(sym: str, a: int, b: int) -> int:
    return dict(_OPS)[sym](a, b) if sym in dict(_OPS) else 0


def make_task(rng: random.Random, kind: str, index: int = 0) -> dict[str, Any]:
    """One annotated synthetic proof of the given kind (see `KINDS`), AMB field names."""
    if kind not in KINDS:
        raise ValueError(f"unknown synthetic kind {kind!r}; choose one of {', '.join(KINDS)}")
    length = rng.randint(3, 6)
    start, ops = _chain(rng, length)
    true_vals = [start]
    for sym, c in ops:
        true_vals.append(_apply(sym, true_vals[-1], c))
    defs = ", ".join(f"x_{i + 1} = x_{i} {sym} {c}" for i, (sym, c) in enumerate(ops))
    problem = f"Let x_0 = {start} and define {defs}. Prove that x_{length} = {true_vals[-1]}."
    fatal = rng.randrange(length) if kind in ("fatal", "recoverable_then_fatal") else -1
    if kind == "recoverable_then_fatal":
        fatal = max(fatal, 1)  # leave room for a slip before the fatal step
    recoverable = rng.randrange(fatal if fatal >= 0 else length) if kind.startswith("recoverable") else -1
    steps, errors, prev = [], [], start
    for i, (sym, c) in enumerate(ops):
        value = _apply(sym, prev, c)
        shown_prev = prev
        if i == fatal:
            value += rng.choice([-3, -2, -1, 1, 2, 3])
            errors.append((i, f"{prev} {sym} {c} = {_apply(sym, prev, c)}, not {value}."))
        if i == recoverable:
            shown_prev = prev + rng.choice([-1, 1]) * rng.randint(1, 5)
            errors.append((i, f"x_{i} is {prev}, not {shown_prev}; the result {value} is still right."))
        steps.append(f"x_{i + 1} = x_{i} {sym} {c} = {shown_prev} {sym} {c} = {value}.")
        prev = value
    steps.append(f"Hence x_{length} = {prev}, as claimed.")
    rec_list = [recoverable] if recoverable >= 0 else [-1]
    is_correct = fatal == -1 and recoverable == -1
    first = min([s for s in (fatal, recoverable) if s >= 0], default=-1)
    comment = " ".join(f"Step {s}: {t}" for s, t in errors) if errors else "All computations are correct."
    pid = f"synth-{index:05d}"
    # short, regular gold answers: a tiny model can learn the format from a few hundred examples
    assessment = "Every computation is correct." if not errors else f"Step {first} contains an error."
    return {
        "problem_id": pid,
        "problem": problem,
        "reference_solution": "Compute the chain: " + ", ".join(f"x_{i} = {v}" for i, v in enumerate(true_vals)) + ".",
        "reference_answer": str(true_vals[-1]),
        "domain": "ugd",
        "subject": "arithmetic",
        "source_id": "proofcheck-synth",
        "proof_id": f"{pid}-p0",
        "steps": steps,
        "policy": "synthetic",
        "annotation": {
            "first_fatal_error_step": fatal,
            "recoverable_error_steps": rec_list,
            "reviewer_comment": comment,
            "first_error_reason": errors[0][1] if errors else "",
            "remark": f"synthetic:{kind}",
        },
        "is_correct": is_correct,
        "first_error_step": first,
        "origin": "synthetic",
        "gold_verification": format_verdict(assessment, sorted(errors), first),
    }


def make_tasks(n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS,
               weights: tuple[float, ...] | None = None) -> list[dict[str, Any]]:
    """`n` tasks, reproducible for a seed; kinds drawn with `weights` (default: half valid)."""
    rng = random.Random(seed)
    if weights is None:
        weights = tuple(0.5 if k == "valid" else 0.5 / (len(kinds) - 1) for k in kinds) if len(kinds) > 1 else (1.0,)
    return [make_task(rng, rng.choices(kinds, weights)[0], i) for i in range(n)]
