"""The paths the README, docs/ and config comments tell a user to open or serve exist.

Repository files they name (configs, docs, scripts, shipped data) must be in the tree, every
Markdown link to a file resolves, and every `runs/<dir>/merged|adapter` they serve must be an
`output_dir` a recipe in configs/grpo writes. (Commands and flags in their code blocks:
tests/unit/test_cli_vocabulary.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md")),
        *sorted((REPO / "configs").rglob("*.yaml"))]
FILE_REF = re.compile(r"(?<![\w/.<-])((?:configs|docs|benchmarks|train|data/samples)/[\w./-]*\w\.(?:yaml|md|py|jsonl|png|sh))")
LINK = re.compile(r"\]\(([^)\s]+)\)")
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


OUTPUT_DIRS = {Path(yaml.safe_load(p.read_text())["output_dir"]).name for kind in ("grpo", "sft")
               for p in (REPO / "configs" / kind).glob("*.yaml")}


@pytest.mark.parametrize(("doc", "ref"), refs(SERVED))
def test_served_models_are_what_training_writes(doc: str, ref: str) -> None:
    run = SERVED.match(ref).group(1)
    assert run in OUTPUT_DIRS, f"{doc} serves {ref}, but no recipe in configs/grpo or configs/sft writes runs/{run}"


def links() -> list[tuple[str, str]]:
    """(doc, target) of every Markdown link to a file (not a web address, not an anchor alone)."""
    return sorted({(doc.relative_to(REPO).as_posix(), m.group(1)) for doc in DOCS if doc.suffix == ".md"
                   for m in LINK.finditer(doc.read_text(encoding="utf-8"))
                   if not m.group(1).startswith(("http://", "https://", "#", "mailto:"))})


@pytest.mark.parametrize(("doc", "target"), links())
def test_markdown_links_resolve(doc: str, target: str) -> None:
    path = (REPO / doc).parent / target.split("#", 1)[0]
    assert path.exists(), f"{doc} links to {target}, which is not in the repository"
    if "#" in target and path.suffix == ".md":  # a section link: the heading must be there
        anchor = target.split("#", 1)[1]
        headings = re.findall(r"(?m)^#+ (.*)$", path.read_text(encoding="utf-8"))
        slugs = {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-") for h in headings}
        assert anchor in slugs, f"{doc} links to {target}: no such heading in {path.name}"


def test_the_docs_link_at_all() -> None:
    targets = {target for _, target in links()}
    assert {"docs/training.md", "docs/serving.md", "LICENSE", "../README.md#rewards"} <= targets
