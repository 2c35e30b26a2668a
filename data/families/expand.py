"""Expanding and simplifying an expression: `3(x + 2) - 2(x - 5) = 3x + 6 - 2x + 10 = x + 16`.

Three shapes: a sum of two multiplied brackets `p(x + q) + r(x + w)`, a product `(x + a)(x + b)`
and a square `(x + a)^2`. The proof expands, groups like terms, simplifies, and concludes the
identity the problem claims (the claim is what the proof concludes). Kinds:

- `valid`: every line is equal to the expression;
- `sign_slip`: a negative factor is distributed over a bracket with a negative term and the
  product's sign comes out wrong (`-2(x - 5) = -2x - 10`), carried forward;
- `wrong_rule`: a false expansion rule: only the first term of a bracket multiplied
  (`3(x + 2) = 3x + 2`), only first and last terms of a product (`(x + 3)(x - 2) = x^2 - 6`), or
  a square taken term by term (`(x + 3)^2 = x^2 + 9`); carried forward;
- `arithmetic`: like terms combined with a wrong coefficient or constant, carried forward;
- `conclusion`: every line is right, the concluding identity states another expression.
"""

from __future__ import annotations

import random

from proofcheck.data.families._base import Draft, Proof, big, heldout, linear, pick, signed, variant

KINDS = ("valid", "sign_slip", "wrong_rule", "arithmetic", "conclusion")
VARS = ("x", "y", "t", "z", "u")
_PROBLEMS = (
    "Prove that {E} = {F} for every real number {v}.",
    "Show that {E} simplifies to {F}.",
    "Expand {E} and prove that the result is {F}.",
)
_EXPAND = ("Expanding the brackets, {E} = {T}.", "By the distributive law, {E} = {T}.",
           "Multiplying out: {E} = {T}.")
_GROUP = ("Grouping like terms, this is {T}.", "Collecting like terms gives {T}.", "Rearranging: = {T}.")
_SIMPLIFY = ("Simplifying, this equals {T}.", "So the expression is {T}.", "This simplifies to {T}.")
_CONCLUDE = ("Hence {E} = {F}.", "Therefore {E} = {F} for every {v}.", "So {E} simplifies to {F}, as claimed.")
# wordings no training proof uses (`Variant(wordings="heldout")`)
VARS_UNSEEN = heldout("expand.unknown", ("w", "p"))
_PROBLEMS_UNSEEN = heldout("expand.problem", ("Verify the identity {E} = {F}.",
                                              "Show that, for all {v}, {E} equals {F}."))
_EXPAND_UNSEEN = heldout("expand.expand", ("Opening the brackets gives {E} = {T}.", "We distribute: {E} = {T}."))
_GROUP_UNSEEN = heldout("expand.group", ("Putting like terms together: {T}.", "Sorting the terms, we get {T}."))
_SIMPLIFY_UNSEEN = heldout("expand.simplify", ("Adding the coefficients, {T}.", "Combining, we are left with {T}."))
_CONCLUDE_UNSEEN = heldout("expand.conclusion", ("This establishes {E} = {F}.", "The identity {E} = {F} follows."))


def _sq(v: str, rng: random.Random) -> str:
    return f"{v}^2" if rng.random() < 0.7 else f"{v}²"


def _quadratic(v2: str, v: str, b: int, c: int) -> str:
    """`v2 + b v + c` with zero terms dropped (`x^2 + 6x + 9`, `x^2 - 4`)."""
    out = v2
    if b:
        out += " " + signed(b) + v if abs(b) != 1 else f" {'+' if b > 0 else '-'} {v}"
    return out + (f" {signed(c)}" if c else "")


