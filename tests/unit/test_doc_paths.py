"""The paths the README, docs/ and config comments tell a user to open or serve exist.

Repository files they name (configs, docs, scripts, shipped data) must be in the tree, and every
`runs/<dir>/merged|adapter` they serve must be an `output_dir` a recipe in configs/grpo writes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "configs").rglob("*.yaml"))]
FILE_REF = re.compile(r"(?<![\w/.<-])((?:configs|docs|benchmarks|train|data/samples)/[\w./-]*\w\.(?:yaml|md|py|jsonl))")
SERVED = re.compile(r"runs/([\w.-]+)/(merged|adapter)\b")


def refs(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return sorted({(doc.relative_to(REPO).as_posix(), m.group(0)) for doc in DOCS
                   for m in pattern.finditer(doc.read_text(encoding="utf-8"))})


@pytest.mark.parametrize(("doc", "ref"), refs(FILE_REF))
def test_named_repository_files_exist(doc: str, ref: str) -> None:
    assert (REPO / ref).exists(), f"{doc} names {ref}, which is not in the repository"


def test_docs_name_files_at_all() -> None:
    names = {ref for _, ref in refs(FILE_REF)}
    assert {"docs/training.md", "configs/accelerate/multi-node.yaml", "configs/grpo/tiny-cpu.yaml"} <= names


OUTPUT_DIRS = {Path(yaml.safe_load(p.read_text())["output_dir"]).name for p in (REPO / "configs" / "grpo").glob("*.yaml")}


@pytest.mark.parametrize(("doc", "ref"), refs(SERVED))
def test_served_models_are_what_training_writes(doc: str, ref: str) -> None:
    run = SERVED.match(ref).group(1)
    assert run in OUTPUT_DIRS, f"{doc} serves {ref}, but no recipe in configs/grpo writes runs/{run}"
