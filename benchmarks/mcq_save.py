"""Benchmark the MCQ harness's saving: whole-file rewrite per item (before) vs journal + snapshots (after).

    .venv/bin/python benchmarks/mcq_save.py [--quick] [--items N]

Runs the real harness (`prepare_month` + `run_month` + `McqClient`, vllm backend) on a synthetic
month of 10,000 items (1,000 with --quick) against a scripted OpenAI-compatible server on
127.0.0.1 that answers every request at once, so saving is what limits the run. "before" is the
old policy, reproduced here by subclassing `MonthRun`: rewrite and fsync the whole results file
after every item (O(n) per item, O(n^2) per month). "after" is the shipped one: one fsynced
journal line per item plus atomic snapshots on the geometric/time policy (O(1) amortised per item).

"after" runs the whole month. "before" would write about n/2 times the final file (28 GB for
10,000 items) and run for tens of minutes, so it stops after `--before-budget` seconds (90 by
default; it finishes the chunk of 500 items it is in) and reports what it measured on the items it finished: its items/s is an upper bound
(it only slows down as the file grows), so the speed-up shown is a lower bound; its bytes for the
whole month are also given, projected from the measured record size (sum of k/n x final file
over k = 1..n). Ratios are measured in the same run. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from proofcheck.bench.mcq_backends import BackendSettings, McqClient
from proofcheck.bench.mcq_run import MonthRun, RunConfig, prepare_month, run_month
from proofcheck.serve.scripted import Reply, ScriptedServer

MONTH = "209912"
CONCURRENCY = 16


def write_month(data_dir: Path, n: int) -> None:
    """A hard-split file of `n` distinct items in the release's shape."""
    items = [{"id": f"item-{i:05d}",
              "mcq": {"question": f"Which statement about the object number {i} holds? " + "x " * 40,
                      "correct_choice": {"label": "A", "text": f"The right statement {i}."},
                      "choices": [{"label": lab, "text": f"A wrong statement {lab}{i}."} for lab in "BCDE"],
                      "meta": {"score": 5}},
              "sketch": "A short proof sketch."} for i in range(n)]
    path = data_dir / MONTH / "hard" / f"qaEval_{MONTH}_ge5_hard.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(items), encoding="utf-8")


class RewriteEveryItem(MonthRun):
    """The old save policy: the whole results file rewritten atomically (and fsynced) after each item."""

    def start(self, complete: bool) -> dict[str, Any]:
        return self.save(complete)

    def add(self, record: dict[str, Any]) -> None:
        self.records[record["id"]] = record
        self.save()

    def finish(self) -> dict[str, Any]:
        return self.save(complete=True)


def run_once(url: str, data_dir: Path, results_dir: Path, cls: type[MonthRun],
             budget_s: float = float("inf")) -> dict[str, float]:
    """Run the month with save policy `cls`; past `budget_s`, start no new chunk of 500 items."""
    settings = BackendSettings(backend="vllm", model="scripted", base_url=url, temperature=1.0, top_p=0.95,
                               max_retries=0)
    cfg = RunConfig(months=[MONTH], settings=settings, data_dir=data_dir, results_dir=results_dir,
                    concurrency=CONCURRENCY)
    run, pending = prepare_month(cfg, MONTH)
    run.__class__ = cls  # same state, the policy under test

    chunks = [pending] if budget_s == float("inf") else [pending[i:i + 500] for i in range(0, len(pending), 500)]

    async def go() -> None:
        async with McqClient(settings) as client:
            for chunk in chunks:
                if time.perf_counter() - t0 > budget_s:
                    return
                await run_month(cfg, run, chunk, client)

    t0 = time.perf_counter()
    asyncio.run(go())
    took = time.perf_counter() - t0
    doc = json.loads(run.path.read_text(encoding="utf-8"))  # valid JSON, also when stopped
    done = len(doc["detailed_results"])
    assert done == len(run.records) and not any(r["error"] for r in doc["detailed_results"])
    return {"items": done, "complete": done == len(run.items), "seconds": took, "items_s": done / took,
            "bytes": run.bytes_written, "final_bytes": run.path.stat().st_size}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1,000 items instead of 10,000")
    ap.add_argument("--items", type=int, help="month size (overrides --quick)")
    ap.add_argument("--before-budget", type=float, default=90.0, help="seconds the 'before' run may take")
    args = ap.parse_args()
    n = args.items or (1_000 if args.quick else 10_000)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(lambda req, i: Reply("So: \\boxed{A}")) as srv:
        data_dir = Path(tmp) / "data"
        write_month(data_dir, n)
        for name, cls, budget in (("after", MonthRun, float("inf")),
                                  ("before", RewriteEveryItem, args.before_budget)):
            rows[name] = run_once(srv.url, data_dir, Path(tmp) / name, cls, budget)
            print(f"{name}: {rows[name]['items']} items in {rows[name]['seconds']:.1f} s", file=sys.stderr,
                  flush=True)
    b, a = rows["before"], rows["after"]
    assert a["complete"], "the 'after' run must finish the month"
    full = a["final_bytes"]
    projected = sum(full * k / n for k in range(1, n + 1))  # the old policy writes k records after item k
    print(f"MCQ harness saves, {n:,}-item month, concurrency {CONCURRENCY}, scripted server on 127.0.0.1 "
          f"(final results file {full / 2**20:.1f} MiB)\n")
    print("| save policy | items done | wall s | items/s | bytes written | bytes for the month |")
    print("|---|---:|---:|---:|---:|---:|")
    before_month = (f"{b['bytes'] / 2**20:,.0f} MiB" if b["complete"]
                    else f"{projected / 2**20:,.0f} MiB (projected)")
    print(f"| before: rewrite whole file per item | {b['items']:,}"
          f"{'' if b['complete'] else ' (stopped at budget)'} | {b['seconds']:.1f} | {b['items_s']:.0f} | "
          f"{b['bytes'] / 2**20:,.1f} MiB | {before_month} |")
    print(f"| after: journal line per item + snapshots | {a['items']:,} | {a['seconds']:.1f} | "
          f"{a['items_s']:.0f} | {a['bytes'] / 2**20:,.1f} MiB | {a['bytes'] / 2**20:,.1f} MiB |")
    month_before = b["bytes"] if b["complete"] else projected
    bound = "" if b["complete"] else " (a lower bound: 'before' was stopped early and only slows down)"
    print(f"\nafter / before: items/s x{a['items_s'] / b['items_s']:.1f}{bound}; bytes for the month "
          f"1/{month_before / a['bytes']:,.0f}; after writes {a['bytes'] / full:.1f}x the final file, "
          f"before {month_before / full:,.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
