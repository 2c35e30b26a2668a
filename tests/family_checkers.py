"""Independent checkers of the synthetic proof families: each reads a proof back from its text and
says which step is the first wrong one, sharing nothing with the generator (`data/families/`).

Each checker reads the problem and the step texts back (regular expressions, sympy), decides
for each step whether what it states is true (an equation with the problem's solution set, an
expression equal to the one being expanded, a residue that is right, a count that is right, an
inequality that holds on the whole interval, a conclusion that the cases cover), and returns the
first step that is not: that must be the labelled first error. Each checker also reads the claim
back from the problem: it must be what the proof concludes, so comparing the conclusion with the
claim never gives the answer away. They read every wording, length and number size the families
draw (`proofcheck.data.families._base.Variant`), the held-out ones included.
"""

from __future__ import annotations

import re
from functools import cache

from sympy import Eq, Symbol, expand, solve
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication_application,
    parse_expr,
    standard_transformations,
)

from proofcheck.parsing import parse_verifier_output

_T = (*standard_transformations, implicit_multiplication_application, convert_xor)


@cache
def ex(text: str):
    """A sympy expression from proof notation (`3x`, `x^2`, `x²`, `2·3`, `(x + 1)(x - 2)`)."""
    return parse_expr(text.replace("·", "*").replace("²", "^2").strip(), transformations=_T)


def runs(text: str, v: str) -> list[str]:
    """Maximal stretches of formula in `text` (numbers, operators, the single-letter unknown `v`)."""
    pattern = rf"(?:(?<![A-Za-z]){v}(?![A-Za-z])|[0-9()+\-·*/^²= ])+"
    return [r.strip() for r in re.findall(pattern, text) if r.strip() and re.search(rf"[0-9{v}]", r)]


def first_false(truths: list[bool]) -> int:
    return next((i for i, ok in enumerate(truths) if not ok), -1)


# --- linear: every equation must have the problem's solution set --------------------------------

def check_linear(t: dict) -> int:
    v = next(c for c in "xytnzwp" if any("=" in r and c in r for r in runs(t["problem"], c)))
    sym = Symbol(v)
    eq_runs = [r for r in runs(t["problem"], v) if "=" in r]
    lhs, rhs = eq_runs[0].split("=")
    truth = solve(Eq(ex(lhs), ex(rhs)), sym)
    assert len(truth) == 1
    claim = eq_runs[1]

    def ok(step: str) -> bool:
        for r in (r for r in runs(step, v) if "=" in r):
            parts = [p for p in r.split("=") if p.strip()]
            with_v = [ex(p) for p in parts if re.search(rf"(?<![A-Za-z]){v}(?![A-Za-z])", p)]
            numbers = [ex(p) for p in parts if not re.search(rf"(?<![A-Za-z]){v}(?![A-Za-z])", p)]
            if len(with_v) == 2 and not numbers:  # `3x + 5 = x + 21`: the same solution
                if solve(Eq(*with_v), sym) != truth:
                    return False
                continue
            if any(n != numbers[0] for n in numbers) or len(with_v) != 1:
                return False
            if solve(Eq(with_v[0], numbers[0]), sym) != truth:
                return False
        return True

    assert [r for r in runs(t["steps"][-1], v) if "=" in r][-1].replace(" ", "") == claim.replace(" ", "")
    return first_false([ok(s) for s in t["steps"]])


# --- expand: every expression written must equal the one expanded -------------------------------

def check_expand(t: dict) -> int:
    v = next(c for c in "xytzuwp" if runs(t["problem"], c) and re.search(rf"\({c} ", t["problem"]))
    parts = [p for r in runs(t["problem"], v) for p in r.split("=") if p.strip() and p.strip() != v]
    E, claim = ex(parts[0]), parts[-1]

    def ok(step: str) -> bool:
        exprs = [p for r in runs(step, v) for p in r.split("=") if p.strip() and p.strip() != v]
        return bool(exprs) and all(expand(ex(p) - E) == 0 for p in exprs)

    last = [p for r in runs(t["steps"][-1], v) for p in r.split("=") if p.strip() and p.strip() != v]
    assert last[-1].replace(" ", "") == claim.replace(" ", "")
    return first_false([ok(s) for s in t["steps"]])


# --- parity: residues by cases, conclusion covered by the cases and true -------------------------

