"""The layering rules of CONTRIBUTING.md, enforced on the source.

- core (`proofcheck/`, except the CLI and the demo, which wire the layers together, and the
  `proofcheck/models/` layer) imports nothing from `reward/ train/ serve/ data/ bench/` or
  `proofcheck.models`, at any depth (a function-level import is still a dependency);
- `train/` and `serve/` never import each other (they meet through files and HTTP);
- every package imports only the layers the table below allows;
- light modules (everything but `train/`, plus the thin `train/grpo.py` entry) import no torch /
  transformers / vLLM / TRL / peft / DeepSpeed / accelerate / datasets at module level, and
  importing them all in a fresh interpreter loads none of those (checked in a subprocess).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"proofcheck": "core", "reward": "reward", "train": "train", "serve": "serve", "data": "data",
           "bench": "bench"}
SUBPACKAGES = {"reward", "train", "serve", "data", "bench", "models"}
# entry points above every layer: they wire the layers together for the user
ENTRY = {"proofcheck/cli.py", "proofcheck/demo.py"}
ALLOWED = {  # layer -> layers it may import (besides itself)
    "core": set(),
    "reward": {"core", "data"},  # data.loaders for file-level grading (`proofcheck grade`)
    "serve": {"core", "reward"},
    "data": {"core", "serve", "reward"},  # curation reaches models through serve's engines
    "train": {"core", "reward", "data"},
    "bench": {"core", "reward", "data", "serve"},
    # model builders (proofcheck/models/): `tiny_model` trains its tokenizer on the shipped samples and
    # synthetic tasks; run by `proofcheck model`, the demo, tests and benchmarks, imported by no layer
    "models": {"core", "data"},
}
HEAVY = {"torch", "transformers", "vllm", "trl", "peft", "deepspeed", "accelerate", "datasets"}


def layer_of(path: Path) -> str:
    rel = path.relative_to(REPO)
    if rel.as_posix() in ENTRY or rel.parts[:2] == ("proofcheck", "commands"):
        return "cli"
    if rel.parts[:2] == ("proofcheck", "models"):
        return "models"
    return FOLDERS[rel.parts[0]]


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    head = "proofcheck" if rel.parts[0] == "proofcheck" else f"proofcheck.{rel.parts[0]}"
    return ".".join([head, *rel.parts[1:]]).removesuffix(".__init__")


def imported_layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "proofcheck":
        return None
    if len(parts) > 1 and parts[1] in SUBPACKAGES:
        return parts[1]
    return "cli" if len(parts) > 1 and parts[1] in ("commands", "cli", "demo") else "core"


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(absolute module, line, at module level) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            out.append((module, node.lineno, id(node) in top))
    return out


SOURCES = sorted(p for folder in FOLDERS for p in (REPO / folder).rglob("*.py"))
LAYERED = [p for p in SOURCES if layer_of(p) in ALLOWED]


def test_the_tree_is_seen() -> None:
    names = {p.relative_to(REPO).as_posix() for p in LAYERED}
    assert {"proofcheck/parsing.py", "proofcheck/schemas.py", "reward/grading.py", "serve/engines.py",
            "train/grpo.py", "data/build.py", "bench/mcq_run.py", "proofcheck/models/tiny_model.py"} <= names


@pytest.mark.parametrize("path", LAYERED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_layers_import_only_what_they_may(path: Path) -> None:
    src = layer_of(path)
    bad = [f"{path.relative_to(REPO)}:{line}: imports {mod} ({dst})"
           for mod, line, _ in imports(path)
           if (dst := imported_layer(mod)) is not None and dst != src and dst not in ALLOWED[src]]
    assert not bad, "\n".join(bad)


def test_core_imports_nothing_above_it_and_train_serve_are_apart() -> None:
    """The three named rules, stated on their own so a change to ALLOWED cannot loosen them."""
    bad = []
    for path in LAYERED:
        src = layer_of(path)
        for mod, line, _ in imports(path):
            dst = imported_layer(mod)
            if (src == "core" and dst in SUBPACKAGES) or {src, dst} == {"train", "serve"}:
                bad.append(f"{path.relative_to(REPO)}:{line}: {src} imports {mod}")
    assert not bad, "\n".join(bad)


LIGHT = [p for p in SOURCES if layer_of(p) != "train" or p.name == "grpo.py"]


@pytest.mark.parametrize("path", LIGHT, ids=lambda p: p.relative_to(REPO).as_posix())
def test_light_modules_import_no_heavy_library_at_module_level(path: Path) -> None:
    bad = [f"{path.relative_to(REPO)}:{line}: imports {mod} at module level; import it inside the function "
           "that needs it" for mod, line, top in imports(path) if top and mod.split(".")[0] in HEAVY]
    assert not bad, "\n".join(bad)


def test_importing_every_light_module_loads_no_heavy_library() -> None:
    names = [module_name(p) for p in LIGHT]
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", f"heavy libraries loaded by light modules: {proc.stdout}"
    assert len(names) > 50
