"""The harder held-out split: proofs that differ from every training proof by wording, by length or by size.

A verifier that learned its training template scores well on held-out *problems* drawn like its training
proofs and badly on anything else (issue 49: 0.85 on its own chains, 0.21 on the same arithmetic worded by
another generator). The ordinary held-out set (`data.synth.disjoint_splits`) differs from training only by
problem; this split adds slices that differ in one more way each, and one in all three at once:

| slice          | what no training proof has                                      | `Variant`                       |
|----------------|-----------------------------------------------------------------|---------------------------------|
| `hard-wording` | step, problem and conclusion wordings, scenes and unknowns that training never draws (`HELDOUT_WORDINGS`) | `Variant(wordings="heldout")`   |
| `hard-length`  | longer proofs: chains and stories 3 more steps; an equation's three brackets to expand, an expansion's three more brackets, a bound's constant in four moves (3 more); parity's cases with three residues first (3 more each) | `Variant(longer=3)` |
| `hard-size`    | numbers 10x larger (operands, constants, starts, intervals)     | `Variant(scale=10)`             |
| `hard-all`     | all three                                                       | `Variant("heldout", 3, 10)`     |

Every slice is balanced (valid/flawed pairs, every family in turn, each family's error kinds in turn),
disjoint by problem from the other slices and from the sets given as `avoid` (the training and ordinary
held-out sets), and its tasks carry `variant` (the slice's name) and proof ids `synth-hard-<slice>-NNNNN-p0`,
so a result can be traced to its slice even after the training dataset drops the `variant` column. The
split is recorded (`split_record`: the slices' variants, sizes and families, the avoided rows by variant,
every held-out wording) and checked (`leaks`: a shared problem, or a training proof that uses a held-out
wording, is named), so nothing leaks into training unnoticed.

Example:
    >>> from proofcheck.data.synth import disjoint_splits
    >>> train = disjoint_splits({"train": 24}, seed=0, families="all")["train"]
    >>> hard = harder_splits(12, seed=0, avoid=train)
    >>> sorted(hard), len(hard["hard-all"]), leaks(train, hard)
    (['hard-all', 'hard-length', 'hard-size', 'hard-wording'], 12, [])
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from proofcheck.data.families import resolve
from proofcheck.data.families._base import HELDOUT_WORDINGS, TRAINING, Variant
from proofcheck.data.synth import FamilyChoice, count_kinds, disjoint_splits

HARDER: dict[str, Variant] = {
    "hard-wording": Variant(wordings="heldout"),
    "hard-length": Variant(longer=3),
    "hard-size": Variant(scale=10),
    "hard-all": Variant(wordings="heldout", longer=3, scale=10),
}
SPLIT_FILE = "split.json"
# What a training set may draw beyond the plain training proofs, every harder slice still beyond it: numbers 3x
# (the slices: 10x), and proofs one step (parity: one per case) longer (the slices: 3 more): a bracket to expand,
# a third bracket, a constant in two moves, n^2's residue (in parity words, its parity) first. Each is drawn in
# every family the run trains on.
VARIED_TRAINING: dict[str, Variant] = {
    "larger": Variant(scale=3),
    "longer": Variant(longer=1),
}


def harder_splits(n_each: int, seed: int = 0, families: FamilyChoice = "all", avoid: Iterable[dict[str, Any]] = (),
                  slices: Mapping[str, Variant] | None = None) -> dict[str, list[dict[str, Any]]]:
    """`n_each` tasks in each slice of `slices` (default `HARDER`), from `families` (a list or "all"), no
    problem in two slices or in `avoid`. The same seed and `avoid` give the same tasks."""
    slices = dict(HARDER if slices is None else slices)
    return disjoint_splits(dict.fromkeys(slices, n_each), seed=seed, families=families, variants=slices,
                           avoid=list(avoid))


class VariedSet(NamedTuple):
    """One varied training set: how many tasks, drawn under which variant, from which families."""

    n: int
    variant: Variant
    families: list[str]


def varied_training(name: str, n: int, families: FamilyChoice = "all",
                    exclude: Iterable[str] = ()) -> dict[str, VariedSet]:
    """The sets that draw about `n` of training set `name`'s tasks under `VARIED_TRAINING`, for the families the
    run trains (`families` minus `exclude`): `<name>-<variant>` -> `VariedSet`. Sizes are even
    (valid/flawed pairs), an equal share of `n` per variant; `disjoint_splits` draws them (`variants`, per-set
    `families`) and spreads each over the families.

    >>> {k: (n, fams) for k, (n, _, fams) in varied_training("sft", 96, ["linear", "prose"]).items()}
    {'sft-larger': (48, ['prose', 'linear']), 'sft-longer': (48, ['prose', 'linear'])}
    """
    chosen = resolve(None if families == "all" else families, exclude)
    if n <= 0:
        return {}
    per_variant = n / len(VARIED_TRAINING)
    return {f"{name}-{k}": VariedSet(round(per_variant / 2) * 2, v, list(chosen)) for k, v in VARIED_TRAINING.items()}


@cache
def _patterns() -> dict[str, re.Pattern[str]]:
    """Each held-out wording as a regular expression (its `{field}`s match anything), by slot and index."""
    out = {}
    for slot, options in HELDOUT_WORDINGS.items():
        for i, option in enumerate(options):
            for j, text in enumerate(option if isinstance(option, tuple) else (option,)):
                if len(text) < 3:  # an unknown's name (`w`): too short to look for in text
                    continue
                parts = re.split(r"\{[^}]*\}", text.strip())
                body = r".+?".join(re.escape(p) for p in parts)
                if body.replace(r".+?", "").strip():
                    out[f"{slot}[{i}.{j}]" if isinstance(option, tuple) else f"{slot}[{i}]"] = re.compile(body)
    return out


def heldout_wordings_in(task: dict[str, Any]) -> list[str]:
    """The held-out wordings (slot names) a task's problem or steps use; [] for every training draw."""
    text = "\n".join([task["problem"], *task["steps"]])
    return [slot for slot, pat in _patterns().items() if pat.search(text)]


