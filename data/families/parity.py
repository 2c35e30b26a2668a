"""Parity and divisibility by cases: `n^2 + 3n + 4` is even for every integer n.

The problem claims that `f(n) = a n^2 + b n + c` is even / odd / divisible by 3 / leaves remainder
r mod 3 for every integer n (the claim is what the proof concludes). The proof splits into the
residues of n mod 2 or mod 3, shows f's residue in each case, and concludes. Case steps come in
three wordings: congruences (`n ≡ 2 (mod 3)`, then `f ≡ 2^2 + 3·2 + 4 = 14 ≡ 2 (mod 3)`), algebra
(`n = 3k + 2`, then `f = 9k^2 + 21k + 14 = 3(3k^2 + 7k + 4) + 2`) and parity words (`3n^2 is odd
and 3n is odd, so 3n^2 + 3n is even`). A longer proof (`Variant.longer`) gives, before each case, the
residues (in parity words the parities) of n^2, a n^2 and b n a step each; algebra has no longer form. Kinds:

- `valid`: f has the same residue in every case and every case is shown right;
- `arithmetic`: one case's value is miscomputed so that it agrees with the others;
- `wrong_rule`: (parity words) a parity rule is misapplied (`odd + odd is odd`) in one case,
  so that it agrees with the others;
- `case_missed`: the case that would disagree is left out, and the conclusion claims every n;
- `conclusion`: every case is shown right, but they disagree and the conclusion claims one
  residue for every n (an unjustified conclusion).

In every flawed proof exactly one case disagrees with the claim, so the claim is false.
"""

from __future__ import annotations

import random

from proofcheck.data.families._base import Draft, Proof, big, heldout, pick, reword, variant

KINDS = ("valid", "arithmetic", "wrong_rule", "case_missed", "conclusion")
_PROBLEMS = ("Prove that {f} {claim} for every integer n.", "Show that for every integer n, {f} {claim}.")
_INTRO = {2: ("Every integer n is either even or odd; we treat both cases.",
              "We distinguish two cases, according to the parity of n."),
          3: ("Every integer n leaves remainder 0, 1 or 2 when divided by 3; we treat each case.",
              "We distinguish three cases, according to n mod 3.")}
_CONCLUDE = ("Hence {f} {claim} for every integer n.", "So in every case {f} {claim}, as claimed.",
             "Therefore {f} {claim}, whatever the integer n.")
# wordings no training proof uses (`Variant(wordings="heldout")`)
_PROBLEMS_UNSEEN = heldout("parity.problem", ("Let n be any integer. Prove that {f} {claim}.",
                                              "Show that {f} {claim}, whatever the integer n."))
_INTRO_UNSEEN = {2: heldout("parity.intro2", ("An integer is even or odd, so two cases suffice.",)),
                 3: heldout("parity.intro3", ("The remainder of n on division by 3 is 0, 1 or 2, so three cases "
                                              "suffice.",))}
_CONCLUDE_UNSEEN = heldout("parity.conclusion", ("Thus {f} {claim} for all integers n.",
                                                 "In all cases, then, {f} {claim}."))
_HEAD_CONG_UNSEEN = heldout("parity.congruence", ("Take n ≡ {i} (mod {m}); then", "Suppose n ≡ {i} (mod {m}); then"))
_HEAD_ALG_UNSEEN = heldout("parity.algebra", ("Putting n = {n}, we find", "Substituting n = {n}, we find"))
_HEAD_WORDS_UNSEEN = heldout("parity.words", ("When n is {p}, ", "Suppose n is {p}; then "))


def poly(a: int, b: int, c: int, v: str = "n") -> str:
    """`a v^2 + b v + c` with zero terms dropped and unit coefficients written bare."""
    terms = []
    for coef, mono in ((a, f"{v}^2"), (b, v), (c, "")):
        if coef == 0 and (mono or terms):
            continue
        body = (mono if abs(coef) == 1 and mono else f"{abs(coef)}{mono}")
        terms.append(("-" if coef < 0 else "") + body if not terms else ("- " if coef < 0 else "+ ") + body)
    return " ".join(terms) if terms else "0"


