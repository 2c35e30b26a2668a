"""`make gpu-wheels`: the pure-Python wheels the GPU check needs that the lent H200's image lacks.

    python3 benchmarks/gpu_check wheels [--dest .gpu-wheels]

The lent machine (docs/gpu-check.md) reaches no package registry. Its `python3` (3.12) has torch,
transformers, accelerate, peft, pyyaml, pyarrow, pandas, xxhash, fsspec, huggingface-hub, but not
what `train/grpo.py` and the k-pass verifier import on top: `trl` (the trainer and its argument
parser), `datasets` (train/data.py: the rows handed to TRL) with `dill` and `multiprocess` (its two
requirements missing there), and `pydantic` (proofcheck.schemas, data/loaders.py: every training
row is validated) with `pydantic-core`, `annotated-types`, `typing-inspection` and `typing-extensions`
(the image has one, of a version not known here; pydantic-core needs >= 4.16.0). Nothing else on
the check's code paths is missing there (`vllm`, `deepspeed`, `fastapi`, `openai` are not imported
by the stages it runs). The versions are the project's pins (pyproject.toml) and, for the packages
those pull in, the versions the project's virtualenv resolved them to
(tests/unit/test_gpu_wheels.py compares both).

Each wheel is downloaded for CPython 3.12 on manylinux x86-64, without dependencies, into `--dest`
(ignored by git; the device tool carries it with `carry: [".gpu-wheels"]`), listed with version,
size and sha256 in `<dest>/WHEELS.txt`. The script refuses (exit 1) when the wheels and the
working tree that travels with them exceed the 64 MiB a device call may carry.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DEST = REPO / ".gpu-wheels"
LIST_FILE = "WHEELS.txt"
MIB = 2**20
CARRY_LIMIT = 64 * MIB  # the device tool's limit on what one call carries (working tree + carried paths)
WHEEL_LIMIT = 48 * MIB  # the wheels' share of it: at least 16 MiB stays for the repository itself

# name -> version; the first three are pyproject.toml pins, the others what those pins resolved to
WHEELS: dict[str, str] = {
    "trl": "1.16.0",
    "datasets": "5.2.0",
    "pydantic": "2.14.4",
    "pydantic-core": "2.50.5",
    "annotated-types": "0.8.0",
    "typing-inspection": "0.4.5",
    "dill": "0.4.1",
    "multiprocess": "0.70.19",
    "typing-extensions": "4.16.0",  # the image has it, maybe older than pydantic-core's >= 4.16.0
}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def download_command(name: str, version: str, dest: Path) -> list[str]:
    """The `pip download` command for one wheel: CPython 3.12, manylinux x86-64, binaries only, no deps."""
    plats = [x for p in PLATFORMS for x in ("--platform", p)]
    return [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--python-version", "3.12", "--implementation", "cp", *plats, "-d", str(dest), f"{name}=={version}"]


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def wheel_name(path: Path) -> tuple[str, str]:
    """(normalised project name, version) from a wheel's file name (PEP 427)."""
    parts = path.name.split("-")
    return _norm(parts[0]), parts[1]


def stale_wheels(dest: Path) -> list[Path]:
    """Wheels in `dest` that are not in WHEELS at their version (two versions of one package stop the
    device's install: they are removed before downloading)."""
    want = {(_norm(n), v) for n, v in WHEELS.items()}
    return [p for p in sorted(dest.glob("*.whl")) if wheel_name(p) not in want]


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of the working tree the device tool sends: tracked and untracked-not-ignored files."""
    names = subprocess.run(["git", "-C", str(repo), "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    return sum((repo / n).stat().st_size for n in names if n and (repo / n).is_file())


def fits(wheel_bytes: int, repo_bytes: int) -> str | None:
    """None when the wheels fit what a device call carries, else why not (for the user)."""
    if wheel_bytes > WHEEL_LIMIT:
        return (f"the wheels take {wheel_bytes / MIB:.1f} MiB, over their {WHEEL_LIMIT / MIB:.0f} MiB share of the "
                f"{CARRY_LIMIT / MIB:.0f} MiB a device call carries: drop a wheel the check does not import")
    if wheel_bytes + repo_bytes > CARRY_LIMIT:
        return (f"the wheels ({wheel_bytes / MIB:.1f} MiB) and the working tree ({repo_bytes / MIB:.1f} MiB) "
                f"exceed the {CARRY_LIMIT / MIB:.0f} MiB a device call carries: remove large untracked files")
    return None


def list_text(paths: list[Path]) -> str:
    """WHEELS.txt: one line per wheel (name, version, bytes, sha256, file) and the total."""
    lines = ["# name version bytes sha256 file   (make gpu-wheels; carried to the lent GPU machine)"]
    for p in paths:
        name, version = wheel_name(p)
        lines.append(f"{name} {version} {p.stat().st_size} {hashlib.sha256(p.read_bytes()).hexdigest()} {p.name}")
    total = sum(p.stat().st_size for p in paths)
    lines.append(f"# total {total} bytes ({total / MIB:.2f} MiB) in {len(paths)} wheels")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", default=str(DEFAULT_DEST), help="folder for the wheels (default .gpu-wheels)")
    args = ap.parse_args(argv)
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    for p in stale_wheels(dest):
        print(f"gpu-wheels: removing {p.name} (not in the list at that version)")
        p.unlink()
    for name, version in WHEELS.items():
        if any(wheel_name(p) == (_norm(name), version) for p in dest.glob("*.whl")):
            continue
        cmd = download_command(name, version, dest)
        if subprocess.run(cmd).returncode != 0:
            print(f"gpu-wheels: could not download {name}=={version} for CPython 3.12 manylinux x86-64 "
                  f"(command: {' '.join(cmd)})", file=sys.stderr)
            return 1
    paths = sorted(dest.glob("*.whl"))
    got = {wheel_name(p)[0] for p in paths}
    if missing := [n for n in WHEELS if _norm(n) not in got]:
        print(f"gpu-wheels: no wheel for {', '.join(missing)} in {dest}", file=sys.stderr)
        return 1
    (dest / LIST_FILE).write_text(list_text(paths))
    total = sum(p.stat().st_size for p in paths)
    inside = dest.resolve().is_relative_to(REPO)  # an ignored folder in the repo is carried beside the tree
    if why := fits(total, tree_bytes() if inside else 0):
        print(f"gpu-wheels: refused: {why}", file=sys.stderr)
        return 1
    print((dest / LIST_FILE).read_text(), end="")
    print(f"gpu-wheels: {len(paths)} wheels, {total / MIB:.2f} MiB in {dest}; on the device: "
          f"run(command='bash benchmarks/gpu_check.sh', carry=['{dest.name}'])")
    return 0
