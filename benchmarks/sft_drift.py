"""Does the SFT warm-up's step slow down as it runs, and does the memory allocator cause it?

    python benchmarks/sft_drift.py --steps 48 --out runs/sft-drift      # ~13 min on the 2-core bf16 host

Every CPU warm-up measured so far got slower as it ran: the demo's 64 steps from 5.6 to 7.0 s (medians of the
first and last 16 steps), the six-family long recipe's 256 steps from 7.3 to 12 s, while its process held 9-11 GB.
The rows are shuffled in windows (`LengthWindowSampler`), so the later batches are not longer. One suspect is
glibc's allocator: every batch has another padded length, so activations of new sizes are freed and allocated
each step, and large blocks go back to the kernel (`munmap`, trimmed heap tops) to be faulted in again.

This runs the demo's warm-up (`proofcheck.app.demo.sft_run` on the demo's own curriculum, seed 0, same steps)
once per arm, one after the other, each arm a set of environment variables on the same command:

- `glibc` (the baseline): the environment as it is;
- `no-trim`: glibc told to keep what it frees (`MALLOC_TRIM_THRESHOLD_`, `MALLOC_MMAP_THRESHOLD_` at their 32 MB
  ceiling, `MALLOC_TOP_PAD_`), so a block freed by one step is reused by the next without page faults;
- `jemalloc`, `tcmalloc`: another allocator preloaded (`LD_PRELOAD`; Debian's `libjemalloc2` with the decay and
  background-thread settings Intel's PyTorch CPU guide gives, `libtcmalloc-minimal4`), the usual cure for a
  PyTorch CPU process whose ever-new tensor sizes fragment glibc's heap.

Every arm runs the same batches in the same order (seed 0), so its steps pair with the baseline's one by one.

Per arm: the median step of the first and of the last 16 steps, their ratio (the drift), the mean step, the
process's peak resident memory (`os.wait4`), the compute probe in a fresh process before and after it (a host
that slowed down shows there), and the mean step against the baseline's, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _tables import publish

from proofcheck.allocator import QUIET, TCMALLOC_NAME, find_tcmalloc

_MB = 1 << 20
ARMS: dict[str, dict[str, str]] = {
    "glibc": {},
    "no-trim": {"MALLOC_TRIM_THRESHOLD_": str(4096 * _MB), "MALLOC_MMAP_THRESHOLD_": str(32 * _MB),
                "MALLOC_TOP_PAD_": str(256 * _MB)},
    "jemalloc": {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                 "MALLOC_CONF": "oversize_threshold:1,background_thread:true,metadata_thp:auto,"
                                "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
    # the library and settings the demo preloads (proofcheck.allocator); a bare name where it is not installed
    "tcmalloc": {"LD_PRELOAD": find_tcmalloc() or TCMALLOC_NAME, **QUIET},
}
PACKAGES = {"jemalloc": "libjemalloc2", "tcmalloc": "libtcmalloc-minimal4"}   # the Debian package of each preload
WINDOW = 16   # steps in each of the medians the drift compares


def run_arm(name: str, env: dict[str, str], model: Path, out: Path, steps: int) -> dict[str, Any]:
    """One warm-up in `out/name` with `env` added: its step times and peak RSS (reused when already finished)."""
    from proofcheck.app.demo import DemoConfig, build_curriculum, sft_run

    work = out / name
    done = work / "arm.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    work.mkdir(parents=True, exist_ok=True)
    cfg = DemoConfig(workdir=work, sft_steps=steps)
    cmd = sft_run(cfg, model, build_curriculum(cfg), None).command()
    print(f"[sft_drift] {name}: {' '.join(f'{k}={v}' for k, v in env.items()) or '(environment as it is)'}",
          flush=True)
    probe_before = probe()
    t0 = time.perf_counter()
    with open(work / "sft.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"arm {name}: the warm-up failed; see {work / 'sft.log'}")
    step_s = json.loads((work / "sft" / "sft_plan.json").read_text(encoding="utf-8"))["step_s"]
    row = {"env": env, "steps": len(step_s), "wall_s": round(time.perf_counter() - t0, 1),
           "peak_rss_gb": round(usage.ru_maxrss / _MB, 2), **drift(step_s),   # ru_maxrss is in KiB on Linux
           "probe_gflops": [probe_before, probe()]}
    done.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return row


def probe() -> float:
    """The demo's two-second compute probe (`demo_estimate.probe_gflops`, bf16 where native) in a fresh process:
    taken before and after each arm, it tells a host that slowed down from a process that did."""
    code = ("from proofcheck.precision import choose_dtype; from proofcheck.app.demo_estimate import probe_gflops; "
            "print(probe_gflops(choose_dtype(None, device='cpu').dtype))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return round(float(out.split()[-1]), 1)


def drift(step_s: list[float], window: int = WINDOW) -> dict[str, float]:
    """The median of the first and of the last `window` steps, their ratio and the mean step.

    >>> drift([1.0, 1.0, 2.0, 2.0], window=2)
    {'first_s': 1.0, 'last_s': 2.0, 'drift': 2.0, 'mean_s': 1.5}
    """
    first, last = statistics.median(step_s[:window]), statistics.median(step_s[-window:])
    return {"first_s": round(first, 3), "last_s": round(last, 3), "drift": round(last / first, 3),
            "mean_s": round(statistics.fmean(step_s), 3)}


def table(rows: dict[str, dict[str, Any]]) -> str:
    base = next(iter(rows.values()))
    lines = [f"| arm | steps | first {WINDOW} (median s) | last {WINDOW} | drift | mean step s | peak RSS GB | "
             f"probe GFLOP/s before, after | mean vs {next(iter(rows))} |", "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    lines += [f"| {name} | {r['steps']} | {r['first_s']:.2f} | {r['last_s']:.2f} | {r['drift']:.2f}x | "
              f"{r['mean_s']:.2f} | {r['peak_rss_gb']:.1f} | {r['probe_gflops'][0]:.0f}, {r['probe_gflops'][1]:.0f} | "
              f"{base['mean_s'] / r['mean_s']:.2f}x |" for name, r in rows.items()]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=64, help="SFT steps per arm (the demo's 64)")
    ap.add_argument("--model", type=Path, default=Path("runs/smollm2"), help="the base model folder "
                    "(`proofcheck model smollm2 --out runs/smollm2`)")
    ap.add_argument("--out", type=Path, default=Path("runs/sft-drift"), help="one folder per arm; finished arms "
                    "are reused")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma list of {', '.join(ARMS)} (the first is the "
                    "baseline)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    names = args.arms.split(",")
    if unknown := [n for n in names if n not in ARMS]:
        ap.error(f"unknown arm(s) {unknown}: choose from {', '.join(ARMS)}")
    if args.steps < 2 * WINDOW:
        ap.error(f"--steps {args.steps}: at least {2 * WINDOW}, so the first and last {WINDOW} steps do not overlap")
    if missing := [n for n in names if not Path(ARMS[n].get("LD_PRELOAD", "/")).exists()]:
        ap.error(f"arm(s) {missing} preload a library this machine lacks: `apt-get install "
                 f"{' '.join(PACKAGES[n] for n in missing)}`")
    if not (args.model / "config.json").is_file():
        ap.error(f"no model in {args.model}: run `proofcheck model smollm2 --out {args.model}` first")
    rows = {name: run_arm(name, ARMS[name], args.model, args.out, args.steps) for name in names}
    return publish(args.out, "SFT_DRIFT.md", rows, table, args.json)


if __name__ == "__main__":
    sys.exit(main())
