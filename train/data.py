"""Build the GRPO training and held-out evaluation sets from expert, repaired and synthetic proofs.

Sources:
- annotated-proof JSONL files (validated by `proofcheck.data.loaders.load_records`: a bad record
  raises `DataError` naming file, line and field);
- folders saved by `proofcheck data build` (`datasets.DatasetDict` with train / eval splits and
  the columns of `annotated_to_dataset`): every row is validated with the same schema;
- synthetic tasks with exact labels, half valid (`proofcheck.data.synth.balanced_tasks`).

Evaluation rows come from the folders' eval splits plus a by-problem hold-out (`eval_fraction`)
of the other sources (JSONL, synthetic, folders without an eval split): no problem is in both sets.
The training rows are then mixed by origin (`mix_ratios`). Hold-out and mix are the rules of
`proofcheck.data.assembly`, the same `proofcheck data build` applies. Each row gets a
conversational `prompt` column (system + user turn from `proofcheck.protocol.verifier_messages`;
TRL applies the model's chat template) and keeps `annotation` (JSON text) and `n_steps`, which
the reward functions read.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofcheck.data import assembly
from proofcheck.data.loaders import DataError, annotated_to_dataset, load_records
from proofcheck.protocol import DEFAULT_PROMPT_STYLE, verifier_messages
from proofcheck.schemas import AnnotatedProof
from proofcheck.train.config import ConfigError, ProofcheckScriptArguments

COLUMNS = ("proof_id", "problem_id", "problem", "reference_solution", "steps", "n_steps", "domain", "subject",
           "origin", "is_correct", "first_error_step", "annotation")


@dataclass
class TrainingData:
    """The two sets as lists of rows, and what went into them (for logs and the run summary)."""

    train: list[dict[str, Any]]
    eval: list[dict[str, Any]]
    pool_counts: dict[str, int] = field(default_factory=dict)
    train_counts: dict[str, int] = field(default_factory=dict)
    with_reference: bool = False  # the prompts show the reference solution (include_reference_solution)
    prompt_style: str = DEFAULT_PROMPT_STYLE  # one of proofcheck.protocol.PROMPT_STYLES (prompt_style)

    def summary(self) -> dict[str, Any]:
        return {"pool_by_origin": self.pool_counts, "train_by_origin": self.train_counts,
                "n_train": len(self.train), "n_eval": len(self.eval), "with_reference": self.with_reference,
                "prompt_style": self.prompt_style}


def _rows_from_records(records: list[AnnotatedProof], default_origin: str) -> list[dict[str, Any]]:
    rows = annotated_to_dataset(records).to_list() if records else []
    for rec, row in zip(records, rows, strict=True):
        row["origin"] = rec.origin or default_origin
    return rows


def _validate_rows(rows: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """Check rows of a saved dataset with the annotated-proof schema; DataError on any bad row.

    A proof may repeat inside a split: `proofcheck data build --mix expert=2` up-samples that way.
    """
    problems: list[str] = []
    out = []
    for i, row in enumerate(rows):
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            problems.append(f"{where} row {i}: missing column(s) {', '.join(missing)}")
            continue
        try:
            ann = json.loads(row["annotation"]) if isinstance(row["annotation"], str) else row["annotation"]
            rec = AnnotatedProof.model_validate({**row, "annotation": ann, "n_steps": None})
        except (ValueError, TypeError) as e:  # pydantic's ValidationError and JSON errors are ValueErrors
            first = str(e).splitlines()
            problems.append(f"{where} row {i} (proof_id={row.get('proof_id')!r}): {' '.join(first[:3])}")
            continue
        if row["n_steps"] != len(rec.steps):
            problems.append(f"{where} row {i}: n_steps={row['n_steps']} but steps has {len(rec.steps)} items")
            continue
        out.append({**{c: row[c] for c in COLUMNS}, "annotation": rec.annotation.model_dump_json()})
    if problems:
        raise DataError(problems)
    return out


def load_source(path: str, default_origin: str, eval_split: str) -> tuple[list[dict], list[dict] | None]:
    """(train rows, eval rows or None) from one JSONL file or one saved-dataset folder."""
    p = Path(path)
    if p.is_dir() and not (p / "dataset_dict.json").is_file() and (p / "dataset" / "dataset_dict.json").is_file():
        p = p / "dataset"  # the folder `proofcheck data build --out` wrote (dataset/ + JSONL + card)
    if p.is_dir():
        import datasets

        try:
            loaded = datasets.load_from_disk(str(p))
        except (FileNotFoundError, ValueError) as e:
            raise ConfigError(f"{p}: not a dataset saved by `proofcheck data build` / save_to_disk: {e}") from e
        if isinstance(loaded, datasets.Dataset):
            return _validate_rows(loaded.to_list(), str(p)), None
        if "train" not in loaded:
            raise ConfigError(f"{p}: the DatasetDict has splits {list(loaded)}, but no 'train' split")
        train = _validate_rows(loaded["train"].to_list(), f"{p}[train]")
        ev = _validate_rows(loaded[eval_split].to_list(), f"{p}[{eval_split}]") if eval_split in loaded else None
        for row in [*train, *(ev or [])]:
            row["origin"] = row["origin"] or default_origin
        return train, ev
    return _rows_from_records(load_records(p, "annotated"), default_origin), None


def synthetic_rows(n: int, seed: int, families: list[str] | None = None) -> list[dict[str, Any]]:
    """`n` synthetic tasks as training rows (validated like any record); `families`: None or `["chain"]`
    = arithmetic chains (the historical draws), else family names or `["all"]`."""
    from proofcheck.data.families import family_choice
    from proofcheck.data.synth import balanced_tasks

    records = [AnnotatedProof.model_validate(t) for t in balanced_tasks(n, seed=seed, families=family_choice(families))]
    return _rows_from_records(records, "synthetic")


def add_prompts(rows: list[dict], with_reference: bool, style: str = DEFAULT_PROMPT_STYLE) -> list[dict]:
    """Add the conversational `prompt` column in prompt `style` (the annotation is never shown to the verifier)."""
    return [{**r, "prompt": verifier_messages(r["problem"], list(r["steps"]),
                                              r["reference_solution"] if with_reference else None, style)}
            for r in rows]


def _problem(row: dict[str, Any]) -> str:
    return row["problem"]


def _origin(row: dict[str, Any]) -> str:
    return row["origin"]


def build_training_data(args: ProofcheckScriptArguments) -> TrainingData:
    """Load every source, hold out eval problems, mix the rest; raises DataError / ConfigError."""
    pool: list[dict] = []  # rows that may be held out for evaluation
    fixed_train: list[dict] = []  # train splits of folders that come with their own eval split
    given_eval: list[dict] = []
    problems: list[str] = []
    source_of: dict[str, str] = {}
    for default_origin, paths in (("expert", args.expert_files), ("repaired", args.repaired_files)):
        for path in paths:
            try:
                train, ev = load_source(path, default_origin, args.eval_split)
            except DataError as e:
                problems += e.problems
                continue
            for pid in {r["proof_id"] for r in train + (ev or [])}:
                if pid in source_of:
                    problems.append(f"{path}: proof_id {pid!r} is also in {source_of[pid]}; keep it in one source")
                source_of.setdefault(pid, path)
            if ev is None:
                pool += train
            else:
                fixed_train += train
                given_eval += ev
    if args.synthetic_count > 0:
        synth = synthetic_rows(args.synthetic_count, args.mix_seed, args.synthetic_families)
        problems += [f"synthetic task proof_id {r['proof_id']!r} is also in {source_of[r['proof_id']]}"
                     for r in synth if r["proof_id"] in source_of]
        pool += synth
    if problems:
        raise DataError(problems)
    train_pool, held = assembly.hold_out(pool, args.eval_fraction, args.mix_seed, problem_of=_problem)
    train_pool = train_pool + fixed_train
    eval_rows = given_eval + held
    overlap = sorted({assembly.problem_key(r["problem"]) for r in eval_rows}
                     & {assembly.problem_key(r["problem"]) for r in train_pool})
    if overlap:
        raise DataError([f"problem {p[:80]!r} is in an eval split and in training data; hold it out of one of them"
                         for p in overlap[:20]])
    if not train_pool:
        raise ConfigError("no training rows left after the eval hold-out: add data or lower eval_fraction")
    ratios = dict(zip(assembly.ORIGINS, args.mix_ratios, strict=True)) if args.mix_ratios is not None else None
    try:
        train = assembly.mix(train_pool, ratios, args.train_size, args.mix_seed, origin_of=_origin)
    except assembly.MixError as e:
        raise ConfigError(f"mix_ratios={args.mix_ratios}, train_size={args.train_size}: {e}") from e
    if args.balanced_batches:
        train = assembly.polarity_pairs(train, lambda r: bool(r["is_correct"]), args.mix_seed)
    rng = random.Random(args.mix_seed + 1)
    eval_rows = list(eval_rows)
    rng.shuffle(eval_rows)
    if args.eval_max_samples < len(eval_rows):   # a cut keeps every family and polarity in proportion
        eval_rows = assembly.strata_in_turn(eval_rows, _stratum)[: args.eval_max_samples]
    return TrainingData(
        train=add_prompts(train, args.include_reference_solution, args.prompt_style),
        eval=add_prompts(eval_rows, args.include_reference_solution, args.prompt_style),
        pool_counts=dict(Counter(r["origin"] for r in pool + fixed_train + given_eval)),
        train_counts=dict(Counter(r["origin"] for r in train)),
        with_reference=args.include_reference_solution,
        prompt_style=args.prompt_style,
    )


def _stratum(row: dict) -> tuple[str | None, bool]:
    """A held-out row's family (None for expert data) and polarity: what a cut held-out set keeps in proportion."""
    from proofcheck.data.families import family_of

    return family_of(row), bool(row["is_correct"])


def to_dataset(rows: list[dict]):
    """A `datasets.Dataset` of the rows (imports datasets)."""
    import datasets

    return datasets.Dataset.from_list(rows)