_CLAIM = re.compile(r"(?:that|integer n,|then,) (?!for )(.+?) (is even|is odd|is divisible by 3|leaves remainder (\d) when divided by 3)")
_CONG = re.compile(r"n ≡ (\d) \(mod (\d)\)(?:, then| we get|; then) (.+?) ≡ (.+?) = (\d+) ≡ (\d) \(mod (\d)\)\.$")
_ALG = re.compile(r"n = (\d)k(?: \+ (\d))?(?:, then|; then|, we find) (.+?) = (.+?) = (\d)\((.+?)\)(?: \+ (\d))?\.$")
_SQUARE = re.compile(r"n ≡ (\d) \(mod (\d)\), n\^2 ≡ (\d)\^2 = (\d+) ≡ (\d) \(mod (\d)\)\.$")
# a longer proof's other residues before a case: a n^2 from n^2's, b n, or the constant
_TERM = re.compile(r"^(?:So|And) (\d*)(n\^2|n) ≡ (\d+)·(\d+) = (\d+) ≡ (\d) \(mod (\d)\)\.$")
_CONST = re.compile(r"^And the constant (\d+) ≡ (\d) \(mod (\d)\)\.$")
# the same in parity words: n^2's parity, then a n^2's, b n's or the constant's
_W_SQUARE = re.compile(r"^For n (even|odd), n\^2 is (even|odd)\.$")
_W_TERM = re.compile(r"^(?:So|And) (\d*)(n\^2|n) is (even|odd)\.$")
_W_CONST = re.compile(r"^And the constant (\d+) is (even|odd)\.$")
_WORDS = re.compile(r"((?:\d*n(?:\^2)?|\d+)(?: \+ (?:\d*n(?:\^2)?|\d+))*) is (even|odd)")


def _parity_claim(text: str) -> tuple[str, int, int]:
    m = _CLAIM.search(text)
    kind = m.group(2)
    mod, res = {"is even": (2, 0), "is odd": (2, 1), "is divisible by 3": (3, 0)}.get(kind, (3, int(m.group(3) or 0)))
    return m.group(1), mod, res


def check_parity(t: dict) -> int:
    n, k = Symbol("n"), Symbol("k")
    f_text, mod, res = _parity_claim(t["problem"])
    f = ex(f_text)
    covered: dict[int, int] = {}
    truths = []
    case = None   # the case a longer proof's residue steps are about
    for step in t["steps"][:-1]:
        if s := _SQUARE.search(step):  # a longer proof's first step of a case: n^2's residue
            i, m, i2, sq, r, m2 = map(int, s.groups())
            ok = m == m2 == mod and i == i2 and i * i == sq and sq % m == r
            case = i
        elif s := _TERM.match(step):
            coef, term, x, y, xy, r, m = s.groups()
            x, y, xy, r, m = map(int, (x, y, xy, r, m))
            want = f.coeff(n, 2 if term == "n^2" else 1)
            base = case * case % m if term == "n^2" else case
            ok = m == mod and int(coef or 1) == want == x and y == base and x * y == xy and xy % m == r
        elif s := _CONST.match(step):
            c, r, m = map(int, s.groups())
            ok = m == mod and c == f.subs(n, 0) and c % m == r
        elif s := _W_SQUARE.match(step):
            case = int(s.group(1) == "odd")
            ok = mod == 2 and s.group(2) == s.group(1)
        elif s := _W_TERM.match(step):
            coef, term, p = s.groups()
            ok = mod == 2 and int(coef or 1) == f.coeff(n, 2 if term == "n^2" else 1) \
                and (int(coef or 1) * case) % 2 == (p == "odd")
        elif s := _W_CONST.match(step):
            c, p = s.groups()
            ok = mod == 2 and int(c) == f.subs(n, 0) and int(c) % 2 == (p == "odd")
        elif c := _CONG.search(step):
            i, m, lhs, sub, val, r, m2 = c.groups()
            i, m, val, r = int(i), int(m), int(val), int(r)
            ok = m == int(m2) == mod and ex(lhs) == f \
                and ex(sub) == f.subs(n, i) == val and val % m == r
            covered[i] = r
        elif a := _ALG.search(step):
            m, i, lhs, P, m2, Q, R = a.groups()
            m, i, R = int(m), int(i or 0), int(R or 0)
            poly = expand(f.subs(n, m * k + i))
            ok = m == int(m2) == mod and ex(lhs) == f and expand(ex(P)) == poly \
                and expand(m * ex(Q) + R) == poly and 0 <= R < m
            covered[i] = R
        elif w := re.match(r"(?:If|When|Suppose) n is (even|odd)(?:, then|,|; then) (.*)$", step):
            i = 0 if w.group(1) == "even" else 1
            claims = _WORDS.findall(w.group(2))
            ok = all({int(ex(e).subs(n, x)) % 2 for x in (i, i + 2, i + 4, i - 2)} == {p == "odd"}
                     for e, p in claims)
            stated = [p for e, p in claims if ex(e) == f]
            ok = ok and len(stated) == 1 and mod == 2
            covered[i] = int(stated[0] == "odd") if stated else -1
        else:  # the opening that names the cases: true
            assert re.search(r"even or odd|0, 1 or 2|distinguish", step), step
            ok = True
        truths.append(ok)
    concl = t["steps"][-1]
    for lead in ("So in every case", "Hence", "Therefore", "Thus", "In all cases, then,"):
        concl = concl.replace(lead, "that", 1) if concl.startswith(lead) else concl
    c_text, c_mod, c_res = _parity_claim(concl)
    holds = all(int(f.subs(n, x)) % mod == res for x in range(-10, 11))
    truths.append(holds and sorted(covered) == list(range(mod)) and set(covered.values()) == {res})
    assert (ex(c_text), c_mod, c_res) == (f, mod, res)  # the claim is what the proof concludes
    return first_false(truths)


# --- inequality: every inequality must hold on the whole interval -------------------------------

