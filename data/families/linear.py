"""Solving a linear equation step by step: `3x + 5 = x + 21`, then `2x + 5 = 21`, `2x = 16`, `x = 8`.

The equation has one integer solution; the proof isolates the unknown one move at a time and
concludes its value, and the problem claims the value the proof concludes. Kinds:

- `valid`: every move is right;
- `sign_slip`: a constant is moved to the other side without changing its sign (`2x = 21 + 5`);
  the rest of the proof builds on it correctly (the numbers shown add up: only the rule is wrong);
- `divide_one_term`: both sides are divided by the coefficient but the constant on the left is
  left undivided (`2x + 6 = 16` -> `x + 6 = 8`), a wrong rule carried forward;
- `arithmetic`: a subtraction of constants is miscomputed, carried forward;
- `conclusion`: every move is right, the last step states another value.

Wordings vary the unknown's name, which side the constant sits on, the order of the moves
(divide first when the constant is divisible), and the phrasing of each move.
"""

from __future__ import annotations

import random

from proofcheck.data.families._base import Draft, Proof, big, heldout, linear, pick, signed, variant

KINDS = ("valid", "sign_slip", "divide_one_term", "arithmetic", "conclusion")
VARS = ("x", "y", "t", "n", "z")
_PROBLEMS = (
    "Prove that the solution of {eq} is {v} = {s}.",
    "Show that if {eq}, then {v} = {s}.",
    "Solve {eq} for {v} and prove that {v} = {s}.",
)
_SUB_VAR = (
    "Subtract {c} from both sides: {r}.",
    "Taking {c} away from each side gives {r}.",
    "Bringing the {v}-terms to the left, {r}.",
)
_MOVE = (  # the constant goes to the right; {r} is the new equation
    "{Op} {k} {prep} both sides: {r}.",
    "{Opping} {k} {prep} each side gives {r}.",
    "Move the {b} to the right-hand side: {r}.",
    "Moving the constant to the other side, {r}.",
)
_DIVIDE = ("Divide both sides by {A}: {r}.", "Dividing by {A}, {r}.", "Since {A} is not zero, {r}.")
_CONCLUDE = ("Hence {v} = {s}.", "Therefore the solution is {v} = {s}.", "So {v} = {s}, as claimed.")
# wordings no training proof uses (`Variant(wordings="heldout")`)
VARS_UNSEEN = heldout("linear.unknown", ("w", "p"))
_PROBLEMS_UNSEEN = heldout("linear.problem", ("Given {eq}, show that {v} = {s}.",
                                              "For which {v} does {eq} hold? Prove that the answer is {v} = {s}."))
_SUB_VAR_UNSEEN = heldout("linear.subtract", ("Removing {c} from each side leaves {r}.",
                                              "We subtract {c} on both sides and obtain {r}."))
_MOVE_UNSEEN = heldout("linear.move", ("Carrying the constant {b} to the right: {r}.",
                                       "We then {op} {k} {prep} each side, leaving {r}."))
_DIVIDE_UNSEEN = heldout("linear.divide", ("Both sides divided by {A} give {r}.", "Dividing through by {A} yields {r}."))
_CONCLUDE_UNSEEN = heldout("linear.conclusion", ("This proves that {v} = {s}.", "Thus {v} = {s} is the solution."))


def _equation(rng: random.Random, a: int, b: int, c: int, d: int, v: str) -> str:
    left = linear(a, v, b) if rng.random() < 0.7 or b == 0 else f"{b} + {linear(a, v, 0)}"
    return f"{left} = {linear(c, v, d)}"


def _params(rng: random.Random, kind: str) -> tuple[int, int, int, int, int]:
    """(a, b, c, d, s): the equation a*v + b = c*v + d with solution s, fit for `kind`."""
    while True:
        A = rng.randint(2, 7)
        c = rng.choice([0, 0, rng.randint(1, 4)])
        s = rng.randint(big(-3), big(12))
        b = rng.choice([k for k in range(big(-15), big(15) + 1) if k])
        if kind == "sign_slip" and (b <= 0 or (2 * b) % A):
            continue  # the slipped value must still divide, and the slip reads as "moving b"
        if (kind == "divide_one_term" or (kind in ("valid", "conclusion") and rng.random() < 0.25)) and b % A:
            continue  # a constant the coefficient divides: the proof may divide first
        if A + c < variant().longer:
            continue  # a longer proof splits a v into `longer` brackets, each with a coefficient >= 1
        return A + c, b, c, A * s + b, s


