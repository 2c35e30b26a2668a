"""Synthetic verification tasks with exact labels: a curriculum a 135M model can learn on a CPU.

Each task defines a short chain `x_1 = x_0 + 5, x_2 = x_1 - 3, ...` over small numbers (single
digit operands, values 0..40) and claims the last value; the proof computes the chain one step
at a time and ends with a conclusion step. The claim is the value the *proof* reaches, so a
flawed proof proves a false claim and comparing the conclusion with the problem's claim never
gives the answer away: the verifier has to redo the arithmetic. Kinds (`KINDS`):

- `valid`: every step is right;
- `arithmetic`: one step writes a wrong result (off by 1..3 or by 10), later steps build on it;
- `miscopy`: one step starts from a wrong copy of the previous value, then computes correctly
  from the wrong number;
- `conclusion`: every computation is right, but the conclusion states another value.

Every error is fatal (the proof's result is wrong from that step on), so the first error step is
exact. The gold verification redoes each step with the true running value (`Step 1: 12-3=9 ok.`)
up to the first error (`..., not 10.`): a short, checkable chain of thought a small model can
imitate, and that GRPO's reward can sharpen. Step texts come in several wordings so a verifier
does not learn one template, and in more that training never draws (`Variant`, `data/heldout.py`).

This module's own proofs are the `chain` family. `proofcheck.data.families` holds the others
(arithmetic in prose, linear equations, expansions, parity by cases, bounds), each with its own
wordings and error kinds; `balanced_tasks` and `disjoint_splits` draw from them when asked
(`families=[...]`, `exclude=[...]`) and keep drawing chains exactly as before when not.

Example:
    >>> import random
    >>> t = make_task(random.Random(0), "miscopy")
    >>> t["is_correct"], t["first_error_step"] >= 0
    (False, True)
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from proofcheck.data.assembly import problem_key
from proofcheck.data.families._base import TRAINING, Variant, big, drawing, heldout, pick, reword, variant
from proofcheck.parsing import format_verdict

KINDS = ("valid", "arithmetic", "miscopy", "conclusion")
FLAWED_KINDS = KINDS[1:]
_STEP_WORDINGS = (
    "x_{i} = x_{p} {op} {c} = {a} {op} {c} = {v}.",
    "x_{i} = {a} {op} {c} = {v}.",
    "Then x_{i} = {a} {op} {c} = {v}.",
    "From x_{p} = {a} we get x_{i} = {a} {op} {c} = {v}.",
)
_CONCLUSIONS = ("Hence x_{n} = {v}, as claimed.", "Therefore x_{n} = {v}.", "So x_{n} = {v}, which proves the claim.")
_PROBLEM = "Let x_0 = {s} and {defs}. Prove that x_{n} = {c}."
# wordings no training proof uses (`Variant(wordings="heldout")`, data/heldout.py)
_STEP_UNSEEN = heldout("chain.step", ("x_{i} equals {a} {op} {c}, that is {v}.",
                                      "Next, x_{i} = {a} {op} {c}, which gives {v}.",
                                      "Applying the rule for x_{i}: {a} {op} {c} = {v}."))
_CONCLUSIONS_UNSEEN = heldout("chain.conclusion", ("This shows that x_{n} = {v}.", "We conclude x_{n} = {v}."))
_PROBLEMS_UNSEEN = heldout("chain.problem", ("Define x_0 = {s} and, in turn, {defs}. Show that x_{n} = {c}.",
                                            "Starting from x_0 = {s}, set {defs}. Prove that x_{n} = {c}."))


def _apply(op: str, a: int, c: int) -> int:
    return a + c if op == "+" else a - c


def _chain(rng: random.Random, length: int) -> tuple[int, list[tuple[str, int]]]:
    """A start value and `length` (op, constant) pairs whose true values stay in 0..40 (times the
    variant's scale; so are the start and the constants)."""
    start = rng.randint(2, big(9))
    ops, value = [], start
    for _ in range(length):
        c = rng.randint(1, big(9))
        op = rng.choice("+-") if value - c >= 0 and value + c <= big(40) else ("-" if value + c > big(40) else "+")
        ops.append((op, c))
        value = _apply(op, value, c)
    return start, ops


def _slip(rng: random.Random, value: int) -> int:
    """A plausible wrong result: off by 1..3, or by 10 (a carry slip); never negative."""
    wrong = value + rng.choice([-3, -2, -1, 1, 2, 3, 10, -10])
    return wrong if wrong >= 0 and wrong != value else value + rng.randint(1, 3)


def make_task(rng: random.Random, kind: str, index: int = 0) -> dict[str, Any]:
    """One annotated synthetic proof of the given kind (see `KINDS`), AMB field names."""
    if kind not in KINDS:
        raise ValueError(f"unknown synthetic kind {kind!r}; choose one of {', '.join(KINDS)}")
    length = rng.randint(2 + variant().longer, 4 + variant().longer)
    start, ops = _chain(rng, length)
    error_at = {"valid": -1, "conclusion": length}.get(kind, rng.randrange(length))
    steps: list[str] = []
    checks: list[str] = []
    rechecks: list[list[str]] = []  # (the step recomputed from the true value, what it says): data.rationale
    errors: list[tuple[int, str]] = []
    true_prev, shown_prev = start, start
    for i, (op, c) in enumerate(ops):
        true_val = _apply(op, true_prev, c)
        a = shown_prev
        if i == error_at and kind == "miscopy":
            a = _slip(rng, shown_prev)
        shown_val = _apply(op, a, c)
        if i == error_at and kind == "arithmetic":
            shown_val = _slip(rng, shown_val)
        wording = pick(rng, _STEP_WORDINGS, _STEP_UNSEEN)
        steps.append(wording.format(i=i + 1, p=i, op=op, c=c, a=a, v=shown_val))
        if not errors:  # the gold check stops at the first error
            ok = shown_val == true_val
            checks.append(f"Step {i}: {true_prev}{op}{c}={true_val} {'ok' if ok else f'not {shown_val}'}.")
            rechecks.append([f"x_{i + 1} = {true_prev} {op} {c} = {true_val}", f"x_{i + 1} = {a} {op} {c} = {shown_val}"])
            if not ok:
                why = f"x_{i} is {true_prev}, not {a}" if a != true_prev else f"{a} {op} {c} = {true_val}, not {shown_val}"
                errors.append((i, f"{why}."))
        true_prev, shown_prev = true_val, shown_val
    claimed = shown_prev + (rng.choice([-2, -1, 1, 2]) if kind == "conclusion" else 0)
    steps.append(pick(rng, _CONCLUSIONS, _CONCLUSIONS_UNSEEN).format(n=length, v=claimed))
    if not errors:
        ok = claimed == true_prev
        checks.append(f"Step {length}: x_{length}={true_prev} {'ok' if ok else f'not {claimed}'}.")
        rechecks.append([f"the steps give x_{length} = {true_prev}", f"x_{length} = {claimed}"])
        if not ok:
            errors.append((length, f"the steps give x_{length} = {true_prev}, not {claimed}."))
    first = errors[0][0] if errors else -1
    defs = ", ".join(f"x_{i + 1} = x_{i} {op} {c}" for i, (op, c) in enumerate(ops))
    problem = reword(rng, _PROBLEM, _PROBLEMS_UNSEEN).format(s=start, defs=defs, n=length, c=claimed)
    pid = f"synth-{index:05d}"
    verdict = "The proof is correct." if first < 0 else f"The first error is in step {first}."
    return {
        "problem_id": pid,
        "problem": problem,
        "reference_solution": "Compute the chain: " + ", ".join(
            f"x_{i} = {v}" for i, v in enumerate(_values(start, ops))) + ".",
        "reference_answer": str(_values(start, ops)[-1]),
        "domain": "ugd",
        "subject": "arithmetic",
        "source_id": "proofcheck-synth",
        "proof_id": f"{pid}-p0",
        "steps": steps,
        "policy": "synthetic",
        "annotation": {
            "first_fatal_error_step": first,
            "recoverable_error_steps": [-1],
            "reviewer_comment": f"Step {first}: {errors[0][1]}" if errors else "All computations are correct.",
            "first_error_reason": errors[0][1] if errors else "",
            "remark": f"synthetic:{kind}",
        },
        "is_correct": first < 0,
        "first_error_step": first,
        "origin": "synthetic",
        "family": "chain",
        "kind": kind,
        "gold_verification": format_verdict(" ".join(checks) + " " + verdict, errors, first),
        "step_checks": rechecks,
    }


def _values(start: int, ops: list[tuple[str, int]]) -> list[int]:
    vals = [start]
    for op, c in ops:
        vals.append(_apply(op, vals[-1], c))
    return vals


def make_tasks(n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS,
               weights: tuple[float, ...] | None = None) -> list[dict[str, Any]]:
    """`n` tasks, reproducible for a seed; kinds drawn with `weights` (default: half valid,
    the other half spread evenly over the flawed kinds present)."""
    rng = random.Random(seed)
    if weights is None:
        flawed = [k for k in kinds if k != "valid"]
        weights = tuple((0.5 if flawed else 1.0) if k == "valid" else (0.5 if "valid" in kinds else 1.0) / len(flawed)
                        for k in kinds)
    return [make_task(rng, rng.choices(kinds, weights)[0], i) for i in range(n)]


def balanced_tasks(n: int, seed: int = 0, families: Sequence[str] | str | None = None,
                   exclude: Sequence[str] = ()) -> list[dict[str, Any]]:
    """`n` tasks in pairs of one valid and one flawed proof (flawed kinds in turn, each pair in
    random order).

    Any run of an even number of consecutive tasks from the start of a pair is half valid, so
    training batches taken in order (TRL: `shuffle_dataset: false`) are balanced, which keeps
    GRPO from drifting to "accept everything" (accepting a valid proof earns the top level, so
    an unbalanced batch pays for never rejecting).

    Without `families` and `exclude` every task is an arithmetic chain (the `chain` family, this
    module's `make_task`). With them, the proofs come from the families chosen
    (`proofcheck.data.families`: a list of names or "all", minus `exclude`): pair j is of family
    j mod F, both proofs of a pair of the same family, the family's flawed kinds in turn.

    >>> [t["family"] for t in balanced_tasks(4, seed=1, families=["linear", "parity"])]
    ['linear', 'linear', 'parity', 'parity']
    """
    if families is None and not exclude:
        return _chain_pairs(n, seed)
    from proofcheck.data.families import FAMILIES, make_family_task, resolve

    chosen = [FAMILIES[f] for f in resolve(families, exclude)]
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        pair, fam = i // 2, chosen[(i // 2) % len(chosen)]
        if i % 2 == 0:
            valid_first = rng.random() < 0.5
        flawed = fam.flawed_kinds[(pair // len(chosen)) % len(fam.flawed_kinds)]
        tasks.append(make_family_task(rng, fam.name, "valid" if (i % 2 == 0) == valid_first else flawed, i))
    return tasks


def _chain_pairs(n: int, seed: int) -> list[dict[str, Any]]:
    """`balanced_tasks` of the arithmetic chain alone (the default; its draws never change)."""
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        pair_start = i - i % 2
        if i % 2 == 0:
            valid_first = rng.random() < 0.5
        kind = "valid" if (i % 2 == 0) == valid_first else FLAWED_KINDS[(pair_start // 2) % len(FLAWED_KINDS)]
        tasks.append(make_task(rng, kind, i))
    return tasks


def count_kinds(tasks: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """How many tasks of each family and kind (`{"linear": {"valid": 4, "sign_slip": 1, ...}}`), for
    a curriculum card; tasks without a `family` (older files) count as `chain`, kind from the remark.

    >>> count_kinds(balanced_tasks(4, seed=0, families=["parity"]))["parity"]["valid"]
    2
    """
    out: dict[str, dict[str, int]] = {}
    for t in tasks:
        kind = t.get("kind") or str(t["annotation"].get("remark", "")).rsplit(":", 1)[-1]
        fam = out.setdefault(t.get("family") or "chain", {})
        fam[kind] = fam.get(kind, 0) + 1
    return out


FamilyChoice = Sequence[str] | str | None


def _per_split(choice: FamilyChoice | Mapping[str, FamilyChoice], name: str) -> FamilyChoice:
    return choice.get(name) if isinstance(choice, Mapping) else choice


def disjoint_splits(sizes: dict[str, int], seed: int = 0,
                    families: FamilyChoice | Mapping[str, FamilyChoice] = None,
                    exclude: Sequence[str] | Mapping[str, Sequence[str]] = (),
                    variants: Mapping[str, Variant] | None = None,
                    avoid: Iterable[dict[str, Any]] = ()) -> dict[str, list[dict[str, Any]]]:
    """Balanced task sets (see `balanced_tasks`) with no problem in two sets, for train / dev / eval.

    Sets are drawn in the order given; a later set drops (and replaces) any valid/flawed pair with
    a problem an earlier set holds, so held-out numbers are never measured on a training problem
    and every set stays half valid (for even sizes). Proof ids are prefixed with the set's name so
    they are unique across sets.

    `families` and `exclude` choose the proof families (`proofcheck.data.families`), for every set
    (a list, or "all") or per set (a dict from set name to a list; sets not named get every
    family). Without either, every set is arithmetic chains, drawn as they always were. With
    them, a set's draws depend on the seed, its name, its size and families, and the sets before
    it, so put the held-out sets first to keep them the same whatever the training sets draw.
    Leave-one-family-out (train without `linear`, evaluate on everything; the eval set is the same
    as in the run with every family):

    >>> sets = disjoint_splits({"eval": 8, "dev": 4, "train": 10}, seed=0, families="all",
    ...                        exclude={"train": ["linear"]})
    >>> "linear" in {t["family"] for t in sets["train"]}, "linear" in {t["family"] for t in sets["eval"]}
    (False, True)

    `variants` draws the sets it names under a `Variant` (held-out wordings, longer proofs, larger numbers:
    `proofcheck.data.heldout`), each of their tasks marked with `variant` (the set's name); `avoid` holds tasks
    drawn elsewhere (another call's sets) whose problems no set here may repeat.
    """
    by_family = families is not None or bool(exclude)
    seen: set[str] = {problem_key(t["problem"]) for t in avoid}
    out: dict[str, list[dict[str, Any]]] = {}
    for k, (name, n) in enumerate(sizes.items()):
        kept: list[dict[str, Any]] = []
        round_ = 0
        with drawing((variants or {}).get(name, TRAINING)):
            while len(kept) < n:
                kept = _draw_round(name, n, k, round_, seed, by_family, families, exclude, seen, kept)
                round_ += 1
        for i, t in enumerate(kept):
            t["problem_id"] = f"synth-{name}-{i:05d}"
            t["proof_id"] = f"{t['problem_id']}-p0"
            if variants and name in variants:
                t["variant"] = name
        out[name] = kept
    return out


def _draw_round(name: str, n: int, k: int, round_: int, seed: int, by_family: bool,
                families: FamilyChoice | Mapping[str, FamilyChoice],
                exclude: Sequence[str] | Mapping[str, Sequence[str]], seen: set[str],
                kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One round of `disjoint_splits`' draws for set `name`: the pairs whose problems are new join `kept`."""
    if by_family:
        fam = _per_split(families, name)
        fresh = balanced_tasks(2 * n + 2, seed=seed * 1009 + zlib.crc32(name.encode()) % 100_003 + round_,
                               families="all" if fam is None else fam,
                               exclude=_per_split(exclude, name) or ())
    else:
        fresh = balanced_tasks(2 * n + 2, seed=seed * 1009 + k * 97 + round_)
    for pair in zip(fresh[::2], fresh[1::2], strict=True):
        keys = {problem_key(t["problem"]) for t in pair}
        if len(keys) == 2 and not keys & seen and len(kept) < n:
            seen |= keys
            kept += pair[: n - len(kept)]
    return kept