_STMT = re.compile(r"(?<![\w-])(-?\d*[a-z](?: [+-] \d+)?) (≤|≥|<|>) (-?\d+)(?: ([+-]) (\d+) = (-?\d+))?(?![\d])")
_REL = {"≤": lambda a, b: a <= b, "≥": lambda a, b: a >= b, "<": lambda a, b: a < b, ">": lambda a, b: a > b}


def _symbols(text: str) -> str:
    for w, s in (("is at most", "≤"), ("is at least", "≥"), ("is less than", "<"), ("is greater than", ">")):
        text = text.replace(f" {w} ", f" {s} ")
    return text


def check_inequality(t: dict) -> int:
    prob = _symbols(t["problem"])
    m = re.search(r"(-?\d+) ≤ ([a-z]) ≤ (-?\d+)", prob) or re.search(r"([a-z]) is an integer between (-?\d+) and (-?\d+)", prob)
    lo, v, hi = (int(m.group(1)), m.group(2), int(m.group(3))) if m.group(2).isalpha() and len(m.group(2)) == 1 \
        else (int(m.group(2)), m.group(1), int(m.group(3)))
    sym = Symbol(v)

    def ok(step: str) -> bool:
        stmts = _STMT.findall(_symbols(step))
        assert stmts, step
        for lhs, rel, a, op, b, total in stmts:
            bound = int(a)
            if op:
                if int(a) + (int(b) if op == "+" else -int(b)) != int(total):
                    return False
                bound = int(total)
            if not all(_REL[rel](ex(lhs).subs(sym, x), bound) for x in range(lo, hi + 1)):
                return False
        return True

    claim = [s for s in _STMT.findall(prob) if s[0] != v]
    assert _STMT.findall(_symbols(t["steps"][-1]))[-1] == claim[-1]
    return first_false([ok(s) for s in t["steps"]])


# --- prose: every count written must be the count after the events so far -----------------------

_ADDS = ("poured in", "wins", "get on", "are baked", "deposited", "returned", "brought in", "delivered")
_REMOVES = ("drained", "gives", "get off", "are sold", "withdrawn", "borrowed", "taken out", "shipped out")


def check_prose(t: dict) -> int:
    start = int(re.search(r"\d+", t["problem"]).group())
    events_text = re.search(r"(?:in order|in this order|one after another): (.*?)\. (?:Prove|Show)", t["problem"]).group(1).split("; ")
    deltas = []
    for e in events_text:
        sign = 1 if any(w in e for w in _ADDS) else -1 if any(w in e for w in _REMOVES) else 0
        assert sign, e
        deltas.append(sign * int(re.search(r"\d+", e).group()))
    truths, last = [], -1
    for step in t["steps"][:-1]:
        idx = next(j for j in range(last + 1, len(events_text))  # `5 books` is not read inside `15 books`
                   if re.search(rf"(?<!\d){re.escape(events_text[j].lower())}", step.lower()))
        last = idx
        truths.append(int(re.findall(r"\d+", step)[-1]) == start + sum(deltas[:idx + 1]))
    final = int(re.findall(r"\d+", t["steps"][-1])[-1])
    truths.append(final == start + sum(deltas))
    assert final == int(re.findall(r"\d+", t["problem"])[-1])
    return first_false(truths)


# --- chain: recompute x_i from the problem's definitions ----------------------------------------

def check_chain(t: dict) -> int:
    value = int(re.search(r"x_0 = (\d+)", t["problem"]).group(1))
    ops = re.findall(r"x_\d+ = x_\d+ ([+-]) (\d+)", t["problem"])
    truths = []
    for (op, c), step in zip(ops, t["steps"], strict=False):
        value += int(c) if op == "+" else -int(c)
        truths.append(int(re.findall(r"-?\d+", step.rstrip("."))[-1]) == value)
    shown = int(re.findall(r"-?\d+", t["steps"][-1].split(",")[0])[-1])
    truths.append(shown == value)
    assert shown == int(t["problem"].rsplit("=", 1)[1].strip(" ."))
    return first_false(truths)


CHECKERS = {"chain": check_chain, "prose": check_prose, "linear": check_linear, "expand": check_expand,
            "parity": check_parity, "inequality": check_inequality}


def label_problems(t: dict) -> list[str]:
    """What is wrong with a task's labels, judged by its family's checker (empty: every label is right):
    the first error step, validity, the annotation's copy of it, and the gold verification's verdict."""
    got = CHECKERS[t["family"]](t)
    out = []
    if got != t["first_error_step"]:
        out.append(f"first error: the checker finds step {got}, the label says {t['first_error_step']}")
    if t["is_correct"] != (got == -1):
        out.append(f"is_correct={t['is_correct']} but the checker finds {'no error' if got == -1 else f'step {got}'}")
    if t["annotation"]["first_fatal_error_step"] != t["first_error_step"]:
        out.append("the annotation's first_fatal_error_step differs from first_error_step")
    r = parse_verifier_output(t["gold_verification"], len(t["steps"]), "stop")
    if not (r.valid and r.verdict.first_error_step == got):
        out.append(f"the gold verification does not parse to step {got}")
    return out
