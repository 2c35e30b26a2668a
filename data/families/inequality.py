"""Bounds on an interval: if 1 <= x <= 6, then -3x + 4 <= 1 (an upper or a lower bound).

The proof multiplies the bound on the unknown by the coefficient (reversing the inequality when
the coefficient is negative), adds the constant and concludes the bound the problem claims (the
claim is what the proof concludes). Written with symbols (`x ≤ 6`) or words (`x is at most 6`).
Kinds:

- `valid`: every inequality holds on the whole interval;
- `no_flip`: multiplying by a negative coefficient without reversing the inequality (a wrong
  rule: the numbers shown are computed right);
- `wrong_end`: a bound on the product taken from the wrong end of the interval (`x ≥ 1` and
  `3 > 0`, so `3x ≤ 3`): an inference that does not follow, carried forward;
- `arithmetic`: the constant is added wrongly, giving a bound that is too strong;
- `conclusion`: every step holds, but the conclusion claims a stronger bound than they give
  (a smaller upper / larger lower bound, or a strict inequality the endpoint violates).
"""

from __future__ import annotations

import random

from proofcheck.data.families._base import Draft, Proof, big, heldout, linear, pick, reword, variant

KINDS = ("valid", "no_flip", "wrong_end", "arithmetic", "conclusion")
VARS = ("x", "y", "t", "s")
_SYM = {"≤": "≤", "≥": "≥", "<": "<", ">": ">"}
_WORDS = {"≤": "is at most", "≥": "is at least", "<": "is less than", ">": "is greater than"}
_PROBLEMS = ("Let {lo} ≤ {v} ≤ {hi}. Prove that {claim}.", "Prove that {claim} whenever {lo} ≤ {v} ≤ {hi}.",
             "Suppose {v} is an integer between {lo} and {hi} inclusive. Show that {claim}.")
_CONCLUDE = ("Hence {claim}.", "Therefore {claim} for every {v} in the range.", "So {claim}, as required.")
# wordings no training proof uses (`Variant(wordings="heldout")`)
VARS_UNSEEN = heldout("inequality.unknown", ("u", "w"))
_PROBLEMS_UNSEEN = heldout("inequality.problem", ("Assume {lo} ≤ {v} ≤ {hi}. Show that {claim}.",
                                                  "For every {v} with {lo} ≤ {v} ≤ {hi}, prove that {claim}."))
_CONCLUDE_UNSEEN = heldout("inequality.conclusion", ("This proves {claim}.", "Consequently {claim} on the whole interval."))
_REVERSE_UNSEEN = heldout("inequality.reverse", (
    "Because {sign_text}, the inequality turns around when we multiply {since} by {p}: {result}.",))
_NO_FLIP_UNSEEN = heldout("inequality.multiply", ("Multiplying {since} by {p}, we obtain {result}.",))
_KEEP_UNSEEN = heldout("inequality.keep", ("Because {sign_text}, multiplying {since} by {p} keeps the direction: "
                                           "{result}.",))
_ADD_UNSEEN = heldout("inequality.add", ("Increasing both sides by {q}",))
_SUBTRACT_UNSEEN = heldout("inequality.subtract", ("Decreasing both sides by {q}",))


def _rel(words: bool, lhs: str, r: str, rhs: str) -> str:
    return f"{lhs} {_WORDS[r] if words else _SYM[r]} {rhs}"


