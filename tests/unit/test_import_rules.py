"""The layering rules of CONTRIBUTING.md, enforced on the source.

A layer is a folder, each a top folder of the repository: `proofcheck/` (the core), `models/`, `reward/`,
`train/`, `serve/`, `data/`, `bench/`, `app/` (the application) and `benchmarks/`. No file is exempt by name.

- every layer imports only the layers `ALLOWED` lists, at any depth (a function-level import is
  still a dependency); the table is strict (each edge it allows is used, so it says what the code
  does) and acyclic;
- the core imports no other layer; `train/` and `serve/` never import each other; only the
  application layer and the benchmarks (the top) import the application layer;
- light modules (everything but `train/` and `benchmarks/`, plus the thin `train/grpo.py` entry)
  import no torch / transformers / vLLM / TRL / peft / DeepSpeed / accelerate / datasets at module
  level, and importing them all in a fresh interpreter loads none of those (checked in a subprocess).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# folder (relative to the repository) -> layer; the deepest folder holding a file decides
FOLDERS = {"proofcheck": "core", "app": "app", "models": "models", "reward": "reward",
           "train": "train", "serve": "serve", "data": "data", "bench": "bench", "benchmarks": "benchmarks"}
# import name of a layer's package (the core is `proofcheck` itself, and whatever is not another layer)
PACKAGES = {"proofcheck.app": "app", "proofcheck.models": "models", "proofcheck.reward": "reward",
            "proofcheck.train": "train", "proofcheck.serve": "serve", "proofcheck.data": "data",
            "proofcheck.bench": "bench"}
ALLOWED = {  # layer -> layers it imports (besides itself): exactly the edges the code uses
    "core": set(),
    "data": {"core", "serve"},  # curation reaches models through serve's engines
    "reward": {"core", "data"},  # data.loaders for file-level grading (`proofcheck grade`)
    "serve": {"core"},
    "train": {"core", "reward", "data"},
    "bench": {"core", "reward", "data"},  # scoring takes a verifier object: the CLI builds it with serve/
    # the model builders: `tiny_model` trains its tokenizer on the shipped samples and synthetic tasks
    "models": {"core", "data"},
    # the CLI, its commands and the demo wire every layer together
    "app": {"core", "data", "reward", "serve", "bench", "models"},  # train: run as a script (accelerate launch), not imported
    # benchmarks/: the top, scripts over the installed package
    "benchmarks": {"core", "data", "reward", "serve", "train", "bench", "models", "app"},
}
HEAVY = {"torch", "transformers", "vllm", "trl", "peft", "deepspeed", "accelerate", "datasets"}


def layer_of(path: Path) -> str:
    rel = path.relative_to(REPO).parent.as_posix()
    folder = max((f for f in FOLDERS if rel == f or rel.startswith(f + "/")), key=len)
    return FOLDERS[folder]


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    if rel.parts[0] == "benchmarks":  # scripts, and packages run by path (benchmarks/ on sys.path)
        return ".".join(rel.parts[1:]).removesuffix(".__init__")
    head = "proofcheck" if rel.parts[0] == "proofcheck" else f"proofcheck.{rel.parts[0]}"
    return ".".join([head, *rel.parts[1:]]).removesuffix(".__init__")


def imported_layer(module: str) -> str | None:
    if module.split(".")[0] != "proofcheck":
        return None
    return next((layer for pkg, layer in PACKAGES.items() if module == pkg or module.startswith(pkg + ".")), "core")


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


SOURCES = sorted(p for folder in ("proofcheck", "app", "models", "reward", "train", "serve", "data", "bench", "benchmarks")
                 for p in (REPO / folder).rglob("*.py"))


def edges() -> dict[tuple[str, str], list[str]]:
    """(importing layer, imported layer) -> where, for every import across layers."""
    out: dict[tuple[str, str], list[str]] = {}
    for path in SOURCES:
        src = layer_of(path)
        for mod, line, _ in imports(path):
            dst = imported_layer(mod)
            if dst is not None and dst != src:
                out.setdefault((src, dst), []).append(f"{path.relative_to(REPO)}:{line}: imports {mod}")
    return out


def test_the_tree_is_seen() -> None:
    layers = {p.relative_to(REPO).as_posix(): layer_of(p) for p in SOURCES}
    assert {"proofcheck/parsing.py": "core", "app/cli.py": "app", "app/demo.py": "app",
            "app/commands/train.py": "app", "models/tiny_model.py": "models",
            "reward/grading.py": "reward", "serve/engines.py": "serve", "train/grpo.py": "train",
            "data/build.py": "data", "bench/mcq_run.py": "bench", "benchmarks/ablate/driver.py": "benchmarks"}.items() \
        <= layers.items()
    assert set(layers.values()) == set(ALLOWED)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_layers_import_only_what_they_may(path: Path) -> None:
    src = layer_of(path)
    bad = [f"{path.relative_to(REPO)}:{line}: imports {mod} ({dst})"
           for mod, line, _ in imports(path)
           if (dst := imported_layer(mod)) is not None and dst != src and dst not in ALLOWED[src]]
    assert not bad, "\n".join(bad)


def test_the_table_allows_only_what_is_used() -> None:
    """A strict table: an allowed edge no module uses would let a new dependency (and a cycle) in unseen."""
    used = edges()
    unused = sorted(f"{src} -> {dst}" for src, dsts in ALLOWED.items() for dst in dsts if (src, dst) not in used)
    assert not unused, f"allowed but unused (drop them from ALLOWED): {', '.join(unused)}"


def test_the_table_has_no_cycle() -> None:
    order: list[str] = []
    left = {layer: set(dsts) for layer, dsts in ALLOWED.items()}
    while left:
        ready = sorted(layer for layer, dsts in left.items() if dsts <= set(order))
        assert ready, f"a cycle among {sorted(left)}"
        order += ready
        for layer in ready:
            del left[layer]
    assert order[0] == "core" and order[-1] == "benchmarks"


def test_core_imports_nothing_above_it_and_train_serve_are_apart() -> None:
    """The named rules, stated on their own so a change to ALLOWED cannot loosen them."""
    bad = [where for (src, dst), places in edges().items() for where in places
           if src == "core" or {src, dst} == {"train", "serve"} or (dst == "app" and src != "benchmarks")]
    assert not bad, "\n".join(bad)


LIGHT = [p for p in SOURCES if layer_of(p) not in ("train", "benchmarks") or p.relative_to(REPO).as_posix() == "train/grpo.py"]


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
