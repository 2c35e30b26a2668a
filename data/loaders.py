"""JSONL loading with validation that names file, line and field for every bad record.

Example:
    >>> from proofcheck.data.loaders import load_records  # doctest: +SKIP
    >>> problems = load_records("data/samples/problems.jsonl", "problem")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from proofcheck.schemas import ID_FIELDS, SCHEMAS

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"

M = TypeVar("M", bound=BaseModel)


class DataError(ValueError):
    """One or more bad records; `problems` holds one `file:line: field: reason` per issue."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        head = "\n".join(problems[:50])
        more = f"\n... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{len(problems)} bad record(s):\n{head}{more}")


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<record>"


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, Any | None, str | None]]:
    """Yield (line_number, value, json_error) for each non-blank line."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line), None
            except json.JSONDecodeError as e:
                yield lineno, None, f"invalid JSON: {e.msg} at column {e.colno}"


def iter_json_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Yield (line_number, object, problem) for each non-blank line: a JSON object, or else the
    `file:line: field: reason` problem every reader reports for it (bad JSON, not an object)."""
    for lineno, value, err in iter_json_lines(path):
        where = f"{path}:{lineno}"
        if err is not None:
            yield lineno, None, f"{where}: <line>: {err}"
        elif not isinstance(value, dict):
            yield lineno, None, f"{where}: <record>: expected a JSON object, got {type(value).__name__}"
        else:
            yield lineno, value, None


def validate_jsonl(path: str | Path, model: type[M],
                   id_fields: tuple[str, ...]) -> tuple[list[tuple[M, dict[str, Any]]], list[str]]:
    """Validate every line of `path` against `model`; return ((record, raw dict) pairs, problems).

    Shared by every JSONL reader so they all report bad lines the same way: one
    `file:line: field: reason` per issue (bad JSON, non-object, each schema error, and a repeated
    `id_fields` key, which keeps only the first occurrence).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    records: list[tuple[M, dict[str, Any]]] = []
    problems: list[str] = []
    seen: dict[tuple, int] = {}
    for lineno, value, problem in iter_json_objects(path):
        where = f"{path}:{lineno}"
        if problem is not None:
            problems.append(problem)
            continue
        if "verifier_trials" in value:  # it may carry problem fields, but it is not a record of this kind
            problems.append(f"{where}: verifier_trials: this is a results file (one scored proof per line with its "
                            f"verifier passes), not a {model.__name__} file; read it with `proofcheck metrics --records` "
                            "or `proofcheck metrics verifier --outputs`, and give the input file here")
            continue
        try:
            rec = model.model_validate(value)
        except ValidationError as e:
            for d in e.errors():
                problems.append(f"{where}: {_field_path(d['loc'])}: {d['msg']}")
            continue
        key = tuple(getattr(rec, f) for f in id_fields)
        if key in seen:
            shown = key[0] if len(key) == 1 else key
            problems.append(f"{where}: {'+'.join(id_fields)}: duplicate id {shown!r} (first on line {seen[key]})")
            continue
        seen[key] = lineno
        records.append((rec, value))
    return records, problems


RESULTS_KIND = "results"


def validate_results(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Check a results file (our records.jsonl or the release's results.jsonl): one object per line
    with a list `verifier_trials` and an id (`proof_id`, or the release's `problem_id`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    records, problems = [], []
    for lineno, value, problem in iter_json_objects(path):
        where = f"{path}:{lineno}"
        if problem is not None:
            problems.append(problem)
        elif not isinstance(value.get("verifier_trials"), list):
            problems.append(f"{where}: verifier_trials: a results record needs a list of verifier passes")
        elif not (value.get("proof_id") or value.get("problem_id")):
            problems.append(f"{where}: proof_id: a results record needs proof_id (or the release's problem_id)")
        else:
            records.append(value)
    return records, problems


def validate_records(path: str | Path, kind: str) -> tuple[list[Any], list[str]]:
    """Parse every line of `path` as a `kind` record; return (records, problems)."""
    if kind == RESULTS_KIND:
        return validate_results(path)
    if kind not in SCHEMAS:
        raise ValueError(f"unknown record kind {kind!r}; choose one of {', '.join(SCHEMAS)}")
    pairs, problems = validate_jsonl(path, SCHEMAS[kind], ID_FIELDS[kind])
    return [rec for rec, _ in pairs], problems


def load_records(path: str | Path, kind: str) -> list[Any]:
    """Load and validate a JSONL file; raise `DataError` listing every bad record."""
    records, problems = validate_records(path, kind)
    if problems:
        raise DataError(problems)
    return records


def detect_kind(path: str | Path) -> str:
    """Guess a file's record kind from its first parsable record."""
    return detect_kind_why(path)[0]


def detect_kind_why(path: str | Path) -> tuple[str, str]:
    """(kind, why): a file's record kind guessed from its first parsable record, and the field that decided."""
    for lineno, value, _ in iter_json_lines(path):
        if isinstance(value, dict):
            if "verifier_trials" in value:
                return RESULTS_KIND, f"line {lineno} has verifier_trials"
            if "annotation" in value:
                return "annotated", f"line {lineno} has annotation"
            if "text" in value and "proof_id" in value:
                return "output", f"line {lineno} has text and proof_id"
            if "sample" in value:
                return "submission", f"line {lineno} has sample"
            return "problem", f"line {lineno} has none of verifier_trials, annotation, text, sample"
    raise ValueError(f"{path}: no JSON object found; pass --kind")


def annotated_to_dataset(records: list[Any]):
    """A `datasets.Dataset` with one row per annotated proof (for training).

    Columns: problem, reference_solution, steps, n_steps, proof_id, problem_id, domain,
    subject, origin, is_correct, first_error_step, annotation (as JSON text, so the reward
    function receives it intact).
    """
    import datasets

    rows = [
        {
            "proof_id": r.proof_id,
            "problem_id": r.problem_id,
            "problem": r.problem,
            "reference_solution": r.reference_solution or "",
            "steps": list(r.steps),
            "n_steps": len(r.steps),
            "domain": r.domain,
            "subject": r.subject,
            "origin": r.origin or "expert",
            "is_correct": r.gold_is_correct,
            "first_error_step": r.gold_first_error_step,
            "annotation": r.annotation.model_dump_json(),
        }
        for r in records
    ]
    return datasets.Dataset.from_list(rows)
