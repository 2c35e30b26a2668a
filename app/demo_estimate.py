"""How long the demo takes on this machine, before it starts, and how many GRPO steps it runs.

The demo's learning needs a fixed amount of work: a 48-step SFT warm-up and at least 40 GRPO steps
(+0.05 needs about 40: docs/measurements/2026-12-06-demo-fresh-clone.md). Its wall clock is then a
function of the machine's speed, and the demo says what it will be before it starts:

1. `probe_step_s`: a two-second probe of the compute the SFT step is made of (a Linear layer of
   SmolLM2's MLP shape, forward and backward, in the compute dtype) gives an SFT step estimate;
2. `estimate`: every stage in units of that step (`COSTS`, measured on the hosts named) plus the
   fixed seconds of engine starts and saving; the first line of the demo's output is its total;
3. after the first SFT steps the same estimate is redone from their measured median, and after
   the warm-up `grpo_steps` sizes GRPO: at least `GRPO_FLOOR` steps, more (to the recipe's cap)
   where they still fit in `TARGET_S` (20 minutes).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

GRPO_FLOOR = 40          # the fewest GRPO steps the demo runs: ~+0.05 in 40 steps on three seeds (mean +0.051)
TARGET_S = 1200.0        # where the machine is fast enough, GRPO gets more steps while the whole stays in this
SCORE_IN_FLIGHT = 32     # passes the scoring keeps in flight (demo_plan.score_concurrency)


@dataclass(frozen=True)
class Costs:
    """A compute dtype's stage costs in SFT steps (u) and fixed seconds."""

    grpo_step_u: float   # one GRPO step (4 proofs x 4 completions, generation + training)
    pass_u: float        # one offline verifier pass on the trainer's engine (held-out evaluation, pool refresh)
    wave_u: float        # one wave of SCORE_IN_FLIGHT served passes, every pass run
    wave_early_u: float  # the same with unanimity's early stop (a reject cancels the proof's other passes)
    probe_gflop: float   # the probe's GFLOP/s that make one SFT step a second: step_s = probe_gflop / measured


# bf16 (2-core avx512_bf16 hosts): GRPO step 9.35 / 4.31, 14.0 / 5.95, 17.4 / 8.2 s per SFT step (2.1-2.35, demos of
# 2026-12-05/06 with the TRL SFTTrainer warm-up) and 14.75 / 5.16 (2.86, the demo of 2026-12-06 evening, whose
# answer-only warm-up steps are shorter); held-out 64 x 4 passes 36-46 s at a 5.16 s step, the 64 x 2 pool refresh
# 25-31 s (0.027-0.045 a pass); served waves 0.41-0.61 (8 passes, early stop) and 1.0-1.1 (every pass). fp32 (2-core
# AVX2 host, 2026-12-04): GRPO step 6.2, a pass 0.07, a wave 2.2. probe_gflop, bf16: the demo's probe read 1255
# GFLOP/s on a 2-core Xeon (Sapphire Rapids, AMX) where its SFT step then took 5.16 s (2026-12-06,
# docs/measurements/2026-12-06-demo-any-host.md); fp32: the AVX2 host's 177 GFLOP/s matmul against its 21-27 s step
# (2026-12-04), a rougher figure.
COSTS = {"bfloat16": Costs(grpo_step_u=2.8, pass_u=0.035, wave_u=1.1, wave_early_u=0.8, probe_gflop=6500.0),
         "float32": Costs(grpo_step_u=6.2, pass_u=0.07, wave_u=2.2, wave_early_u=2.2, probe_gflop=4400.0)}
# the SFT step on a preloaded allocator against glibc's (proofcheck.allocator), which `probe_gflop` was measured on:
# TCMalloc 4.55 / 6.40 s over the same 48 warm-up steps (benchmarks/sft_drift.py) and a 4.7 s demo warm-up where the
# glibc-calibrated probe said 6.2 (2-core Xeon, bf16, 2026-12-07)
ALLOCATOR_STEP = {"tcmalloc": 0.75}
MODEL_BUILD_S = 25.0     # SmolLM2 from the GGUF wheel (a re-run reuses it: 0)
SETUP_S = 10.0           # checking the samples, writing the curriculum, imports
SFT_FIXED_S = 30.0       # loading the model, merging LoRA and saving
GRPO_FIXED_S = 75.0      # loading, the colocated engine's start, merging and saving
SERVE_FIXED_S = 45.0     # `proofcheck serve`'s engine start and stop


@dataclass(frozen=True)
class Work:
    """What the demo will do: the counts the estimate multiplies."""

    sft_steps: int
    grpo_steps: int
    eval_tasks: int
    eval_passes: int
    curve_every: int
    curve_tasks: int
    pool: int                 # uncertainty pool: proofs x passes every `pool_every` steps
    pool_passes: int
    pool_every: int
    prover_n: int             # synthetic prover submissions, every pass run
    prover_passes: int
    shipped: int              # shipped submissions (unanimity, early stop)
    annotated: int            # shipped annotated proofs x repeats
    repeats: int
    model_built: bool = False


