"""Build a training set: merge expert + repaired (+ synthetic) proofs, de-duplicate, split by problem.

- Validation: every input goes through the schemas (file:line: field errors).
- De-duplication: same problem text + same normalised steps (case and whitespace folded).
- Split and mix: the rules of `proofcheck.data.assembly`, the same as `train/grpo.py` applies:
  `eval_fraction` of the problems (normalised statements) held out whole, then the training
  split drawn by origin in the `--mix` proportions (`--train-size` rows, or as many as possible
  without repeating one; no `--mix`: every record once).
- Balance (optional): the train split's majority label is down-sampled to the minority's size.
Output: a `datasets.DatasetDict` (train/eval) saved with `save_to_disk`, the same as JSONL,
and a card (card.json + README.md) with counts by origin, domain, subject and label.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

from proofcheck.data.assembly import ORIGINS, hold_out, mix, problem_key
from proofcheck.data.loaders import load_records
from proofcheck.data.synth import balanced_tasks
from proofcheck.io import write_json_atomic, write_jsonl_atomic, write_text_atomic
from proofcheck.schemas import AnnotatedProof


def parse_mix(text: str) -> dict[str, float] | None:
    """`expert=0.7,repaired=0.3` -> shares {expert: 0.7, repaired: 0.3, synthetic: 0.0}.

    Origins not named get no share; "" means no mix (every record once). Unknown origins,
    non-numbers and negative shares are errors.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        return None
    shares = {o: 0.0 for o in ORIGINS}
    for part in parts:
        name, sep, value = part.partition("=")
        if not sep or name not in ORIGINS:
            raise ValueError(f"--mix item {part!r}: expected origin=share with origin in {', '.join(ORIGINS)}")
        try:
            shares[name] = float(value)
        except ValueError as e:
            raise ValueError(f"--mix item {part!r}: share {value!r} is not a number") from e
        if shares[name] < 0:
            raise ValueError(f"--mix item {part!r}: share must be >= 0")
    if sum(shares.values()) <= 0:
        raise ValueError(f"--mix {text!r}: the shares sum to 0; give at least one origin a positive share")
    return shares


def dedup_key(p: AnnotatedProof) -> tuple[str, tuple[str, ...]]:
    """Same problem and same steps, case and whitespace folded."""
    return problem_key(p.problem), tuple(problem_key(s) for s in p.steps)


def balance(records: list[AnnotatedProof], rng: random.Random) -> list[AnnotatedProof]:
    pos = [r for r in records if r.gold_is_correct]
    neg = [r for r in records if not r.gold_is_correct]
    n = min(len(pos), len(neg))
    return rng.sample(pos, n) + rng.sample(neg, n) if n else records


def card(splits: dict[str, list[AnnotatedProof]], stats: dict[str, Any]) -> dict[str, Any]:
    def counts(rs: list[AnnotatedProof]) -> dict[str, Any]:
        return {"n": len(rs), "origin": dict(Counter(r.origin or "expert" for r in rs)),
                "domain": dict(Counter(r.domain for r in rs)), "subject": dict(Counter(r.subject for r in rs)),
                "label": {"valid": sum(r.gold_is_correct for r in rs), "invalid": sum(not r.gold_is_correct for r in rs)},
                "problems": len({problem_key(r.problem) for r in rs})}

    return {"splits": {k: counts(v) for k, v in splits.items()}, **stats}


def build_dataset(out: str | Path, *, expert: str | None, repaired: str | None = None, synthetic: int = 0,
                  shares: dict[str, float] | None = None, train_size: int | None = None,
                  eval_fraction: float = 0.1, balance_labels: bool = False, seed: int = 0) -> dict[str, Any]:
    """Build and save the dataset; returns the card. `shares` / `train_size`: see `assembly.mix`."""
    if not 0 <= eval_fraction < 1:
        raise ValueError("--eval-fraction must be in [0, 1)")
    if not expert and not repaired and synthetic <= 0:
        raise ValueError("nothing to build: give --expert, --repaired or --synthetic N")
    if train_size is not None and (shares is None or train_size < 1):
        raise ValueError("--train-size needs --mix and must be >= 1 (without a mix every record is used once)")
    rng = random.Random(seed)
    pools: dict[str, list[AnnotatedProof]] = {o: [] for o in ORIGINS}
    for path, origin in ((expert, "expert"), (repaired, "repaired")):
        if path:
            for r in load_records(path, "annotated"):
                pools[r.origin or origin].append(r if r.origin else r.model_copy(update={"origin": origin}))
    if synthetic > 0:
        pools["synthetic"] = [AnnotatedProof.model_validate(t) for t in balanced_tasks(synthetic, seed=seed)]
    seen, unique, dups = set(), [], 0
    for origin in ORIGINS:
        for r in pools[origin]:
            k = dedup_key(r)
            if k in seen:
                dups += 1
                continue
            seen.add(k)
            unique.append(r)
    train, evals = hold_out(unique, eval_fraction, seed, problem_of=lambda r: r.problem)
    mixed = mix(train, shares, train_size, seed, origin_of=lambda r: r.origin or "expert")
    if balance_labels:
        mixed = balance(mixed, rng)
    rng.shuffle(mixed)
    return save(out, {"train": mixed, "eval": evals},
                {"duplicates_removed": dups, "mix": shares, "train_size": train_size,
                 "eval_fraction": eval_fraction, "seed": seed,
                 "balanced": balance_labels, "inputs": {"expert": expert, "repaired": repaired, "synthetic": synthetic}})


def save(out: str | Path, splits: dict[str, list[AnnotatedProof]], stats: dict[str, Any]) -> dict[str, Any]:
    import datasets

    from proofcheck.data.loaders import annotated_to_dataset

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dd = datasets.DatasetDict({k: annotated_to_dataset(v) for k, v in splits.items() if v})
    dd.save_to_disk(str(out / "dataset"))
    for k, v in splits.items():
        write_jsonl_atomic(out / f"{k}.jsonl", [r.model_dump(mode="json") for r in v])
    c = card(splits, stats)
    write_json_atomic(out / "card.json", c)
    lines = ["# proofcheck training set", "", "| split | records | problems | valid | invalid | origins |",
             "|---|---|---|---|---|---|"]
    for k, s in c["splits"].items():
        lines.append(f"| {k} | {s['n']} | {s['problems']} | {s['label']['valid']} | {s['label']['invalid']} | "
                     f"{', '.join(f'{o}: {n}' for o, n in s['origin'].items())} |")
    lines += ["", f"Duplicates removed: {stats['duplicates_removed']}. Mix: {stats['mix']}. Seed: {stats['seed']}.",
              "No problem appears in both splits. Load with `datasets.load_from_disk('<dir>/dataset')`."]
    write_text_atomic(out / "README.md", "\n".join(lines) + "\n")
    return c