def _claim(m: int, r: int) -> str:
    if m == 2:
        return "is even" if r == 0 else "is odd"
    return "is divisible by 3" if r == 0 else f"leaves remainder {r} when divided by 3"


def _params(rng: random.Random, kind: str, m: int) -> tuple[int, int, int, int, int]:
    """(a, b, c, r, e): f's coefficients, the claimed residue, the dissenting case (-1 if none)."""
    while True:
        # ranges wide enough for ~10^4 distinct problems: a, b, c in 1-3, 0-5, 0-9 held 780, so disjoint
        # training sets ran out of parity (5% of a 7200-proof warm-up where each other family had 19%)
        a, b, c = rng.randint(1, 9), rng.randint(0, big(15)), rng.randint(0, big(40))
        res = [(a * i * i + b * i + c) % m for i in range(m)]
        if kind == "valid":
            if len(set(res)) == 1:
                return a, b, c, res[0], -1
            continue
        for e in range(m):
            others = {res[i] for i in range(m) if i != e}
            if len(others) == 1 and res[e] not in others:
                if kind == "wrong_rule" and (e == 0 or b == 0):
                    continue  # the misapplied rule sits in the odd case, on the sum a n^2 + b n
                return a, b, c, others.pop(), e


def _subst(a: int, b: int, c: int, i: int) -> str:
    """f with n replaced by i: `2^2 + 3·2 + 4`."""
    terms = [f"{'' if a == 1 else f'{a}·'}{i}^2"]
    if b:
        terms.append(f"{'' if b == 1 else f'{b}·'}{i}")
    if c:
        terms.append(str(c))
    return " + ".join(terms)


Case = tuple[str, str, str | None, dict[str, str]]  # step, check, wrong reason or None, its recheck (redo, says)


def _case_congruence(rng: random.Random, f: str, a: int, b: int, c: int, m: int, i: int,
                     slip: int | None) -> Case:
    """(step, check, wrong reason or None, recheck); `slip` is a wrong value to show instead of f(i)."""
    val = a * i * i + b * i + c
    shown = val if slip is None else slip
    head = pick(rng, ("If n ≡ {i} (mod {m}), then", "For n ≡ {i} (mod {m}) we get"), _HEAD_CONG_UNSEEN).format(i=i, m=m)
    step = f"{head} {f} ≡ {_subst(a, b, c, i)} = {shown} ≡ {shown % m} (mod {m})."
    re_ = {"redo": f"n ≡ {i}: {_subst(a, b, c, i)} = {val} ≡ {val % m} (mod {m})", "says": f"{shown} ≡ {shown % m}"}
    if slip is None:
        return step, f"n≡{i}: {val} ≡ {val % m} ok.", None, re_
    return step, f"n≡{i}: {_subst(a, b, c, i)} = {val}, not {shown}.", \
        f"{_subst(a, b, c, i)} = {val}, not {shown}, so f ≡ {val % m} (mod {m}) in this case.", re_


