"""Put this checkout's packages on a PYTHONPATH folder without installing them: `python3 benchmarks/gpu_check site DIR`.

benchmarks/gpu_check.sh runs the check with the lent machine's own `python3`, which has no build
backend guaranteed and no registry to fetch one from. pyproject.toml maps the import packages onto
folders (`proofcheck.train` = `train/`, ...); this builds that layout in `DIR` from symbolic links,
read from the same `[tool.setuptools] package-dir` table, so `DIR` on PYTHONPATH imports the
checkout's code as `pip install --no-deps .` would, writes nothing into the checkout, and sees
edits at once. Modules find their data through `Path(__file__).resolve()`, which leads back here.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def package_dirs(pyproject: Path = REPO / "pyproject.toml") -> dict[str, str]:
    """pyproject's `[tool.setuptools] package-dir`: import name -> folder in the checkout."""
    table = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-dir"]
    if "proofcheck" not in table:
        raise SystemExit(f"{pyproject}: [tool.setuptools] package-dir has no 'proofcheck' entry")
    return dict(table)


def link_project(site: Path, repo: Path = REPO) -> Path:
    """Build `site/proofcheck` from links: the top package's entries, then each mapped subpackage
    (`proofcheck.train` -> `site/proofcheck/train` -> `repo/train`). Returns the package folder."""
    dirs = package_dirs(repo / "pyproject.toml")
    top = site / "proofcheck"
    top.mkdir(parents=True, exist_ok=False)
    subs = {name.split(".", 1)[1]: folder for name, folder in dirs.items() if name.startswith("proofcheck.")}
    for entry in (repo / dirs["proofcheck"]).iterdir():
        if entry.name not in subs and entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for sub, folder in subs.items():
        if "." in sub:
            raise SystemExit(f"package-dir entry proofcheck.{sub}: nested mappings are not supported here")
        (top / sub).symlink_to(repo / folder)
    return top


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 benchmarks/gpu_check site DIR   (DIR must not exist yet)", file=sys.stderr)
        return 2
    top = link_project(Path(argv[0]))
    print(f"gpu_check: the checkout's packages linked under {top.parent} (put it on PYTHONPATH)")
    return 0
