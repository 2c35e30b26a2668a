"""Run every benchmark in benchmarks/ and collect their Markdown tables into one file.

Usage: python benchmarks/run_all.py [--quick] [--out benchmarks/RESULTS.md] [--json FILE] [--only a,b]
Each benchmark is a script `benchmarks/<name>.py` that prints Markdown; a failing one is
reported with its exit code and stderr tail, and makes this runner exit non-zero.
With `--json FILE`, the figures the benchmarks emit (`benchmarks/_figures.py: emit`) are written
to FILE under fixed dotted keys, with the machine and date; `REQUIRED_KEYS` must all be there
(a missing one is listed under `missing_keys` and makes the runner exit non-zero).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIRED_KEYS = ("model", "serve.service_vs_engine", "serve.vs_naive_loop", "serve.early_reject_token_ratio",
                 "serve.early_reject_decision_agreement", "serve.decode_vs_roofline", "train.colocate_vs_hf_generate")


# not run by `make bench`: this script, and the packages (benchmarks/ablate, benchmarks/gpu_check: not globbed
# here), which have their own entry and report (the ablation trains 5 arms x 2+ seeds, tens of minutes even
# with --quick, and writes benchmarks/ABLATIONS.md; the GPU check runs on a lent GPU)
OWN_COMMANDS = ("run_all.py",)


def machine() -> str:
    import os

    mem = ""
    try:
        kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="Markdown file to write")
    ap.add_argument("--json", metavar="FILE", help="also write every figure under fixed keys to this JSON file")
    ap.add_argument("--only", help="comma-separated benchmark names to run (default: all)")
    args = ap.parse_args()
    scripts = sorted(p for p in HERE.glob("*.py") if p.name not in OWN_COMMANDS and not p.name.startswith("_"))
    if args.only:
        wanted = {n.strip().removesuffix(".py") for n in args.only.split(",") if n.strip()}
        unknown = wanted - {p.stem for p in scripts}
        if unknown:
            ap.error(f"--only: no benchmark named {', '.join(sorted(unknown))}; "
                     f"choose from {', '.join(p.stem for p in scripts)}")
        scripts = [p for p in scripts if p.stem in wanted]
    parts = [f"# Benchmarks\n\nMachine: {machine()}. Date: {time.strftime('%Y-%m-%d')}.\n"]
    figures_file = Path(tempfile.mkdtemp(prefix="bench-figures-")) / "figures.json"
    env = {**os.environ, "PROOFCHECK_BENCH_JSON": str(figures_file)}
    failed = 0
    t_all = time.perf_counter()
    for script in scripts:
        print(f"== {script.name}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(script), *(["--quick"] if args.quick else [])],
                              capture_output=True, text=True, env=env)
        took = time.perf_counter() - t0
        # keep the Markdown; trainer log rows (`{'loss': ...}`) printed by TRL are not part of the result
        table = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("{'"))
        print(table)
        if proc.returncode != 0:
            failed += 1
            parts.append(f"## {script.stem}\n\nFAILED (exit {proc.returncode}):\n```\n{proc.stderr[-2000:]}\n```\n")
        else:
            parts.append(f"## {script.stem} ({took:.0f} s)\n\n{table.strip()}\n")
    Path(args.out).write_text("\n".join(parts))
    print(f"wrote {args.out}")
    if args.json:
        failed += write_json(Path(args.json), figures_file, scripts, failed, time.perf_counter() - t_all, args.quick)
    return 1 if failed else 0


def write_json(out: Path, figures_file: Path, scripts: list[Path], failed: int, took: float, quick: bool) -> int:
    """Write the collected figures to `out`; returns 1 when a required key is missing, else 0."""
    figures = json.loads(figures_file.read_text()) if figures_file.is_file() else {}
    missing = [k for k in REQUIRED_KEYS if figures.get(k) is None]
    doc = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "quick": quick, "wall_s": round(took, 1),
           "benchmarks": [p.stem for p in scripts], "failed_benchmarks": failed, **dict(sorted(figures.items())),
           "missing_keys": missing}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}" + (f" (missing: {', '.join(missing)})" if missing else ""))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