def _case_algebra(rng: random.Random, f: str, a: int, b: int, c: int, m: int, i: int,
                  slip: int | None) -> Case:
    """As `_case_congruence`, writing n = mk + i and expanding in k."""
    A, B, C = a * m * m, 2 * a * m * i + b * m, a * i * i + b * i + c
    shown = C if slip is None else slip
    q = poly(A // m, B // m, shown // m, "k")
    tail = f"{m}({q})" + (f" + {shown % m}" if shown % m else "")
    n_is = f"{m}k" + (f" + {i}" if i else "")
    head = pick(rng, ("If n = {n}, then", "Write n = {n}; then"), _HEAD_ALG_UNSEEN).format(n=n_is)
    step = f"{head} {f} = {poly(A, B, shown, 'k')} = {tail}."
    re_ = {"redo": f"n = {n_is}: the constant term is {_subst(a, b, c, i)} = {C}, remainder {C % m}",
           "says": f"constant {shown}, remainder {shown % m}"}
    if slip is None:
        return step, f"n={n_is}: constant {C}, remainder {C % m} ok.", None, re_
    return step, f"n={n_is}: the constant term is {C}, not {shown}.", \
        f"with n = {n_is} the constant term is {_subst(a, b, c, i)} = {C}, not {shown}.", re_


def _residues(a: int, b: int, c: int, m: int, i: int) -> list[tuple[str, str, str, str]]:
    """A longer congruence proof's steps before case n ≡ i: the residue of n^2, then of a n^2, then of b n (or of
    the constant c when b is 0), each (step, check, redo, says); a `longer` proof takes the first `longer`."""
    sq, an2 = i * i % m, a * i * i % m
    last = (f"{poly(0, b, 0)} ≡ {b}·{i} = {b * i} ≡ {b * i % m}", f"{b}·{i} = {b * i} ≡ {b * i % m}",
            f"{b}·{i}={b * i} ≡ {b * i % m}") if b else (f"the constant {c} ≡ {c % m}", f"{c} ≡ {c % m}", f"{c} ≡ {c % m}")
    return [(f"For n ≡ {i} (mod {m}), n^2 ≡ {i}^2 = {i * i} ≡ {sq} (mod {m}).", f"n≡{i}: n^2 ≡ {sq} ok.",
             f"n ≡ {i}: {i}^2 = {i * i} ≡ {sq} (mod {m})", f"{i * i} ≡ {sq}"),
            (f"So {poly(a, 0, 0)} ≡ {a}·{sq} = {a * sq} ≡ {an2} (mod {m}).", f"{a}·{sq}={a * sq} ≡ {an2} ok.",
             f"{a}·{sq} = {a * sq} ≡ {an2} (mod {m})", f"{a * sq} ≡ {an2}"),
            (f"And {last[0]} (mod {m}).", f"{last[2]} ok.", f"{last[1]} (mod {m})", last[1])]


def _parity(x: int) -> str:
    return "even" if x % 2 == 0 else "odd"


def _words_residues(a: int, b: int, c: int, i: int) -> list[tuple[str, str, str, str]]:
    """As `_residues`, in parity words (m = 2): before the case n = i mod 2, the parity of n^2, then of a n^2, then
    of b n (or of the constant c when b is 0), each (step, check, redo, says)."""
    n, an2 = _parity(i), _parity(a * i)
    last = (f"{poly(0, b, 0)} is {_parity(b * i)}", f"{b} is {_parity(b)} and n is {n}, so {poly(0, b, 0)} is "
            f"{_parity(b * i)}") if b else (f"the constant {c} is {_parity(c)}", f"{c} is {_parity(c)}")
    return [(f"For n {n}, n^2 is {n}.", f"n {n}: n^2 is {n} ok.", f"n {n}: n·n is {n}", f"n^2 is {n}"),
            (f"So {poly(a, 0, 0)} is {an2}.", f"{poly(a, 0, 0)} is {an2} ok.",
             f"{a} is {_parity(a)} and n^2 is {n}, so {poly(a, 0, 0)} is {an2}", f"{poly(a, 0, 0)} is {an2}"),
            (f"And {last[0]}.", f"{last[0]} ok.", last[1], last[0])]


def _case_words(rng: random.Random, f: str, a: int, b: int, c: int, i: int,
                wrong: bool) -> Case:
    """Parity words for m = 2; `wrong` misapplies the rule for a sum (needs b > 0)."""
    t1, t2 = poly(a, 0, 0), poly(0, b, 0)
    p1, p2 = a * i % 2, b * i % 2
    s12 = (p1 + p2) % 2
    shown12 = 1 - s12 if wrong else s12
    parts = [f"{t1} is {_parity(p1)}"] + ([f"{t2} is {_parity(p2)}"] if b else [])
    text = reword(rng, "If n is {p}, then ", _HEAD_WORDS_UNSEEN).format(p=_parity(i)) + " and ".join(parts)
    if b:
        text += f", so {poly(a, b, 0)} is {_parity(shown12)}"
    if c:
        text += f"; adding {c}, {f} is {_parity(shown12 + c)}"
    text += "."
    redo = f"n {_parity(i)}: {t1} is {_parity(p1)}" + (f", {t2} is {_parity(p2)}, so {poly(a, b, 0)} is "
                                                       f"{_parity(s12)}" if b else "")
    re_ = {"redo": redo + (f"; adding {c}, {f} is {_parity(s12 + c)}" if c else ""),
           "says": f"{f} is {_parity(shown12 + c)}"}
    if not wrong:
        return text, f"n {_parity(i)}: f is {_parity(s12 + c)} ok.", None, re_
    rule = f"{_parity(p1)} + {_parity(p2)} is {_parity(s12)}"
    return text, f"{rule}, not {_parity(shown12)}.", \
        f"{rule}, so {poly(a, b, 0)} is {_parity(s12)}, not {_parity(shown12)}.", re_


def make(rng: random.Random, kind: str) -> Draft:
    """One proof of `kind` (see `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown parity kind {kind!r}; choose one of {', '.join(KINDS)}")
    wording = {"wrong_rule": "words", "arithmetic": pick(rng, ("congruence", "algebra"))}.get(
        kind, pick(rng, ("congruence", "algebra", "words")))
    if variant().longer and wording == "algebra":  # longer proofs: each term's residue first, then the case
        wording = "congruence"
    m = 2 if wording == "words" else rng.choice([2, 3])
    a, b, c, r, e = _params(rng, kind, m)
    f = poly(a, b, c)
    claim = _claim(m, r)
    p = Proof()
    if rng.random() < 0.5:
        p.add(pick(rng, _INTRO[m], _INTRO_UNSEEN[m]), "the cases cover every integer ok.",
              redo=f"n mod {m} is one of {', '.join(map(str, range(m)))}", says=f"{m} cases")
    for i in range(m):
        if i == e and kind == "case_missed":
            continue
        if wording == "words":
            for text, check, redo, says in _words_residues(a, b, c, i)[:variant().longer]:
                p.add(text, check, redo=redo, says=says)
            step, check, wrong, re_ = _case_words(rng, f, a, b, c, i, i == e and kind == "wrong_rule")
        else:
            if wording == "congruence" and variant().longer:  # a longer proof: the terms' residues first, a step each
                for text, check, redo, says in _residues(a, b, c, m, i)[:variant().longer]:
                    p.add(text, check, redo=redo, says=says)
            val = a * i * i + b * i + c
            slip = None
            if i == e and kind == "arithmetic":
                slip = rng.choice([val + d for d in range(-m - 2, m + 3) if d and (val + d) % m == r and val + d >= 0])
            case = _case_congruence if wording == "congruence" else _case_algebra
            step, check, wrong, re_ = case(rng, f, a, b, c, m, i, slip)
        p.add(step, check, wrong, **re_)
    text = pick(rng, _CONCLUDE, _CONCLUDE_UNSEEN).format(f=f, claim=claim)
    shown = [i for i in range(m) if not (i == e and kind == "case_missed")]
    re_ = {"redo": "the cases shown give remainders " + ", ".join(
        f"{(a * i * i + b * i + c) % m} (n ≡ {i})" for i in shown) + (f"; n ≡ {e} is not treated" if len(shown) < m
                                                                     else ""),
           "says": f"{f} {claim} for every integer n"}
    if kind == "case_missed":
        miss = f"n ≡ {e} (mod {m})" if m == 3 else f"n {_parity(e)}"
        p.add(text, f"the case {miss} is missing.", f"the case {miss} is never treated, and there "
              f"{f} {_claim(m, (a * e * e + b * e + c) % m)}.", **re_)
    elif kind == "conclusion":
        p.add(text, "the cases disagree.", f"the case n ≡ {e} (mod {m}) gives remainder "
              f"{(a * e * e + b * e + c) % m}, so the cases do not show that {f} {claim}.", **re_)
    else:
        p.add(text, "every case agrees ok.", **re_)
    ref = "; ".join(f"n ≡ {i} (mod {m}) gives {f} ≡ {(a * i * i + b * i + c) % m}" for i in range(m)) + "."
    return p.draft(_problem(rng, f, claim), ref, "true" if kind == "valid" else "false", "number theory")


def _problem(rng: random.Random, f: str, claim: str) -> str:
    return pick(rng, _PROBLEMS, _PROBLEMS_UNSEEN).format(f=f, claim=claim)
