"""The one dataset-assembly rule set, used by `proofcheck data build` and by `train/grpo.py`.

- **Hold-out by problem** (`hold_out`): proofs are grouped by their problem statement, normalised
  (case and whitespace folded, so the same problem under two ids or two spacings is one problem);
  `round(fraction x problems)` whole problems (at least one, never all) go to evaluation, chosen
  with `random.Random(seed)`. No problem is in both sets.
- **Mix by origin** (`mix`): `ratios` gives each origin (expert, repaired, synthetic) a share of
  the training set; the set has `size` rows (an origin too small for its share is repeated), or,
  without a size, as many as possible without repeating a row. No ratios: every row once.

Both work on any item type through accessor functions (`problem_of`, `origin_of`), so records
(`AnnotatedProof`) and dataset rows (dicts) follow exactly the same rules.

- **A curriculum** (`write_curriculum`): the training and held-out rows a caller drew itself (the
  demo's and the ablations' synthetic sets), checked disjoint by problem and written as the dataset
  folder train/grpo.py reads (`train` and `eval` splits); a `Curriculum` describes it, and the launcher
  (`proofcheck.app.launch.data_args`) turns it into the data flags that make training take it as written,
  through these same rules: the eval split is the held-out set
  (nothing else held out, no synthetic rows added), and the mix's shares are the train split's rows by
  origin with the split's size, so `mix` keeps every row once, whatever its origin.

Example:
    >>> rows = [{"problem": f"P{i % 4}", "origin": "expert"} for i in range(8)]
    >>> train, held = hold_out(rows, 0.25, seed=0, problem_of=lambda r: r["problem"])
    >>> len(held), len({problem_key(r["problem"]) for r in held})
    (2, 1)
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

ORIGINS = ("expert", "repaired", "synthetic")


class MixError(ValueError):
    """The mixing ratios cannot be met by the data (the message says which origin and what to do)."""


def problem_key(problem: str) -> str:
    """The normalised problem statement that decides which proofs belong to the same problem."""
    return re.sub(r"\s+", " ", problem).strip().lower()


def hold_out(items: list[T], fraction: float, seed: int,
             problem_of: Callable[[T], str]) -> tuple[list[T], list[T]]:
    """(train, eval): `round(fraction x problems)` whole problems (1 <= n < problems) to eval.

    With `fraction <= 0`, or fewer than two problems, nothing is held out. Order within each
    set follows `items`.
    """
    if fraction <= 0 or not items:
        return list(items), []
    problems = sorted({problem_key(problem_of(it)) for it in items})
    if len(problems) < 2:
        return list(items), []
    random.Random(seed).shuffle(problems)
    n_eval = min(len(problems) - 1, max(1, round(fraction * len(problems))))
    held = set(problems[:n_eval])
    train = [it for it in items if problem_key(problem_of(it)) not in held]
    return train, [it for it in items if problem_key(problem_of(it)) in held]


def mix(items: list[T], ratios: Mapping[str, float] | None, size: int | None, seed: int,
        origin_of: Callable[[T], str]) -> list[T]:
    """The training set drawn by origin in the proportions `ratios` (origin -> share), shuffled.

    No ratios: every item once. With ratios: `size` items (origins too small for their share are
    repeated), or the largest size that repeats no item. Raises `MixError` when an origin with a
    share has no items, or when nothing would be selected.
    """
    rng = random.Random(seed)
    if ratios is None:
        out = list(items)
        rng.shuffle(out)
        return out
    unknown = sorted(set(ratios) - set(ORIGINS))
    if unknown or sum(ratios.values()) <= 0 or any(w < 0 for w in ratios.values()):
        raise MixError(f"mixing ratios {dict(ratios)}: give non-negative shares for {', '.join(ORIGINS)} "
                       "with a positive sum")
    by_origin = {o: [it for it in items if origin_of(it) == o] for o in ORIGINS}
    total = sum(ratios.values())
    shares = {o: ratios.get(o, 0.0) / total for o in ORIGINS}
    empty = [o for o in ORIGINS if shares[o] > 0 and not by_origin[o]]
    if empty:
        raise MixError(f"the mix gives {', '.join(empty)} rows a share, but the data has none "
                       f"(rows by origin: { {o: len(v) for o, v in by_origin.items()} }); "
                       "add such data or set that share to 0")
    if size is None:
        size = min(math.floor(len(by_origin[o]) / shares[o]) for o in ORIGINS if shares[o] > 0)
    out: list[T] = []
    for o in ORIGINS:
        want = round(shares[o] * size)
        pool = list(by_origin[o])
        rng.shuffle(pool)
        while want > 0 and pool:
            take = pool[:want]
            out += take
            want -= len(take)
    rng.shuffle(out)
    if not out:
        raise MixError(f"the mix {dict(ratios)} with size {size} selects no training row")
    return out


def polarity_pairs(items: list[T], is_valid: Callable[[T], bool], seed: int) -> list[T]:
    """`items` reordered as (valid, flawed) pairs, each pair in random order, the pairs in the order
    the items came (the rest of the larger class at the end).

    Read in order, every run of an even number of items from the start of a pair is half valid, so a
    GRPO batch of an even number of prompts is balanced exactly (with the trainer's own shuffling off):
    a batch of only valid proofs pays for accepting everything, one of only flawed proofs for
    rejecting everything.

    >>> polarity_pairs([1, 3, 5, 2, 7, 4], lambda x: x % 2 == 0, seed=0)
    [1, 2, 3, 4, 5, 7]
    """
    rng = random.Random(seed)
    valid = [it for it in items if is_valid(it)]
    flawed = [it for it in items if not is_valid(it)]
    out: list[T] = []
    for v, f in zip(valid, flawed, strict=False):
        out += [v, f] if rng.random() < 0.5 else [f, v]
    n = min(len(valid), len(flawed))
    return out + valid[n:] + flawed[n:]


def strata_in_turn(items: list[T], stratum: Callable[[T], Any]) -> list[T]:
    """`items` reordered so that any first n hold every stratum in turn (each stratum's items in their order, the
    strata in the order they first appear): a held-out set cut to its first n keeps each stratum's share (a
    shuffled 60 of 192 six-family proofs held 7 chains and 14 equations).

    >>> strata_in_turn(["a1", "a2", "a3", "b1", "c1", "b2"], lambda x: x[0])
    ['a1', 'b1', 'c1', 'a2', 'b2', 'a3']
    """
    rank: Counter[Any] = Counter()
    order = {k: i for i, k in enumerate(dict.fromkeys(map(stratum, items)))}
    keyed = []
    for it in items:
        k = stratum(it)
        keyed.append((rank[k], order[k], it))
        rank[k] += 1
    return [it for _, _, it in sorted(keyed, key=lambda t: t[:2])]


CURRICULUM_FILE = "curriculum.json"  # in the dataset folder, beside datasets' own files


@dataclass
class Curriculum:
    """A dataset folder written by `write_curriculum`: its training rows by origin and its held-out count, and the
    record of its split (`proofcheck.data.heldout.split_summary`: families, kinds and variants of each split; None
    for a folder written before it was recorded; not compared)."""

    folder: Path
    train_by_origin: dict[str, int]
    n_eval: int
    split: dict[str, Any] | None = field(default=None, compare=False)


def write_curriculum(folder: str | Path, train: list[dict[str, Any]], held_out: list[dict[str, Any]],
                     keep_existing: bool = True) -> Curriculum:
    """The annotated-proof rows `train` and `held_out` (validated with the record schema) as a dataset folder
    with `train` and `eval` splits; a ValueError names the problems in both. With `keep_existing` a folder
    already written is kept as it is (a re-run reuses it); its record (`CURRICULUM_FILE`) is written either way,
    with what each split holds (families, kinds, variants) and how many training rows use a held-out wording
    (`proofcheck.data.heldout.split_summary`)."""
    from proofcheck.data.heldout import split_summary
    from proofcheck.data.loaders import annotated_to_dataset
    from proofcheck.io import write_json_atomic
    from proofcheck.schemas import AnnotatedProof

    folder = Path(folder)
    both = sorted({problem_key(r["problem"]) for r in train} & {problem_key(r["problem"]) for r in held_out})
    if both:
        raise ValueError(f"{len(both)} problem(s) in both the training and the held-out rows, e.g. {both[0][:80]!r}: "
                         "draw the sets disjoint by problem (data.synth.disjoint_splits)")
    records = {split: [AnnotatedProof.model_validate(r) for r in rows] for split, rows in
               (("train", train), ("eval", held_out))}
    if not (keep_existing and (folder / "dataset_dict.json").is_file()):
        import datasets

        datasets.DatasetDict({split: annotated_to_dataset(recs) for split, recs in records.items()}
                             ).save_to_disk(str(folder))
    cur = Curriculum(folder, dict(Counter(r.origin or "expert" for r in records["train"])), len(held_out),
                     split_summary({"train": train, "eval": held_out}))
    write_json_atomic(folder / CURRICULUM_FILE, {"train_by_origin": cur.train_by_origin, "n_eval": cur.n_eval,
                                                 "split": cur.split})
    return cur


def read_curriculum(folder: str | Path) -> Curriculum:
    """The curriculum `write_curriculum` wrote in `folder` (one written before its record existed is counted
    from its splits)."""
    folder = Path(folder)
    if (folder / CURRICULUM_FILE).is_file():
        rec = json.loads((folder / CURRICULUM_FILE).read_text(encoding="utf-8"))
        return Curriculum(folder, rec["train_by_origin"], rec["n_eval"], rec.get("split"))
    import datasets

    dd = datasets.load_from_disk(str(folder))
    return Curriculum(folder, dict(Counter(o or "expert" for o in dd["train"]["origin"])), len(dd["eval"]))
