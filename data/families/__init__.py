"""Proof families of the synthetic curriculum: one module per family, and this registry.

Every family writes short proofs of one shape in several wordings, valid or with one error of a
kind of its own, with exact labels (first wrong step, reason). A task is the dict
`proofcheck.data.synth.make_task` writes (annotated-proof fields, a gold verification) plus
`family` and `kind`; the annotation's `remark` is `synthetic:<family>:<kind>` (`synthetic:<kind>`
for the original `chain` family), so the family survives a trip through the training dataset.

| family       | what the proof does                                   | error kinds |
|--------------|-------------------------------------------------------|-------------|
| `chain`      | computes `x_1 = x_0 + 5, x_2 = x_1 - 3, ...`          | arithmetic, miscopy, conclusion |
| `prose`      | follows a story of additions and removals             | arithmetic, wrong_operation, missed_event, conclusion |
| `linear`     | solves `a x + b = c x + d` move by move               | sign_slip, divide_one_term, arithmetic, conclusion |
| `expand`     | expands and simplifies brackets, products, squares    | sign_slip, wrong_rule, arithmetic, conclusion |
| `parity`     | shows f(n) mod 2 or 3 by cases                        | arithmetic, wrong_rule, case_missed, conclusion |
| `inequality` | bounds a x + b on an interval                         | no_flip, wrong_end, arithmetic, conclusion |

A draw is made under a `Variant` (`_base.drawing`): training's (the default: the draws as they always
were), or one with wordings no training proof uses, longer proofs or larger numbers, which the harder
held-out split draws (`proofcheck.data.heldout`, docs/curriculum.md). Every task also carries
`step_checks`, each step recomputed from the true state and what it says (`proofcheck.data.rationale`).

Example:
    >>> import random
    >>> t = make_family_task(random.Random(0), "linear", "sign_slip")
    >>> t["family"], t["kind"], t["is_correct"], t["first_error_step"] >= 0
    ('linear', 'sign_slip', False, True)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from proofcheck.data.families import expand, inequality, linear, parity, prose
from proofcheck.data.families._base import TRAINING, Draft, Variant, drawing, to_task

__all__ = ["ALL", "FAMILIES", "TRAINING", "Family", "Variant", "drawing", "family_choice", "family_names",
           "family_of", "family_selection", "make_family_task", "resolve", "row_remark"]


@dataclass(frozen=True)
class Family:
    """A proof family: its name, kinds (`valid` first) and generator of one task."""

    name: str
    kinds: tuple[str, ...]
    task: Callable[[random.Random, str, int], dict[str, Any]]

    @property
    def flawed_kinds(self) -> tuple[str, ...]:
        return tuple(k for k in self.kinds if k != "valid")


def _from_draft(name: str, make: Callable[[random.Random, str], Draft]) -> Callable[..., dict[str, Any]]:
    def task(rng: random.Random, kind: str, index: int = 0) -> dict[str, Any]:
        return to_task(make(rng, kind), name, kind, index)
    return task


def _chain_task(rng: random.Random, kind: str, index: int = 0) -> dict[str, Any]:
    from proofcheck.data.synth import make_task

    return make_task(rng, kind, index)


FAMILIES: dict[str, Family] = {
    "chain": Family("chain", ("valid", "arithmetic", "miscopy", "conclusion"), _chain_task),
    **{m.__name__.rsplit(".", 1)[1]: Family(m.__name__.rsplit(".", 1)[1], m.KINDS,
                                            _from_draft(m.__name__.rsplit(".", 1)[1], m.make))
       for m in (prose, linear, expand, parity, inequality)},
}
ALL = tuple(FAMILIES)


def resolve(families: Iterable[str] | str | None = None, exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """The family names chosen: `families` (None or "all": every family) minus `exclude`, in registry
    order. Raises ValueError naming an unknown family, or when nothing is left.

    >>> resolve(exclude=["chain", "prose"])
    ('linear', 'expand', 'parity', 'inequality')
    """
    wanted = list(ALL) if families is None or families == "all" else \
        [families] if isinstance(families, str) else list(families)
    excluded = [exclude] if isinstance(exclude, str) else list(exclude)
    unknown = sorted({f for f in [*wanted, *excluded] if f not in FAMILIES})
    if unknown:
        raise ValueError(f"unknown proof famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(map(repr, unknown))}; "
                         f"choose from {', '.join(ALL)}")
    chosen = tuple(f for f in ALL if f in wanted and f not in excluded)
    if not chosen:
        raise ValueError(f"no proof family left (families={wanted}, exclude={excluded})")
    return chosen


def family_names(value: Iterable[str] | str | None) -> list[str]:
    """The family names a user gave: a comma list (`--families linear,parity`) or a list (a recipe's
    `synthetic_families`); blanks dropped, nothing checked (`resolve` checks).

    >>> family_names("linear, parity,"), family_names(["all"]), family_names(None)
    (['linear', 'parity'], ['all'], [])
    """
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [s for s in (item.strip() for item in items) if s]


def family_selection(value: Iterable[str] | str | None) -> list[str] | str:
    """The families a curriculum draws from (`balanced_tasks`' `families`): "all" for nothing given or
    `all` named, else the names (`chain` is then the chain family's balanced draws).

    >>> family_selection(None), family_selection("all"), family_selection("chain,linear")
    ('all', 'all', ['chain', 'linear'])
    """
    names = family_names(value)
    return "all" if not names or "all" in names else names


def family_choice(value: Iterable[str] | str | None) -> list[str] | str | None:
    """As `family_selection`, for the callers that keep the historical draws: None for nothing or
    `chain` alone (`make_task`'s arithmetic chains, as before families existed). Training's
    `synthetic_families` and the SFT warm-up's `--families` read this way.

    >>> family_choice("chain"), family_choice(["all"]), family_choice("linear,parity"), family_choice(None)
    (None, 'all', ['linear', 'parity'], None)
    """
    names = family_names(value)
    return None if names in ([], ["chain"]) else family_selection(names)


def make_family_task(rng: random.Random, family: str, kind: str, index: int = 0) -> dict[str, Any]:
    """One task of `family` and `kind` (see `FAMILIES[family].kinds`), with `family` and `kind` set."""
    if family not in FAMILIES:
        raise ValueError(f"unknown proof family {family!r}; choose from {', '.join(ALL)}")
    fam = FAMILIES[family]
    if kind not in fam.kinds:
        raise ValueError(f"unknown {family} kind {kind!r}; choose one of {', '.join(fam.kinds)}")
    task = fam.task(rng, kind, index)
    task.setdefault("family", family)
    task.setdefault("kind", kind)
    return task


def family_of(row: dict[str, Any]) -> str | None:
    """The family of a task or training row: its `family` field, else read from the annotation's
    remark (`synthetic:<family>:<kind>`; `synthetic:<kind>` is the `chain` family); None when it has
    neither (expert data).

    >>> family_of({"annotation": '{"remark": "synthetic:parity:case_missed"}'})
    'parity'
    """
    if row.get("family"):
        return str(row["family"])
    remark = row_remark(row)
    parts = remark.split(":") if remark is not None else []
    if len(parts) == 3 and parts[0] == "synthetic" and parts[1] in FAMILIES:
        return parts[1]
    if len(parts) == 2 and parts[0] == "synthetic" and parts[1] in FAMILIES["chain"].kinds:
        return "chain"
    return None


def row_remark(row: dict[str, Any]) -> str | None:
    """The annotation's `remark` of a task or dataset row (the annotation may be a JSON string, as
    in the training dataset); None when there is none or the annotation does not parse."""
    import json

    ann = row.get("annotation")
    if isinstance(ann, str):
        try:
            ann = json.loads(ann)
        except ValueError:
            return None
    remark = ann.get("remark") if isinstance(ann, dict) else None
    return remark if isinstance(remark, str) else None
