"""Every proof family's labels, recomputed by a checker that shares nothing with its generator.

Each checker reads the problem and the step texts back (regular expressions, sympy), decides
for each step whether what it states is true (an equation with the problem's solution set, an
expression equal to the one being expanded, a residue that is right, a count that is right, an
inequality that holds on the whole interval, a conclusion that the cases cover), and returns the
first step that is not: that must be the labelled first error, for every kind and many seeds.
Each checker also reads the claim back from the problem: it must be what the proof concludes,
so comparing the conclusion with the claim never gives the answer away.
"""

from __future__ import annotations

import json
import random
import re
from functools import cache

import pytest
from sympy import Eq, Symbol, expand, solve
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication_application,
    parse_expr,
    standard_transformations,
)

from proofcheck.data.families import ALL, FAMILIES, family_of, make_family_task, resolve
from proofcheck.data.synth import balanced_tasks, disjoint_splits
from proofcheck.parsing import parse_verifier_output
from proofcheck.schemas import AnnotatedProof

SEEDS = range(30)
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
    v = next(c for c in "xytnz" if any("=" in r and c in r for r in runs(t["problem"], c)))
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
            if any(n != numbers[0] for n in numbers) or len(with_v) != 1:
                return False
            if solve(Eq(with_v[0], numbers[0]), sym) != truth:
                return False
        return True

    assert [r for r in runs(t["steps"][-1], v) if "=" in r][-1].replace(" ", "") == claim.replace(" ", "")
    return first_false([ok(s) for s in t["steps"]])


# --- expand: every expression written must equal the one expanded -------------------------------

def check_expand(t: dict) -> int:
    v = next(c for c in "xytzu" if runs(t["problem"], c) and re.search(rf"\({c} ", t["problem"]))
    parts = [p for r in runs(t["problem"], v) for p in r.split("=") if p.strip() and p.strip() != v]
    E, claim = ex(parts[0]), parts[-1]

    def ok(step: str) -> bool:
        exprs = [p for r in runs(step, v) for p in r.split("=") if p.strip() and p.strip() != v]
        return bool(exprs) and all(expand(ex(p) - E) == 0 for p in exprs)

    last = [p for r in runs(t["steps"][-1], v) for p in r.split("=") if p.strip() and p.strip() != v]
    assert last[-1].replace(" ", "") == claim.replace(" ", "")
    return first_false([ok(s) for s in t["steps"]])


# --- parity: residues by cases, conclusion covered by the cases and true -------------------------

_CLAIM = re.compile(r"(?:that|integer n,) (?!for )(.+?) (is even|is odd|is divisible by 3|leaves remainder (\d) when divided by 3)")
_CONG = re.compile(r"n ≡ (\d) \(mod (\d)\)(?:, then| we get) (.+?) ≡ (.+?) = (\d+) ≡ (\d) \(mod (\d)\)\.$")
_ALG = re.compile(r"n = (\d)k(?: \+ (\d))?(?:, then|; then) (.+?) = (.+?) = (\d)\((.+?)\)(?: \+ (\d))?\.$")
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
    for step in t["steps"][:-1]:
        if c := _CONG.search(step):
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
        elif w := re.match(r"If n is (even|odd), then (.*)$", step):
            i = 0 if w.group(1) == "even" else 1
            claims = _WORDS.findall(w.group(2))
            ok = all({int(ex(e).subs(n, x)) % 2 for x in (i, i + 2, i + 4, i - 2)} == {p == "odd"}
                     for e, p in claims)
            stated = [p for e, p in claims if ex(e) == f]
            ok = ok and len(stated) == 1 and mod == 2
            covered[i] = int(stated[0] == "odd") if stated else -1
        else:  # the opening that names the cases: true
            assert re.search(r"either even or odd|remainder 0, 1 or 2|distinguish", step), step
            ok = True
        truths.append(ok)
    concl = t["steps"][-1]
    c_text, c_mod, c_res = _parity_claim(concl.replace("So in every case", "that").replace("Hence", "that")
                                         .replace("Therefore", "that"))
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

_ADDS = ("poured in", "wins", "get on", "are baked", "deposited")
_REMOVES = ("drained", "gives", "get off", "are sold", "withdrawn")


def check_prose(t: dict) -> int:
    start = int(re.search(r"\d+", t["problem"]).group())
    events_text = re.search(r"(?:in order|in this order): (.*?)\. (?:Prove|Show)", t["problem"]).group(1).split("; ")
    deltas = []
    for e in events_text:
        sign = 1 if any(w in e for w in _ADDS) else -1 if any(w in e for w in _REMOVES) else 0
        assert sign, e
        deltas.append(sign * int(re.search(r"\d+", e).group()))
    truths, last = [], -1
    for step in t["steps"][:-1]:
        idx = next(j for j in range(last + 1, len(events_text)) if events_text[j].lower() in step.lower())
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
CASES = [(f, k) for f in ALL for k in FAMILIES[f].kinds]


def test_every_family_has_an_independent_checker_and_enough_kinds() -> None:
    assert set(CHECKERS) == set(ALL) and len(ALL) >= 6
    for f in ALL:
        assert FAMILIES[f].kinds[0] == "valid" and len(FAMILIES[f].flawed_kinds) >= 3