def leaks(train: Iterable[dict[str, Any]], heldout_sets: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """What breaks the split, one line each: a problem both in training and in a held-out set, or a training
    proof that uses a held-out wording. Empty when the split holds."""
    from proofcheck.data.assembly import problem_key

    train = list(train)
    seen = {problem_key(t["problem"]): t.get("proof_id") for t in train}
    out = [f"{name}: {t['proof_id']} has the problem of training proof {seen[problem_key(t['problem'])]}"
           for name, tasks in heldout_sets.items() for t in tasks if problem_key(t["problem"]) in seen]
    out += [f"training proof {t.get('proof_id')} uses held-out wording(s) {', '.join(used)}"
            for t in train if (used := heldout_wordings_in(t))]
    return out


def split_summary(sets: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """What each set holds, for a curriculum's record: its synthetic proofs' kinds by family and their variants
    (`training` for rows drawn as training draws), the rows of no known family (expert data) counted apart, and
    how many rows of a set named `train` use a held-out wording (0 when the split holds).

    >>> from proofcheck.data.synth import disjoint_splits
    >>> s = split_summary(disjoint_splits({"train": 4, "eval": 2}, seed=0, families=["parity"]))
    >>> s["train"]["kinds"]["parity"]["valid"], s["train"]["variants"], s["train_rows_with_heldout_wordings"]
    (2, {'training': 4}, 0)
    """
    from proofcheck.data.families import family_of

    out: dict[str, Any] = {}
    for name, rows in sets.items():
        synth = [r for r in rows if family_of(r) is not None]
        out[name] = {"n": len(rows), "n_other": len(rows) - len(synth), "kinds": count_kinds(synth),
                     "variants": dict(Counter(r.get("variant") or "training" for r in synth))}
    out["train_rows_with_heldout_wordings"] = sum(bool(heldout_wordings_in(r)) for r in sets.get("train", [])
                                                  if r.get("problem") and isinstance(r.get("steps"), list))
    return out


def split_record(sets: Mapping[str, list[dict[str, Any]]], seed: int, families: FamilyChoice = "all",
                 slices: Mapping[str, Variant] | None = None,
                 avoided: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """What the split is, for its folder (`SPLIT_FILE`) and a run's report: each slice's variant, size and
    kinds by family, the training draws' variant, the avoided sets' rows by variant (a run's varied warm-up
    shows as its `sft-larger` / `sft-longer` rows; `training` for plain draws and expert rows), and every
    held-out wording by slot."""
    slices = dict(HARDER if slices is None else slices)
    return {"seed": seed, "families": list(resolve(families if families != "all" else None)),
            "training": asdict(TRAINING),
            "avoided_variants": dict(Counter(r.get("variant") or "training" for r in avoided)),
            "slices": {name: {"variant": asdict(slices[name]), "n": len(tasks), "n_valid": sum(t["is_correct"] for t in tasks),
                              "kinds": count_kinds(tasks)} for name, tasks in sets.items()},
            "heldout_wordings": {slot: [list(o) if isinstance(o, tuple) else o for o in opts]
                                 for slot, opts in sorted(HELDOUT_WORDINGS.items())}}


def write_harder(folder: str | Path, sets: Mapping[str, list[dict[str, Any]]], seed: int,
                 train: Iterable[dict[str, Any]] = (), families: FamilyChoice = "all") -> Path:
    """Each slice as `<folder>/<slice>.jsonl` (annotated proofs with their labels: `proofcheck calibrate
    --data` reads them) and the record as `<folder>/split.json`; a ValueError names what leaks from `train`."""
    from proofcheck.io import write_json_atomic, write_jsonl_atomic

    train = list(train)
    if problems := leaks(train, sets):
        raise ValueError(f"the harder held-out split leaks into training ({len(problems)}): {problems[0]}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, tasks in sets.items():
        write_jsonl_atomic(folder / f"{name}.jsonl", tasks)
    write_json_atomic(folder / SPLIT_FILE, split_record(sets, seed, families, avoided=train))
    return folder