def _brackets(rng: random.Random, p: Proof, v: str, a: int, b: int, right: str, k: int) -> str:
    """A longer proof's start: `a v + b` written as `k` brackets and a constant, each bracket expanded in a step of
    its own (the last one also collects the left side); returns the equation the proof starts from."""
    cuts = sorted(rng.sample(range(1, a), k - 1))
    coefs = [hi - lo for lo, hi in zip([0, *cuts], [*cuts, a], strict=True)]
    brackets = [(aj, rng.choice([-1, 1]) * rng.randint(1, 5)) for aj in coefs]
    g = b - sum(aj * ej for aj, ej in brackets)

    def left(expanded: int) -> str:
        terms = [linear(aj, v, aj * ej) if j < expanded else f"{'' if aj == 1 else aj}({linear(1, v, ej)})"
                 for j, (aj, ej) in enumerate(brackets)]
        return " + ".join(terms) + (f" {signed(g)}" if g else "")

    for j, (aj, ej) in enumerate(brackets[:-1]):
        p.add(f"Expanding the {'next' if j else 'first'} bracket, {left(j + 1)} = {right}.", f"{aj}·{ej}={aj * ej} ok.",
              redo=f"{aj}·({ej}) = {aj * ej}: {left(j + 1)} = {right}", says=f"{left(j + 1)} = {right}")
    (aj, ej), products = brackets[-1], [aq * eq for aq, eq in brackets]
    consts = f"{products[0]}" + "".join(f"{x:+d}" for x in products[1:])
    sums = f"{'+'.join(str(aq) for aq in coefs)}={a}, " if k > 1 else ""
    p.add(f"Expanding the {'last ' if k > 1 else ''}bracket, {left(k)} = {right}, so {linear(a, v, b)} = {right}.",
          f"{aj}·{ej}={aj * ej}, {sums}{consts}{g:+d}={b} ok.",
          redo=f"{aj}·({ej}) = {aj * ej}, {sums.replace('=', ' = ')}{consts} {signed(g)} = {b}: "
               f"{linear(a, v, b)} = {right}", says=f"{linear(a, v, b)} = {right}")
    return f"{left(0)} = {right}"


def _move(rng: random.Random, b: int, r: str) -> str:
    """The step that moves the constant `b` from the left to the right: `r` is its equation."""
    words = ("Subtract", "Subtracting", "from") if b > 0 else ("Add", "Adding", "to")
    return pick(rng, _MOVE, _MOVE_UNSEEN).format(Op=words[0], Opping=words[1], prep=words[2], op=words[0].lower(),
                                                 k=abs(b), b=b, r=r)