def _brackets(rng: random.Random, kind: str, v: str, p: Proof) -> tuple[str, str, str]:
    """p(v + q) + r(v + w): returns (E, final expression, true simplified)."""
    pc = rng.randint(2, 6)
    r = rng.choice([-1, 1]) * rng.randint(2, 6)
    q = rng.choice([-1, 1]) * rng.randint(1, big(9))
    w = rng.choice([-1, 1]) * rng.randint(1, big(9))
    if kind == "sign_slip":
        r, w = -abs(r), -abs(w)
    E = f"{pc}({linear(1, v, q)}) {'+' if r > 0 else '-'} {abs(r)}({linear(1, v, w)})"
    # a longer proof: `longer` more brackets s(v + z), each expanded in a step of its own (none in training's draws)
    extra = [(rng.randint(2, 6), rng.choice([-1, 1]) * rng.randint(1, big(9))) for _ in range(variant().longer)]
    more = "".join(f" + {s}({linear(1, v, z)})" for s, z in extra)
    E += more
    t1, t2 = pc * q, r * w
    true_a, true_b = pc + r + sum(s for s, _ in extra), t1 + t2 + sum(s * z for s, z in extra)
    if kind == "sign_slip":
        t2 = -t2
    if kind == "wrong_rule":
        t1 = q
    T0 = f"{pc}{v} {signed(t1)} {signed(r)}{v} {signed(t2)}"
    how = pick(rng, _EXPAND, _EXPAND_UNSEEN).format(E=E, T=T0 + more)
    re_ = {"redo": f"{pc}·({q}) = {pc * q}, ({r})·({w}) = {r * w}: {pc}{v} {signed(pc * q)} {signed(r)}{v} "
                   f"{signed(r * w)}{more}", "says": T0 + more}
    if kind == "sign_slip":
        p.add(how, f"({r})·({w})={r * w}, not {t2}.",
              f"({r})·({w}) = {r * w}, not {t2}: the sign of the product is wrong.", **re_)
    elif kind == "wrong_rule":
        p.add(how, f"{pc}·{q}={pc * q}, not {q}.",
              f"{pc} multiplies every term of the bracket: {pc}·{q} = {pc * q}, not {q}.", **re_)
    else:
        p.add(how, f"{pc}·({q})={pc * q}, ({r})·({w})={r * w} ok.", **re_)
    for j, (s, z) in enumerate(extra):
        T0 += f" {signed(s)}{v} {signed(s * z)}"
        rest = "".join(f" + {s_}({linear(1, v, z_)})" for s_, z_ in extra[j + 1:])
        p.add(f"Expanding the {'last' if j == len(extra) - 1 else 'next'} bracket, this is {T0}{rest}.",
              f"{s}·({z})={s * z} ok.", redo=f"{s}·({z}) = {s * z}: {s}({linear(1, v, z)}) = {linear(s, v, s * z)}",
              says=T0 + rest)
    cs, ts = [pc, r] + [s for s, _ in extra], [t1, t2] + [s * z for s, z in extra]
    T1 = f"({pc} {' '.join(signed(c) for c in cs[1:])}){v} + ({t1} {' '.join(signed(t) for t in ts[1:])})"
    p.add(pick(rng, _GROUP, _GROUP_UNSEEN).format(T=T1), "grouping ok.", redo=f"the like terms of {T0}: {T1}",
          says=T1)
    a_, b_ = sum(cs), sum(ts)
    if kind == "arithmetic":
        if rng.random() < 0.5:
            a_ += rng.choice([-2, -1, 1, 2])
        else:
            b_ += rng.choice([-2, -1, 1, 2, 10, -10])
    T2 = linear(a_, v, b_)
    ra, rb = f"{pc}" + "".join(f"{c:+d}" for c in cs[1:]), f"{t1}" + "".join(f"{t:+d}" for t in ts[1:])
    sa, sb = sum(cs), sum(ts)
    re_ = {"redo": f"{ra} = {sa}, {rb} = {sb}: {linear(sa, v, sb)}", "says": T2}
    if (a_, b_) == (sa, sb):
        p.add(pick(rng, _SIMPLIFY, _SIMPLIFY_UNSEEN).format(T=T2), f"{ra}={sa}, {rb}={sb} ok.", **re_)
    else:
        p.add(pick(rng, _SIMPLIFY, _SIMPLIFY_UNSEEN).format(T=T2), f"{ra}={sa}, {rb}={sb}, not {T2}.",
              f"{T1} = {linear(sa, v, sb)}, not {T2}.", **re_)
    return E, T2, linear(true_a, v, true_b)


