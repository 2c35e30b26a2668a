"""Run every benchmark in benchmarks/ and collect their Markdown tables into one file.

Usage: python benchmarks/run_all.py [--quick] [--out benchmarks/RESULTS.md]
Each benchmark is a script `benchmarks/<name>.py` that prints Markdown; a failing one is
reported with its exit code and stderr tail, and makes this runner exit non-zero.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


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
    args = ap.parse_args()
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != "run_all.py" and not p.name.startswith("_"))
    parts = [f"# Benchmarks\n\nMachine: {machine()}. Date: {time.strftime('%Y-%m-%d')}.\n"]
    failed = 0
    for script in scripts:
        print(f"== {script.name}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(script), *(["--quick"] if args.quick else [])],
                              capture_output=True, text=True)
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