@pytest.mark.parametrize(("family", "kind"), CASES)
def test_labels_recomputed_independently(family: str, kind: str) -> None:
    """The checker's first wrong step is the label, over many seeds; the gold answer parses to it."""
    for seed in SEEDS:
        t = make_family_task(random.Random(seed), family, kind, seed)
        got = CHECKERS[family](t)
        assert got == t["first_error_step"], (seed, t["problem"], t["steps"], got)
        assert t["is_correct"] == (kind == "valid") == (got == -1)
        assert (t["family"], t["kind"]) == (family, kind)
        r = parse_verifier_output(t["gold_verification"], len(t["steps"]), "stop")
        assert r.valid and r.verdict.first_error_step == t["first_error_step"]
        AnnotatedProof.model_validate(t)


@pytest.mark.parametrize("family", ALL)
def test_errors_sit_at_several_places(family: str) -> None:
    """A family's first errors are not all at one step index (no positional shortcut)."""
    firsts = {make_family_task(random.Random(seed), family, kind)["first_error_step"]
              for kind in FAMILIES[family].flawed_kinds for seed in range(20)}
    assert len(firsts) >= 3, firsts


@pytest.mark.parametrize("family", ALL)
def test_the_family_survives_the_training_row(family: str) -> None:
    """Rows of the training dataset keep the annotation as JSON text and no `family` column."""
    t = make_family_task(random.Random(1), family, FAMILIES[family].flawed_kinds[0])
    assert family_of(t) == family
    assert family_of({"annotation": json.dumps(t["annotation"])}) == family
    assert family_of({"annotation": json.dumps({"remark": "expert"})}) is None


@pytest.mark.parametrize("family", ALL)
def test_wordings_vary(family: str) -> None:
    """Several wordings: the proofs of one family do not all open their steps with the same words."""
    openings = {" ".join(s.split()[:2]) for seed in range(40)
                for s in make_family_task(random.Random(seed), family, "valid")["steps"]}
    assert len(openings) >= 4, openings


def test_balanced_tasks_by_family_come_in_same_family_pairs() -> None:
    tasks = balanced_tasks(120, seed=2, families="all")
    for a, b in zip(tasks[::2], tasks[1::2], strict=True):
        assert a["is_correct"] != b["is_correct"] and a["family"] == b["family"]
    assert {f: sum(t["family"] == f for t in tasks) for f in ALL} == {f: 20 for f in ALL}
    for f in ALL:
        kinds = {t["kind"] for t in tasks if t["family"] == f and not t["is_correct"]}
        assert kinds == set(FAMILIES[f].flawed_kinds)


def test_disjoint_splits_by_family_leave_one_out_keeps_the_held_out_set() -> None:
    sizes = {"eval": 40, "dev": 20, "train": 120}
    full = disjoint_splits(sizes, seed=4, families="all")
    loo = disjoint_splits(sizes, seed=4, families="all", exclude={"train": ["linear"]})
    assert loo["eval"] == full["eval"] and loo["dev"] == full["dev"]
    assert "linear" not in {t["family"] for t in loo["train"]}
    for sets in (full, loo):
        keys = {n: {" ".join(t["problem"].lower().split()) for t in ts} for n, ts in sets.items()}
        assert not keys["train"] & keys["eval"] and not keys["train"] & keys["dev"] and not keys["dev"] & keys["eval"]
        for name, n in sizes.items():
            assert len(sets[name]) == n and sum(t["is_correct"] for t in sets[name]) == n // 2
    only = disjoint_splits({"eval": 10}, seed=4, families={"eval": ["parity"]})
    assert {t["family"] for t in only["eval"]} == {"parity"}


def test_default_draws_stay_chains() -> None:
    sets = disjoint_splits({"train": 20, "eval": 10}, seed=1)
    assert {t["family"] for ts in sets.values() for t in ts} == {"chain"}
    assert all(t["annotation"]["remark"] == f"synthetic:{t['kind']}" for t in sets["train"])


@pytest.mark.parametrize(("families", "exclude", "message"), [
    (["algebra"], (), "unknown proof family 'algebra'"),
    ("all", ["nope"], "unknown proof family 'nope'"),
    (["linear"], ["linear"], "no proof family left"),
])
def test_bad_family_choices_are_named(families, exclude, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve(families, exclude)


def test_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown linear kind 'miscopy'"):
        make_family_task(random.Random(0), "linear", "miscopy")


@pytest.mark.parametrize(("argv", "rc", "families"), [
    (["--families", "parity,linear"], 0, {"parity", "linear"}),
    (["--families", "all", "--exclude", "chain,prose,expand,inequality"], 0, {"linear", "parity"}),
    (["--exclude", "chain"], 0, set(ALL) - {"chain"}),
    ([], 0, {"chain"}),
    (["--families", "algebra"], 2, None),  # an option error: exit 2, as in every command
])
def test_data_synth_cli_draws_the_families_asked(tmp_path, capsys, argv: list[str], rc: int, families) -> None:
    from proofcheck.app.cli import main

    out = tmp_path / "tasks.jsonl"
    assert main(["data", "synth", "--n", "20", "--seed", "3", "--out", str(out), *argv]) == rc
    if families is None:
        assert "unknown proof family 'algebra'" in capsys.readouterr().err and not out.exists()
        return
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert {t["family"] for t in tasks} == families and len(tasks) == 20
    if argv:  # families asked: valid/flawed pairs (the default draws kinds at random, as before)
        assert sum(t["is_correct"] for t in tasks) == 10
