"""The recomputed gold rationale (data/rationale.py): the same form in every family, each step recomputed before
its verdict, `wrong` exactly at the first error (checked against the independent checkers), every arithmetic
claim in a recomputation true when Python evaluates it, and the same labels as the `checks` form."""

from __future__ import annotations

import random
import re

import pytest
from family_checkers import CHECKERS

from proofcheck.data.families import ALL, FAMILIES, make_family_task
from proofcheck.data.families._base import TRAINING, drawing
from proofcheck.data.heldout import HARDER
from proofcheck.data.rationale import (
    RATIONALE_FORMS,
    fit_max_tokens,
    gold_rationale,
    longest_rationale,
    recomputed_lines,
    with_rationale,
)
from proofcheck.data.synth import balanced_tasks
from proofcheck.parsing import parse_verifier_output

LINE = re.compile(r"^Step (\d+): recompute (.+); the step says (.+): (ok|wrong)\.$")
ARITH = re.compile(r"^[-+\d\s·*/()^]+$")
TAIL = re.compile(r"\bis\s+(-?[\d(][-+\d\s·*/()^]*)$")  # `... is 2·1^2 + 6` (not `y + 1`)
CONGRUENT = re.compile(r"(-?\d+) ≡ (\d+) \(mod (\d+)\)")


def arithmetic_claims(text: str) -> list[tuple[str, str]]:
    """Every `A = B` inside `text` whose two sides are plain integer arithmetic (`7 + 9 = 16`, `2·(-3) = -6`,
    `33/3 = 11`), read from clauses split at `,` `:` `;`."""
    out = []
    for clause in re.split(r"[,:;]", CONGRUENT.sub(r"\1", text)):  # `11 ≡ 1 (mod 2)`: checked on its own
        parts = [p.strip() for p in clause.split("=")]
        if parts and (tail := TAIL.search(parts[0])):  # `the constant term is 2·1^2 + 6 = 8`
            parts[0] = tail.group(1).strip()
        nums = [p for p in parts if p and ARITH.match(p) and re.search(r"\d", p)]
        out += list(zip(nums, nums[1:], strict=False))
    return out


def value(expr: str) -> float:
    return eval(expr.replace("·", "*").replace("^", "**"), {"__builtins__": {}})  # digits and operators only


@pytest.mark.parametrize("variant", ["training", *HARDER])
@pytest.mark.parametrize("family", ALL)
def test_recomputed_rationale_is_right_at_every_step(variant: str, family: str) -> None:
    v = TRAINING if variant == "training" else HARDER[variant]
    for kind in FAMILIES[family].kinds:
        for seed in range(20):
            with drawing(v):
                t = make_family_task(random.Random(seed), family, kind, seed)
            first = CHECKERS[family](t)  # the independent checker's first error
            lines = [LINE.match(line) for line in recomputed_lines(t)]
            assert all(lines), recomputed_lines(t)
            assert [int(m.group(1)) for m in lines] == list(range(len(t["steps"]) if first < 0 else first + 1))
            assert [m.group(4) for m in lines] == ["ok"] * len(lines) if first < 0 else \
                ["ok"] * first + ["wrong"], (kind, seed, recomputed_lines(t))
            for m in lines:
                for a, b in arithmetic_claims(m.group(2)):
                    assert value(a) == value(b), (family, kind, seed, m.group(2))
                for n, r, mod in CONGRUENT.findall(m.group(2)):
                    assert int(n) % int(mod) == int(r), m.group(2)
            for form in RATIONALE_FORMS:
                r = parse_verifier_output(gold_rationale(t, form), len(t["steps"]), "stop")
                assert r.valid and r.verdict.first_error_step == first == t["first_error_step"]


def test_the_arithmetic_reader_sees_a_false_claim() -> None:
    claims = arithmetic_claims("x_2 = 7 + 9 = 17; 2·(-3) = -6: 33/3 = 11, y + 5 = 11; "
                               "the constant term is 2·1^2 + 6 = 9 ≡ 1 (mod 2)")
    assert claims == [("7 + 9", "17"), ("2·(-3)", "-6"), ("33/3", "11"), ("2·1^2 + 6", "9")]
    assert [value(a) == value(b) for a, b in claims] == [False, True, True, False]


def test_default_chains_have_the_form_too_and_checks_is_unchanged() -> None:
    tasks = balanced_tasks(20, seed=4)
    assert {t["family"] for t in tasks} == {"chain"}
    assert with_rationale(tasks, "checks") == tasks
    recomputed = with_rationale(tasks, "recomputed")
    assert all(r["gold_verification"].startswith("<assessment>Step 0: recompute x_1 = ") for r in recomputed)
    assert [r["first_error_step"] for r in recomputed] == [t["first_error_step"] for t in tasks]


@pytest.mark.parametrize(("task", "form", "message"), [
    ({"proof_id": "p", "first_error_step": -1, "gold_verification": "x"}, "recomputed", "has no step_checks"),
    ({"gold_verification": "x"}, "prose", "unknown rationale form 'prose'"),
])
def test_what_cannot_be_written_is_named(task: dict, form: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gold_rationale(task, form)


def test_longest_rationale_takes_the_longer_form_of_the_longest_task() -> None:
    tasks = balanced_tasks(12, seed=4, families=FAMILIES)
    longest = longest_rationale(tasks, len)
    assert longest == max(len(gold_rationale(t, f)) for t in tasks for f in RATIONALE_FORMS)
    assert longest > max(len(gold_rationale(t, "checks")) for t in tasks)  # the recomputed form is the longer
    plain = [{k: v for k, v in t.items() if k != "step_checks"} for t in tasks]  # no recomputed form to write
    assert longest_rationale(plain, len) == max(len(t["gold_verification"]) for t in tasks)
    assert longest_rationale([], len) == 0


@pytest.mark.parametrize(("longest", "floor", "headroom", "step", "expected"), [
    (714, 400, 0.15, 32, 832),   # 821.1 -> 822 -> the next multiple of 32
    (360, 400, 0.15, 32, 416),   # the headroom lifts it past the trained length
    (300, 400, 0.15, 32, 400),   # the trained length is the floor
    (100, None, 0.15, 32, 128),
    (64, None, 0.0, 32, 64),     # exactly a multiple: not rounded further
    (65, None, 0.0, 1, 65),
])
def test_fit_max_tokens(longest: int, floor: int | None, headroom: float, step: int, expected: int) -> None:
    assert fit_max_tokens(longest, floor, headroom, step) == expected


@pytest.mark.parametrize("bad", [dict(longest=-1), dict(headroom=-0.1), dict(step=0)])
def test_fit_max_tokens_refuses_nonsense(bad: dict) -> None:
    with pytest.raises(ValueError, match="fit_max_tokens needs"):
        fit_max_tokens(**{"longest": 10, "floor": None, **bad})
