"""Benchmark the meta-verifier grader: structural speed, judge concurrency, cache.

    .venv/bin/python benchmarks/reward_grading.py [--quick]

(a) structural grades/s on one core (pinned with sched_setaffinity), against the strict
    parser alone measured on the same outputs (the floor any grader pays);
(b) judge throughput at concurrency 1, 4, 16 against a scripted OpenAI-compatible server on
    127.0.0.1 that answers each call after a fixed 200 ms, as a ratio to the ideal bound
    concurrency / 0.2 s;
(c) the cache hit rate when the same grading is run again (should be 100%), and the re-run's
    time against the first run's.
Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from typing import Any

from proofcheck.data.synth import make_tasks
from proofcheck.parsing import format_verdict, parse_verifier_output
from proofcheck.reward.client import JudgeClient, JudgeConfig
from proofcheck.reward.grading import GradeItem, Grader
from proofcheck.reward.structural import grade_structural
from proofcheck.serve.scripted import Reply, ScriptedServer

DELAY_S = 0.2


def make_outputs(n: int, seed: int = 0) -> list[tuple[str, int, dict[str, Any]]]:
    """(text, n_steps, annotation): gold answers and perturbed ones (a mix of levels)."""
    rng = random.Random(seed)
    out = []
    for t in make_tasks(n, seed=seed):
        k = len(t["steps"])
        choice = rng.random()
        if choice < 0.4:
            text = t["gold_verification"]
        elif choice < 0.9:
            flagged = sorted(rng.sample(range(k), rng.randint(1, min(3, k))))
            text = format_verdict("checked", [(s, f"step {s} looks wrong") for s in flagged], flagged[0])
        else:
            text = "no verdict here"
        out.append((text, k, t["annotation"]))
    return out


def bench_structural(n: int) -> dict[str, float]:
    data = make_outputs(n)
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if affinity:
        os.sched_setaffinity(0, {min(affinity)})
    try:
        t0 = time.perf_counter()
        for text, k, _ in data:
            parse_verifier_output(text, k, "stop")
        parse_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for text, k, ann in data:
            grade_structural(text, k, ann)
        grade_s = time.perf_counter() - t0
    finally:
        if affinity:
            os.sched_setaffinity(0, affinity)
    return {"parse_per_s": n / parse_s, "grade_per_s": n / grade_s}


def _judge_items(n: int, salt: str) -> list[GradeItem]:
    """Items that all reach the judge (both sides say invalid), each a distinct prompt."""
    items = []
    for i, t in enumerate(make_tasks(n, seed=7, kinds=("arithmetic",))):
        f = t["annotation"]["first_fatal_error_step"]
        text = format_verdict(f"{salt} #{i}", [(f, "wrong value")], f)
        items.append(GradeItem(t["problem"], t["steps"], text, t["annotation"]))
    return items


def bench_judge(url: str, concurrency: int, n: int) -> float:
    cfg = JudgeConfig(endpoint=url, model="judge", concurrency=concurrency, max_retries=0, timeout_s=30)
    grader = Grader("hybrid", "training", JudgeClient(cfg))
    items = _judge_items(n, f"c{concurrency}")
    t0 = time.perf_counter()
    results = asyncio.run(grader.grade(items))
    dt = time.perf_counter() - t0
    assert all(r.judge_level is not None for r in results), "scripted judge failed"
    return n / dt


def bench_cache(url: str, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache_dir:
        cfg = JudgeConfig(endpoint=url, model="judge", concurrency=16, max_retries=0, cache_dir=cache_dir)
        items = _judge_items(n, "cache")
        t0 = time.perf_counter()
        asyncio.run(Grader("hybrid", "training", JudgeClient(cfg)).grade(items))
        first_s = time.perf_counter() - t0
        again = JudgeClient(cfg)  # a fresh client, as a re-run of the command would have
        t0 = time.perf_counter()
        asyncio.run(Grader("hybrid", "training", again).grade(items))
        second_s = time.perf_counter() - t0
    return {"hit_rate": again.stats.cache_hits / n, "new_calls": again.stats.calls,
            "first_s": first_s, "second_s": second_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a short run (fewer outputs and judge calls)")
    args = ap.parse_args()
    n_struct = 2000 if args.quick else 20000
    per_conc = {1: 5, 4: 20, 16: 64} if args.quick else {1: 15, 4: 60, 16: 240}
    n_cache = 32 if args.quick else 128

    s = bench_structural(n_struct)
    with ScriptedServer(lambda req, i: Reply("<level>BASIC_MATCH</level>", delay_s=DELAY_S)) as srv:
        judge = {c: bench_judge(srv.url, c, n) for c, n in per_conc.items()}
        cache = bench_cache(srv.url, n_cache)

    rows = [
        (f"(a) structural grading, 1 core ({n_struct} outputs)", f"{s['grade_per_s']:,.0f} grades/s",
         f"parser alone {s['parse_per_s']:,.0f}/s", f"{s['grade_per_s'] / s['parse_per_s']:.2f}"),
    ]
    for c, rate in judge.items():
        ideal = c / DELAY_S
        rows.append((f"(b) judge, concurrency {c} ({per_conc[c]} calls, 200 ms each)", f"{rate:.1f} judgements/s",
                     f"ideal {ideal:.1f}/s", f"{rate / ideal:.2f}"))
    rows.append((f"(c) cache re-run ({n_cache} judgements)",
                 f"hit rate {cache['hit_rate']:.0%}, {cache['new_calls']} new calls, {cache['second_s'] * 1000:.0f} ms",
                 f"first run {cache['first_s'] * 1000:.0f} ms", f"{cache['second_s'] / cache['first_s']:.3f}"))
    print("| measurement | value | baseline (same run) | ratio |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