def estimate(u: float, work: Work, dtype: str) -> dict[str, float]:
    """Seconds of each stage at an SFT step of `u` seconds (`COSTS[dtype]`); `total` their sum.

    >>> w = Work(64, 40, 64, 4, 8, 16, 64, 2, 4, 32, 8, 25, 48, 1)
    >>> e = estimate(4.3, w, "bfloat16")
    >>> round(e["sft"]), round(e["grpo"]), round(e["score"]), 1000 < e["total"] < 1400
    (305, 865, 114, True)
    """
    c = COSTS[dtype]
    evals = 2 * work.eval_tasks * work.eval_passes
    curve_points = max(0, (work.grpo_steps - 1) // work.curve_every) if work.curve_every else 0
    refreshes = math.ceil(work.grpo_steps / work.pool_every) if work.pool and work.pool_every else 0
    passes = evals + curve_points * work.curve_tasks * work.eval_passes + refreshes * work.pool * work.pool_passes
    prover_waves = math.ceil(work.prover_n * work.prover_passes / SCORE_IN_FLIGHT)
    shipped_waves = math.ceil(work.shipped * work.prover_passes / SCORE_IN_FLIGHT) + math.ceil(work.annotated * work.repeats /
                                                                              SCORE_IN_FLIGHT)
    out = {"setup": SETUP_S + (0.0 if work.model_built else MODEL_BUILD_S),
           "sft": SFT_FIXED_S + work.sft_steps * u,
           "grpo": GRPO_FIXED_S + (work.grpo_steps * c.grpo_step_u + passes * c.pass_u) * u,
           "score": SERVE_FIXED_S + (prover_waves * c.wave_u + shipped_waves * c.wave_early_u) * u}
    out["total"] = sum(out.values())
    return out


def grpo_steps(u: float, work: Work, dtype: str, floor: int = GRPO_FLOOR, target_s: float = TARGET_S) -> int:
    """GRPO steps for this machine: `floor` at least, and more, up to `work.grpo_steps` (the cap), while the
    whole demo's estimate stays within `target_s`.

    >>> w = Work(64, 48, 64, 4, 8, 16, 64, 2, 4, 32, 8, 25, 48, 1)
    >>> grpo_steps(2.0, w, "bfloat16"), grpo_steps(4.3, w, "bfloat16"), grpo_steps(8.2, w, "bfloat16")
    (48, 40, 40)
    """
    best = min(floor, work.grpo_steps)
    for n in range(best + 1, work.grpo_steps + 1):
        if estimate(u, _with(work, grpo_steps=n), dtype)["total"] > target_s:
            break
        best = n
    return best


def work_of(cfg: Any, model_built: bool) -> Work:
    """The counts of a `DemoConfig` (its recipe with its deltas for the uncertainty pool)."""
    from proofcheck.app.demo_plan import _score_items
    from proofcheck.app.launch import with_deltas

    values = with_deltas(cfg.recipe, cfg.deltas)
    shipped, annotated = _score_items()
    pool = int(values.get("uncertainty_pool") or 0)
    return Work(sft_steps=cfg.sft_steps, grpo_steps=cfg.grpo_steps, eval_tasks=cfg.eval_tasks,
                eval_passes=cfg.eval_passes, curve_every=cfg.curve_every or 0, curve_tasks=cfg.curve_tasks, pool=pool,
                pool_passes=int(values.get("uncertainty_passes") or 2), pool_every=int(values.get("uncertainty_every")
                                                                                        or 4),
                prover_n=cfg.prover_n, prover_passes=cfg.passes, shipped=shipped, annotated=annotated, repeats=cfg.repeats,
                model_built=model_built)


def _with(work: Work, **kw: Any) -> Work:
    from dataclasses import replace

    return replace(work, **kw)


def probe_gflops(dtype: str, seconds: float = 1.5) -> float:
    """GFLOP/s of a Linear layer of SmolLM2's MLP shape (576 -> 1536, 2048 tokens), forward and backward to its
    input (LoRA's backward runs through frozen weights), in the compute dtype (bf16: autocast), on this process's
    threads: about what an SFT step is made of."""
    import contextlib

    import torch

    x = torch.randn(2048, 576, requires_grad=True)
    w = torch.randn(1536, 576) * 0.02
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bfloat16" else contextlib.nullcontext()
    flop = 2 * 2 * 2048 * 576 * 1536   # forward, and the backward to the input

    def once() -> None:
        with ctx:
            y = torch.nn.functional.linear(x, w)
        y.float().sum().backward()
        x.grad = None

    for _ in range(3):
        once()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        once()
        n += 1
    return n * flop / (time.perf_counter() - t0) / 1e9


def probe_step_s(dtype: str, allocator: str = "glibc") -> tuple[float, float]:
    """(an SFT step estimate in seconds, the probe's GFLOP/s) on this machine in `dtype`, with the stages running
    on `allocator` (`ALLOCATOR_STEP`: the probe itself runs in this process, on glibc's)."""
    gflops = probe_gflops(dtype)
    return COSTS[dtype].probe_gflop / gflops * ALLOCATOR_STEP.get(allocator, 1.0), gflops


def minutes(seconds: float) -> str:
    """'about 21 minutes' (whole minutes, rounded up: an estimate a user waits for)."""
    return f"about {max(1, math.ceil(seconds / 60))} minutes"


def first_line(total_s: float, u: float, dtype_short: str, grpo: int, source: str) -> str:
    """The demo's first line: how long it will take here, and on what the estimate rests."""
    return (f"This demo will take {minutes(total_s)} on this machine ({dtype_short}; an SFT step of ~{u:.1f} s "
            f"{source}; {grpo} GRPO steps). The estimate is redone after the first SFT steps.")