def make(rng: random.Random, kind: str) -> Draft:
    """One proof of `kind` (see `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown linear kind {kind!r}; choose one of {', '.join(KINDS)}")
    v = pick(rng, VARS, VARS_UNSEEN)
    a, b, c, d, s = _params(rng, kind)
    A = a - c
    eq = _equation(rng, a, b, c, d, v)
    p = Proof()
    if variant().longer:  # a longer proof: `longer` brackets to expand first, `a1(v + e1) + a2(v + e2) + g = c v + d`
        eq = _brackets(rng, p, v, a, b, linear(c, v, d), variant().longer)
    if c:
        r = f"{linear(A, v, b)} = {d}"
        p.add(pick(rng, _SUB_VAR, _SUB_VAR_UNSEEN).format(c=linear(c, v, 0), r=r, v=v), f"{a}{v}-{c}{v}={A}{v} ok.",
              redo=f"{linear(a, v, 0)} - {linear(c, v, 0)} = {linear(A, v, 0)}: {r}", says=r)
    sign = "-" if b > 0 else "+"
    if kind == "divide_one_term" or (b % A == 0 and kind in ("valid", "conclusion")):
        q = d // A
        if kind == "divide_one_term":
            p.add(pick(rng, _DIVIDE, _DIVIDE_UNSEEN).format(A=A, r=f"{linear(1, v, b)} = {d} / {A} = {q}"),
                  f"{b}/{A}={b // A}, so {linear(1, v, b // A)} = {q}, not {linear(1, v, b)} = {q}.",
                  f"dividing by {A} divides every term: {linear(1, v, b // A)} = {q}, not {linear(1, v, b)} = {q}.",
                  redo=f"{d}/{A} = {q}, {b}/{A} = {b // A}: {linear(1, v, b // A)} = {q}", says=f"{linear(1, v, b)} = {q}")
            b_shown = b
        else:
            p.add(pick(rng, _DIVIDE, _DIVIDE_UNSEEN).format(A=A, r=f"{linear(1, v, b // A)} = {d} / {A} = {q}"),
                  f"{d}/{A}={q}, {b}/{A}={b // A} ok.",
                  redo=f"{d}/{A} = {q}, {b}/{A} = {b // A}: {linear(1, v, b // A)} = {q}",
                  says=f"{linear(1, v, b // A)} = {q}")
            b_shown = b // A
        value = q - b_shown
        p.add(_move(rng, b_shown, f"{v} = {q} {'-' if b_shown > 0 else '+'} {abs(b_shown)} = {value}"),
              f"{q}{'-' if b_shown > 0 else '+'}{abs(b_shown)}={value} ok.",
              redo=f"{q} {'-' if b_shown > 0 else '+'} {abs(b_shown)} = {value}: {v} = {value}", says=f"{v} = {value}")
    else:
        right = d - b
        if kind == "sign_slip":
            shown = d + b
            p.add(_move(rng, b, f"{A}{v} = {d} + {b} = {shown}"), f"{d}-{b}={right}, not {d}+{b}.",
                  f"moving {b} to the other side changes its sign: {A}{v} = {d} - {b} = {right}, not {shown}.",
                  redo=f"{d} - {b} = {right}: {A}{v} = {right}", says=f"{A}{v} = {shown}")
        else:
            shown = right + (rng.choice([-2, -1, 1, 2]) * A if kind == "arithmetic" else 0)
            calc = f"{d}{sign}{abs(b)}={right}"
            text = _move(rng, b, f"{A}{v} = {d} {sign} {abs(b)} = {shown}")
            re_ = {"redo": f"{d} {sign} {abs(b)} = {right}: {A}{v} = {right}", "says": f"{A}{v} = {shown}"}
            if shown == right:
                p.add(text, f"{calc} ok.", **re_)
            else:
                p.add(text, f"{calc}, not {shown}.", f"{d} {sign} {abs(b)} = {right}, not {shown}.", **re_)
        value = shown // A
        p.add(pick(rng, _DIVIDE, _DIVIDE_UNSEEN).format(A=A, r=f"{v} = {shown} / {A} = {value}"), f"{shown}/{A}={value} ok.",
              redo=f"{shown}/{A} = {value}: {v} = {value}", says=f"{v} = {value}")
    claimed = value + (rng.choice([-2, -1, 1, 2]) if kind == "conclusion" else 0)
    text = pick(rng, _CONCLUDE, _CONCLUDE_UNSEEN).format(v=v, s=claimed)
    if claimed == value:
        p.add(text, f"{v}={value} ok.", redo=f"the steps give {v} = {value}", says=f"{v} = {claimed}")
    else:
        p.add(text, f"the steps give {v}={value}, not {claimed}.", f"the steps give {v} = {value}, not {claimed}.",
              redo=f"the steps give {v} = {value}", says=f"{v} = {claimed}")
    problem = pick(rng, _PROBLEMS, _PROBLEMS_UNSEEN).format(eq=eq, v=v, s=claimed)
    ref = f"Collect the {v}-terms and the constants: {A}{v} = {d - b}, so {v} = {s}."
    return p.draft(problem, ref, str(s), "algebra")