def _product(rng: random.Random, kind: str, v: str, p: Proof) -> tuple[str, str, str]:
    """(v + a)(v + b) or (v + a)^2: returns (E, final expression, true simplified)."""
    v2 = _sq(v, rng)
    a = rng.choice([-1, 1]) * rng.randint(1, big(9))
    square = rng.random() < 0.4
    b = a if square else rng.choice([k for k in range(big(-9), big(9) + 1) if k not in (0, -a)])
    E = f"({linear(1, v, a)})^2" if square else f"({linear(1, v, a)})({linear(1, v, b)})"
    true = _quadratic(v2, v, a + b, a * b)
    if kind == "wrong_rule":
        T = f"{v2} {signed(a * b)}"
        rule = f"({linear(1, v, a)})^2 = {true}" if square else \
            f"every term multiplies every term, giving {v2} {signed(b)}{v} {signed(a)}{v} {signed(a * b)}"
        p.add(pick(rng, _EXPAND, _EXPAND_UNSEEN).format(E=E, T=T), f"the cross terms {a + b}{v} are missing.",
              f"{rule}; the terms in {v} are missing.",
              redo=f"{E} = {v2} {signed(b)}{v} {signed(a)}{v} {signed(a * b)}", says=T)
        p.add(pick(rng, _SIMPLIFY, _SIMPLIFY_UNSEEN).format(T=T), "ok given step 0.", redo=T, says=T)
        return E, T, true
    T0 = f"{v2} {signed(b)}{v} {signed(a)}{v} {signed(a * b)}"
    p.add(pick(rng, _EXPAND, _EXPAND_UNSEEN).format(E=E, T=T0), f"({a})·({b})={a * b} ok.",
          redo=f"({a})·({b}) = {a * b}: {T0}", says=T0)
    cb, cc = a + b, a * b
    if kind == "arithmetic":
        if rng.random() < 0.5 or a + b == 0:
            cc += rng.choice([-2, -1, 1, 2])
        else:
            cb = -(a + b) if rng.random() < 0.5 else cb + rng.choice([-1, 1])
    T1 = _quadratic(v2, v, cb, cc)
    re_ = {"redo": f"{b} {signed(a)} = {a + b}, ({a})·({b}) = {a * b}: {true}", "says": T1}
    if (cb, cc) == (a + b, a * b):
        p.add(pick(rng, _SIMPLIFY, _SIMPLIFY_UNSEEN).format(T=T1), f"{b}{a:+d}={a + b} ok.", **re_)
    else:
        p.add(pick(rng, _SIMPLIFY, _SIMPLIFY_UNSEEN).format(T=T1), f"{b}{a:+d}={a + b}, {a}·{b}={a * b}, so {true}, not {T1}.",
              f"{signed(b, True)}{v} {signed(a)}{v} {signed(a * b)} gives {true}, not {T1}.", **re_)
    return E, T1, true


def make(rng: random.Random, kind: str) -> Draft:
    """One proof of `kind` (see `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown expand kind {kind!r}; choose one of {', '.join(KINDS)}")
    v = pick(rng, VARS, VARS_UNSEEN)
    p = Proof()
    if kind == "sign_slip" or variant().longer or rng.random() < 0.5:  # longer: three brackets
        E, final, true = _brackets(rng, kind, v, p)
    else:
        E, final, true = _product(rng, kind, v, p)
    claimed = final
    if kind == "conclusion":
        while claimed == final:
            claimed = _perturb(rng, final, v)
    text = pick(rng, _CONCLUDE, _CONCLUDE_UNSEEN).format(E=E, F=claimed, v=v)
    if claimed == final:
        p.add(text, "the identity follows.", redo=f"the steps give {final}", says=claimed)
    else:
        p.add(text, f"the steps give {final}, not {claimed}.", f"the steps give {final}, not {claimed}.",
              redo=f"the steps give {final}", says=claimed)
    problem = pick(rng, _PROBLEMS, _PROBLEMS_UNSEEN).format(E=E, F=claimed, v=v)
    return p.draft(problem, f"Expand and collect like terms: {E} = {true}.", true, "algebra")


def _perturb(rng: random.Random, expr: str, v: str) -> str:
    """`expr` with one number changed by 1 or 2 (or a sign flipped): a near-miss conclusion."""
    import re

    nums = list(re.finditer(r"\d+", expr.replace("^2", "^@")))
    if not nums:
        return expr + " + 1"
    m = rng.choice(nums)
    new = int(m.group()) + rng.choice([1, 2])
    return expr[:m.start()] + str(new) + expr[m.end():]
