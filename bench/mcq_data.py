"""LiveMathematicianBench hard-split items: validation, loading and the five-option shuffle.

The hard split of a month lives at `<data-dir>/<month>/hard/qaEval_<month>_ge5_hard.json`: a JSON
list whose items carry `id`, `mcq` {`question`, `correct_choice` {label, text}, `choices` (four
distractors, each {label, text}), `meta`} and the proof `sketch` / `expanded_sketch`; every other
field of the release (theorem, contexts, quality scores) is kept but unused here.

The five options are the correct choice followed by the distractors, shuffled with
`random.Random(seed + index)` (index = position in the file) and relabelled A-E, exactly as the
benchmark's own evaluators do, so a given seed reproduces their option order.

Example:
    >>> from proofcheck.bench.mcq_data import load_hard_set, shuffle_options  # doctest: +SKIP
    >>> items = load_hard_set("data/lmb/202511/hard/qaEval_202511_ge5_hard.json")  # doctest: +SKIP
    >>> options, correct = shuffle_options(items[0], seed=42, index=0)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from proofcheck.data.loaders import DataError

LABELS = ("A", "B", "C", "D", "E")
N_DISTRACTORS = 4


class Choice(BaseModel):
    """One answer option. The release stores {label, text}; a bare string is accepted as the text."""

    model_config = ConfigDict(extra="allow")

    label: str | None = None
    text: str = Field(min_length=1)


def _as_choice(value: Any) -> Any:
    return {"label": None, "text": value} if isinstance(value, str) else value


class MCQ(BaseModel):
    """The multiple-choice part of an item."""

    model_config = ConfigDict(extra="allow")

    question: str = Field(min_length=1)
    correct_choice: Choice
    choices: list[Choice]
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("correct_choice", mode="before")
    @classmethod
    def _correct_from_str(cls, v: Any) -> Any:
        return _as_choice(v)

    @field_validator("choices", mode="before")
    @classmethod
    def _choices_from_str(cls, v: Any) -> Any:
        return [_as_choice(c) for c in v] if isinstance(v, list) else v

    @field_validator("choices")
    @classmethod
    def _four_distractors(cls, v: list[Choice]) -> list[Choice]:
        if len(v) != N_DISTRACTORS:
            raise ValueError(f"expected exactly {N_DISTRACTORS} distractors (five options with the "
                             f"correct choice), got {len(v)}")
        return v

    @field_validator("meta", mode="before")
    @classmethod
    def _meta_null(cls, v: Any) -> Any:
        return {} if v is None else v


class Item(BaseModel):
    """One benchmark item; unknown fields of the release are kept."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    mcq: MCQ
    sketch: str | None = None
    expanded_sketch: str | None = None


def hard_set_path(data_dir: str | Path, month: str) -> Path:
    """Where a month's hard split lives under `data_dir`."""
    return Path(data_dir) / month / "hard" / f"qaEval_{month}_ge5_hard.json"


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<item>"


def load_hard_set(path: str | Path) -> list[Item]:
    """Load and validate a hard-split file; raise `DataError` naming file, item index and field
    for every bad item (and for duplicate ids, which resuming relies on being unique)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (expected <data-dir>/<month>/hard/"
                                f"qaEval_<month>_ge5_hard.json; check --data-dir and --month)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError([f"{path}: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}"]) from e
    if not isinstance(raw, list):
        raise DataError([f"{path}: expected a JSON list of items, got {type(raw).__name__}"])
    items: list[Item] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for index, value in enumerate(raw):
        ident = value.get("id") if isinstance(value, dict) else None
        where = f"{path}: item {index}" + (f" (id={ident!r})" if isinstance(ident, str) else "")
        if not isinstance(value, dict):
            problems.append(f"{where}: <item>: expected a JSON object, got {type(value).__name__}")
            continue
        try:
            item = Item.model_validate(value)
        except ValidationError as e:
            problems.extend(f"{where}: {_loc(d['loc'])}: {d['msg']}" for d in e.errors())
            continue
        if item.id in seen:
            problems.append(f"{where}: id: duplicate id {item.id!r} (first at item {seen[item.id]})")
            continue
        seen[item.id] = index
        items.append(item)
    if problems:
        raise DataError(problems)
    return items


def shuffle_options(item: Item, seed: int, index: int) -> tuple[list[dict[str, str]], str]:
    """The five labelled options of `item` and the label of the correct one.

    `[correct_choice] + choices` is shuffled with `random.Random(seed + index)` and relabelled
    A-E; the correct option is tracked by identity (not by text), so a distractor that repeats
    the correct text cannot steal its label.
    """
    pool = [item.mcq.correct_choice, *item.mcq.choices]
    order = list(range(len(pool)))
    random.Random(seed + index).shuffle(order)  # the permutation depends only on length and RNG
    options = [{"label": LABELS[pos], "text": pool[src].text} for pos, src in enumerate(order)]
    return options, LABELS[order.index(0)]