def make(rng: random.Random, kind: str) -> Draft:
    """One proof of `kind` (see `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown inequality kind {kind!r}; choose one of {', '.join(KINDS)}")
    v, words = pick(rng, VARS, VARS_UNSEEN), rng.random() < 0.4
    lo = rng.randint(big(-4), big(3))
    hi = lo + rng.randint(2, big(7))
    upper = rng.random() < 0.5  # prove an upper bound (≤), else a lower bound (≥)
    want = "≤" if upper else "≥"
    other = "≥" if upper else "≤"
    mag = rng.randint(2, 6)
    p = -mag if kind == "no_flip" else mag if kind == "wrong_end" else rng.choice([-mag, mag])
    q = rng.choice([k for k in range(big(-12), big(12) + 1) if k])
    # the right end: where p*v is largest (upper bound) or smallest (lower bound)
    end_ = hi if (p > 0) == upper else lo
    bound_of = {hi: "≤", lo: "≥"}
    premise = end_
    if kind == "no_flip":
        premise = lo if end_ == hi else hi  # v ≤ hi read as p·v ≤ p·hi although p < 0
    if kind == "wrong_end":
        premise = lo if end_ == hi else hi  # v ≥ lo with p > 0 used for an upper bound
    prod = p * premise
    sign_text = f"{p} > 0" if p > 0 else f"{p} < 0"
    since = _rel(words, v, bound_of[premise], str(premise))
    result = _rel(words, f"{p}{v}", want, str(prod))
    gives = "shows that" if words else "gives"
    st = Proof()
    if p < 0 and (kind != "no_flip" or rng.random() < 0.5):  # a no_flip may say "reverses" and not do it
        text = reword(rng, "Since {since} and {sign_text}, multiplying by {p} reverses the inequality: {result}.",
                      _REVERSE_UNSEEN)
    elif kind == "no_flip":
        text = reword(rng, "Since {since}, multiplying by {p} {gives} {result}.", _NO_FLIP_UNSEEN)
    else:
        text = reword(rng, "Since {since} and {sign_text}, multiplying by {p} {gives} {result}.", _KEEP_UNSEEN)
    text = text.format(since=since, sign_text=sign_text, p=p, gives=gives, result=result)
    true_prod = p * end_
    re_ = {"redo": f"on [{lo}, {hi}] the {'largest' if upper else 'smallest'} {p}{v} is {p}·{end_} = {true_prod}: "
                   f"{p}{v} {want} {true_prod}", "says": f"{p}{v} {want} {prod}"}
    if prod == true_prod:
        st.add(text, f"{p}·{end_}={true_prod}, {want} ok.", **re_)
    elif kind == "no_flip":
        st.add(text, f"{p}<0 reverses it: {p}{v} {other} {prod}, not {want} {prod}.",
               f"multiplying by {p} < 0 reverses the inequality: {since} gives {p}{v} {other} {prod}, "
               f"not {want} {prod} (it fails at {v} = {end_}).", **re_)
    else:
        st.add(text, f"{v} {bound_of[premise]} {premise} does not give {result}: it fails at {v} = {end_}.",
               f"{v} {bound_of[premise]} {premise} does not give {p}{v} {want} {prod}; at {v} = {end_}, "
               f"{p}{v} = {true_prod}.", **re_)
    parts, slip_at = [q], 0
    if variant().longer:  # a longer proof: the constant added in `longer` + 1 moves, a slip in any
        parts = []
        for _ in range(variant().longer):
            rest = q - sum(parts)
            parts.append(rng.choice([k for k in range(-abs(rest) - 5, abs(rest) + 6) if k and k != rest]))
        parts.append(q - sum(parts))
        slip_at = rng.randrange(len(parts))
    shown, added = prod, 0
    for j, qj in enumerate(parts):
        before, added = shown, added + qj
        total = shown = before + qj
        if kind == "arithmetic" and j == slip_at:  # a slip that makes the bound too strong
            shown = total + (-1 if upper else 1) * rng.choice([1, 2, 3, 10])
        op = "+" if qj > 0 else "-"
        line = _rel(words, linear(p, v, added), want, f"{before} {op} {abs(qj)} = {shown}")
        verb = pick(rng, ("Adding {q} to both sides", "Adding {q}"), _ADD_UNSEEN) if qj > 0 else \
            pick(rng, ("Subtracting {q} from both sides", "Subtracting {q}"), _SUBTRACT_UNSEEN)
        text = f"{verb.format(q=abs(qj))}, {line}."
        re_ = {"redo": f"{before} {op} {abs(qj)} = {total}: {linear(p, v, added)} {want} {total}",
               "says": f"{linear(p, v, added)} {want} {shown}"}
        if shown == total:
            st.add(text, f"{before}{op}{abs(qj)}={total} ok.", **re_)
        else:
            st.add(text, f"{before}{op}{abs(qj)}={total}, not {shown}.",
                   f"{before} {op} {abs(qj)} = {total}, not {shown}.", **re_)
    rel, bound = want, shown
    if kind == "conclusion":
        if rng.random() < 0.5:
            rel = "<" if upper else ">"
        else:
            bound = shown + (-1 if upper else 1) * rng.choice([1, 2])
    claim = _rel(words, linear(p, v, q), rel, str(bound))
    text = pick(rng, _CONCLUDE, _CONCLUDE_UNSEEN).format(claim=claim, v=v)
    re_ = {"redo": f"the steps give {linear(p, v, q)} {want} {shown}", "says": claim}
    if (rel, bound) == (want, shown):
        st.add(text, "the bound follows ok.", **re_)
    else:
        st.add(text, f"the steps give {want} {shown}, not {rel} {bound}.",
               f"the steps give {linear(p, v, q)} {want} {shown}, not {rel} {bound} (equality at {v} = {end_}).",
               **re_)
    problem = pick(rng, _PROBLEMS, _PROBLEMS_UNSEEN).format(lo=lo, hi=hi, v=v, claim=claim)
    extreme = p * end_ + q
    ref = f"{linear(p, v, q)} is {'increasing' if p > 0 else 'decreasing'} in {v}, so its " \
          f"{'largest' if upper else 'smallest'} value on [{lo}, {hi}] is {extreme}, at {v} = {end_}."
    return st.draft(problem, ref, str(extreme), "inequalities")
