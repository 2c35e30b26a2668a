"""Benchmark: 8-pass verification on the real SmolLM2-135M, against the engine, a naive loop and the hardware.

One workload in every mode: P synthetic proofs (half valid, half flawed: `balanced_tasks`),
k=8 passes at temperature 1.0, the same fixed max tokens, no reference solution in the prompt
(as VerifierBench runs), proof j seeded j*100. Modes:
  (a) the raw vLLM engine in-process (`vllm.LLM.chat`, n=8 per proof, all proofs at once): the ceiling;
  (b) `proofcheck serve --model` (the same vLLM engine, in-process in the service) over HTTP, one
      concurrent client per proof, all passes: verifications/s as a share of (a) (goal >= 0.9);
  (c) a naive loop: one pass per request (passes=1), one proof at a time, as the reference
      release's scripts call an endpoint: (b) / (c) (goal >= 15x);
  (d) (b) with early reject (the service's default): tokens generated / all passes' tokens
      (goal <= 0.7) and the share of proofs whose decision equals (b)'s on the same seeds (goal 1.0);
  (e) one passes=8 request (n=8, prefix shared) vs eight concurrent passes=1 requests per proof,
      verifications/s ratio, median and range over R repeats.
With `--service endpoint` the service fronts a vLLM OpenAI server (`proofcheck serve --endpoint`)
and (c) and (e) call that server directly (`/v1/chat/completions`, (c) not streamed), exactly as
the release's scripts would.
The decode rate of (a)'s batch (P x 8 sequences, fixed length: `ignore_eos`, prefill timed apart)
is divided by the roofline of this machine measured in the same run (`roofline.py`).
(a) and (b) are each the median of R runs, after a warm-up with the whole workload.
Stage (a) runs in a child process so its engine's memory is returned before the server starts.
Both engines run with the vLLM-CPU environment of `proofcheck.serve.engine_args.cpu_env` (on
machines with <= 4 cores no core is held back from the model's threads).

    .venv/bin/python benchmarks/serve_real.py [--quick] [--model DIR] [--proofs P] [--max-tokens T]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PASSES = 8
NAME = "smollm2"


def tasks_for(n: int) -> list[dict]:
    from proofcheck.data.synth import balanced_tasks

    return balanced_tasks(n, seed=7)  # half valid, half flawed


def engine_stage(model: str, n_proofs: int, max_tokens: int, repeats: int = 1) -> dict[str, Any]:
    """(a) and the decode measurement on an in-process `vllm.LLM` (run in a child process); (a)'s
    wall time is the median of `repeats` runs with the same seeds, its tokens the last run's (bf16
    results depend a little on how requests are batched, so seeded runs can differ by a few tokens).
    The dtype is `proofcheck.precision`'s (bf16 on GPUs and CPUs with native bf16, fp32 elsewhere)."""
    from serve_unanimity import model_style
    from vllm import LLM, SamplingParams

    from proofcheck.precision import choose_dtype
    from proofcheck.protocol import verifier_messages
    from proofcheck.serve.engine_args import engine_kwargs

    style = model_style(model)  # the style `proofcheck serve --model` reads from the same folder
    convs = [verifier_messages(t["problem"], t["steps"], None, style) for t in tasks_for(n_proofs)]
    llm = LLM(model=model, seed=0, max_model_len=4096,
              **engine_kwargs(max_model_len=4096, dtype=choose_dtype(device="auto").dtype))

    def run(tokens: int, ignore_eos: bool = False) -> tuple[float, list[Any]]:
        params = [SamplingParams(n=PASSES, temperature=1.0, max_tokens=tokens, seed=j * 100, ignore_eos=ignore_eos)
                  for j in range(len(convs))]
        t0 = time.perf_counter()
        outs = llm.chat(convs, params, use_tqdm=False)
        return time.perf_counter() - t0, outs

    run(4)  # warm-up: first-call costs are not the engine's throughput
    timed = [run(max_tokens) for _ in range(repeats)]
    wall, outs = statistics.median(w for w, _ in timed), timed[-1][1]
    prefill_s, first = run(1, ignore_eos=True)
    fixed_s, fixed = run(max_tokens, ignore_eos=True)
    decoded = sum(len(c.token_ids) for o in fixed for c in o.outputs) - sum(len(o.outputs) for o in fixed)
    prompt_tokens = [len(o.prompt_token_ids) for o in first]
    llm.llm_engine.engine_core.shutdown()
    return {"wall_s": wall, "tokens": sum(len(c.token_ids) for o in outs for c in o.outputs), "n": len(outs),
            "prefill_s": prefill_s, "fixed_s": fixed_s, "decode_tok_s": decoded / max(fixed_s - prefill_s, 1e-9),
            "batch": sum(len(o.outputs) for o in fixed), "prompt_tokens_mean": statistics.fmean(prompt_tokens)}


async def _verify(http: Any, url: str, j: int, t: dict, max_tokens: int, all_passes: bool, passes: int = PASSES,
                  seed_offset: int = 0) -> dict:
    """One `POST /v1/verify` to our service; proof j is seeded j*100 (+ offset for a split pass)."""
    r = await http.post(url + "/v1/verify", json={"problem": t["problem"], "steps": t["steps"], "passes": passes,
                                                  "all_passes": all_passes, "seed": j * 100 + seed_offset,
                                                  "max_tokens": max_tokens})
    if r.status_code != 200:
        raise RuntimeError(f"proofcheck serve answered {r.status_code}: {r.text[:300]}")
    return r.json()


async def service_mode(url: str, tasks: list[dict], max_tokens: int, all_passes: bool,
                       split: bool = False) -> dict[str, Any]:
    """(b)/(d): one concurrent client per proof against `proofcheck serve`; `split`: eight
    concurrent passes=1 requests per proof instead of one passes=8 request ((e) in-process)."""
    import httpx

    async def one(http: httpx.AsyncClient, j: int, t: dict) -> dict:
        if not split:
            return await _verify(http, url, j, t, max_tokens, all_passes)
        parts = await asyncio.gather(*(_verify(http, url, j, t, max_tokens, True, 1, i) for i in range(PASSES)))
        return {"usage": {"completion_tokens": sum(p["usage"]["completion_tokens"] for p in parts)},
                "decision": "reject" if any(p["decision"] == "reject" for p in parts) else "accept",
                "votes": {k: sum(p["votes"][k] for p in parts) for k in ("error", "cancelled")}}

    async with httpx.AsyncClient(timeout=httpx.Timeout(3600), limits=httpx.Limits(max_connections=256)) as http:
        await one(http, 0, tasks[0])  # warm-up, not timed
        t0 = time.perf_counter()
        bodies = await asyncio.gather(*(one(http, j, t) for j, t in enumerate(tasks)))
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "n": len(bodies), "tokens": sum(b["usage"]["completion_tokens"] for b in bodies),
            "decisions": [b["decision"] for b in bodies], "errors": sum(b["votes"]["error"] for b in bodies),
            "cancelled": sum(b["votes"]["cancelled"] for b in bodies)}


async def naive_loop(vllm_url: str, tasks: list[dict], max_tokens: int, style: str = "full") -> dict[str, Any]:
    """(c): the reference scripts' way: one pass per (non-streamed) chat request, one proof at a time."""
    import httpx

    from proofcheck.protocol import verifier_messages
    from proofcheck.verification import parse_pass, summarise

    tokens, decisions = 0, []
    async with httpx.AsyncClient(timeout=httpx.Timeout(3600)) as http:
        t0 = time.perf_counter()
        for j, t in enumerate(tasks):
            msgs = verifier_messages(t["problem"], t["steps"], None, style)
            passes = []
            for i in range(PASSES):
                r = await http.post(vllm_url + "/chat/completions", json={
                    "model": NAME, "messages": msgs, "n": 1, "temperature": 1.0, "max_tokens": max_tokens,
                    "seed": j * 100 + i})
                r.raise_for_status()
                body = r.json()
                n_tok = int(body["usage"]["completion_tokens"])
                tokens += n_tok
                choice = body["choices"][0]
                passes.append(parse_pass(choice["message"]["content"] or "", len(t["steps"]),
                                         choice["finish_reason"], n_tok))
            decisions.append(summarise(passes, "unanimous").decision)
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "n": len(tasks), "tokens": tokens, "decisions": decisions}


async def naive_service_loop(url: str, tasks: list[dict], max_tokens: int) -> dict[str, Any]:
    """(c) through our service: one passes=1 request at a time, one proof at a time."""
    import httpx

    tokens, decisions = 0, []
    async with httpx.AsyncClient(timeout=httpx.Timeout(3600)) as http:
        t0 = time.perf_counter()
        for j, t in enumerate(tasks):
            parts = [await _verify(http, url, j, t, max_tokens, True, 1, i) for i in range(PASSES)]
            tokens += sum(p["usage"]["completion_tokens"] for p in parts)
            decisions.append("reject" if any(p["decision"] == "reject" for p in parts) else "accept")
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "n": len(tasks), "tokens": tokens, "decisions": decisions}


def run_engine_child(model: str, n_proofs: int, max_tokens: int, repeats: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--stage", "engine", "--model", model, "--proofs", str(n_proofs),
                           "--max-tokens", str(max_tokens), "--repeats", str(repeats)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"stage (a), the in-process engine, failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_service(service: str, tasks: list[dict], max_tokens: int, repeats: int,
                    naive: Callable[[], dict[str, Any]], split_wall: Callable[[bool], float]) -> dict[str, Any]:
    """(b)-(e) against `proofcheck serve` at `service`: (b) is the run with the median wall time of
    `repeats`; `naive()` runs (c); `split_wall(split)` times one (e) run, eight n=1 requests per
    proof when `split`, else one n=8 request."""
    # warm-up with the whole workload, as (a) does, so the engine has met every batch size first:
    # after a one-proof warm-up, three runs in a row gave 0.66, 0.76, 0.84 verifications/s
    asyncio.run(service_mode(service, tasks, max_tokens, all_passes=True))
    b_runs = [asyncio.run(service_mode(service, tasks, max_tokens, all_passes=True)) for _ in range(repeats)]
    out = {"b": sorted(b_runs, key=lambda r: r["wall_s"])[len(b_runs) // 2],
           "d": asyncio.run(service_mode(service, tasks, max_tokens, all_passes=False)),
           "c": naive(), "e": []}
    for r in range(repeats):  # alternate the order so drift in the machine's load hits both
        walls = {split: split_wall(split) for split in ((False, True) if r % 2 == 0 else (True, False))}
        out["e"].append(walls[True] / walls[False])  # n=8 verif/s over 8 x n=1 verif/s
    return out


def inprocess_stage(model: str, tasks: list[dict], max_tokens: int, repeats: int, naive_proofs: int
                    ) -> dict[str, Any]:
    """(b)-(e) on `proofcheck serve --model` (its own in-process vLLM engine), everything over its HTTP API."""
    from proofcheck.precision import choose_dtype
    from proofcheck.process import ServiceProcess, free_port

    workdir = Path(tempfile.mkdtemp(prefix="bench-serve-real-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # the service's engine sets its own vLLM-CPU environment (`engine_args.cpu_env`)
    with ServiceProcess([sys.executable, "-m", "proofcheck.app.cli", "serve", "--model", model, "--served-model-name",
                         NAME, "--port", str(port), "--max-queue", "256", "--max-tokens", str(max_tokens),
                         "--engine-arg", f"dtype={choose_dtype(device='auto').dtype}", "--log-level", "warning"],
                        url + "/health", workdir / "serve.log"):
        return measure_service(
            url, tasks, max_tokens, repeats,
            naive=lambda: asyncio.run(naive_service_loop(url, tasks[:naive_proofs], max_tokens)),
            split_wall=lambda split: asyncio.run(service_mode(url, tasks, max_tokens, True, split=split))["wall_s"])


def serve_stage(model: str, tasks: list[dict], max_tokens: int, repeats: int, naive_proofs: int) -> dict[str, Any]:
    """(b)-(e) on one vLLM OpenAI server with `proofcheck serve --endpoint` in front of it; (c) and
    (e) call that server directly."""
    from serve_unanimity import model_style, run_mode, start_vllm

    from proofcheck.precision import choose_dtype
    from proofcheck.process import ServiceProcess, free_port

    workdir = Path(tempfile.mkdtemp(prefix="bench-serve-real-"))
    vllm, url = start_vllm(model, workdir, name=NAME, extra=["--dtype", choose_dtype(device="auto").dtype])
    style = model_style(model)  # the service fronts vLLM's copy of the model: no card to read, so say it
    try:
        port = free_port()
        service = f"http://127.0.0.1:{port}"
        with ServiceProcess([sys.executable, "-m", "proofcheck.app.cli", "serve", "--endpoint", url, "--endpoint-model",
                             NAME, "--prompt-style", style, "--port", str(port), "--max-queue", "256",
                             "--max-tokens", str(max_tokens), "--log-level", "warning"],
                            service + "/health", workdir / "serve.log"):
            return measure_service(
                service, tasks, max_tokens, repeats,
                naive=lambda: asyncio.run(naive_loop(url, tasks[:naive_proofs], max_tokens, style)),
                split_wall=lambda split: asyncio.run(run_mode("b" if split else "a", url, tasks, max_tokens,
                                                              len(tasks), name=NAME, reference=False,
                                                              style=style))["wall"])
    finally:
        vllm.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 proofs, 64 tokens, 3 repeats (~5 min on 2 cores)")
    ap.add_argument("--model", help="model folder (default: runs/smollm2, built with `proofcheck model smollm2`)")
    ap.add_argument("--proofs", type=int, help="proofs per mode (default 16, quick 4)")
    ap.add_argument("--max-tokens", type=int, help="max tokens per pass (default 256, quick 64)")
    ap.add_argument("--repeats", type=int, help="runs of (a) and (b) (their medians are reported) and of "
                    "(e) (default 5, quick 3)")
    ap.add_argument("--naive-proofs", type=int, help="(c) runs on the first N proofs only (a rate per proof; "
                    "default all): one pass at a time is slow")
    ap.add_argument("--service", choices=("inprocess", "endpoint"), default="inprocess",
                    help="how `proofcheck serve` gets its passes: its own in-process engine (--model; (c) and "
                         "(e) go through the service), or fronting a vLLM OpenAI server (--endpoint; (c) and (e) "
                         "then call that server directly, as the release's scripts do)")
    ap.add_argument("--stage", choices=("all", "engine"), default="all", help=argparse.SUPPRESS)
    args = ap.parse_args()
    n_proofs = args.proofs or (4 if args.quick else 16)
    max_tokens = args.max_tokens or (64 if args.quick else 256)
    repeats = args.repeats or (3 if args.quick else 5)
    if args.stage == "engine":
        print(json.dumps(engine_stage(args.model, n_proofs, max_tokens, repeats)))
        return 0

    from _figures import emit, real_model
    from roofline import (
        SMOLLM2_135M,
        Shape,
        best_of,
        current_device,
        decode_roofline,
        measure_machine,
        value_bytes,
    )
    from transformers import AutoConfig

    model = str(real_model(args.model))
    shape = Shape.from_config(AutoConfig.from_pretrained(model))
    device = current_device()
    machine = measure_machine(threads=2, quick=args.quick, device=device)
    name = (f"SmolLM2-135M-Instruct ({shape.params / 1e6:.1f} M params)" if shape == SMOLLM2_135M
            else f"{Path(model).name} ({shape.params / 1e9:.2f} B params)")
    a = run_engine_child(model, n_proofs, max_tokens, repeats)
    tasks = tasks_for(n_proofs)
    stage = inprocess_stage if args.service == "inprocess" else serve_stage
    s = stage(model, tasks, max_tokens, repeats, min(args.naive_proofs or n_proofs, n_proofs))
    # measured again once the engines are gone: one measurement here came out at half the peak
    # that roofline.py measured a minute earlier, which would flatter decode_vs_roofline
    before, after = machine, measure_machine(threads=2, quick=args.quick, device=device)
    machine = best_of(before, after)
    b, c, d, e = s["b"], s["c"], s["d"], s["e"]
    vps = {k: r["n"] / r["wall_s"] for k, r in (("a", a), ("b", b), ("c", c), ("d", d))}
    context = a["prompt_tokens_mean"] + max_tokens / 2
    roof = decode_roofline(shape, a["batch"], context, machine["bandwidth_B_s"], machine["matmul_peak_flop_s"],
                           value_bytes(machine))
    short = {"bfloat16": "bf16", "float32": "fp32"}[machine["compute_dtype"]]
    agree = sum(x == y for x, y in zip(b["decisions"], d["decisions"], strict=True)) / len(tasks)
    figures = {
        "model": f"{name}, {short} ({machine['dtype_reason']}), vLLM on {'GPU' if device == 'cuda' else 'CPU'}",
        "serve.compute_dtype": machine["compute_dtype"],
        "serve.proofs": n_proofs, "serve.passes": PASSES, "serve.max_tokens": max_tokens,
        "serve.service_engine": args.service, "serve.naive_proofs": c["n"],
        "serve.engine_verifications_per_s": round(vps["a"], 4),
        "serve.service_verifications_per_s": round(vps["b"], 4),
        "serve.naive_verifications_per_s": round(vps["c"], 4),
        "serve.service_vs_engine": round(vps["b"] / vps["a"], 3),
        "serve.vs_naive_loop": round(vps["b"] / vps["c"], 3),
        "serve.early_reject_token_ratio": round(d["tokens"] / max(b["tokens"], 1), 3),
        "serve.early_reject_decision_agreement": round(agree, 3),
        "serve.n8_vs_8n1_median": round(statistics.median(e), 3),
        "serve.n8_vs_8n1_min": round(min(e), 3), "serve.n8_vs_8n1_max": round(max(e), 3),
        "serve.decode_tok_s": round(a["decode_tok_s"], 1),
        "serve.decode_batch": a["batch"],
        "serve.decode_roofline_tok_s": round(roof["roofline_tok_s"], 1),
        "serve.decode_roofline_bound": roof["bound"],
        "serve.roofline_bandwidth_GB_s": round(machine["bandwidth_B_s"] / 1e9, 1),
        "serve.roofline_peak_GFLOP_s": round(machine["matmul_peak_flop_s"] / 1e9, 1),
        "serve.decode_vs_roofline": round(a["decode_tok_s"] / roof["roofline_tok_s"], 3),
    }
    emit(figures)
    print(f"\n### serve_real: {figures['model']}; {n_proofs} proofs (half valid, half flawed), k={PASSES}, "
          f"max_tokens={max_tokens}, no reference solution; same seeds in every mode\n")
    print("| mode | verifications/s | completion tokens | tokens/s | ratio | goal |\n|---|---:|---:|---:|---|---|")
    for key, label in (("a", "(a) raw vLLM engine in-process, n=8, all at once"),
                       ("b", f"(b) `proofcheck serve` ({args.service} engine) over HTTP, concurrent clients, "
                             "all passes"),
                       ("c", f"(c) naive loop: n=1 per request, one proof at a time ({c['n']} proofs)"),
                       ("d", "(d) `proofcheck serve`, early reject")):
        r = {"a": a, "b": b, "c": c, "d": d}[key]
        ratio, goal = {"a": ("1.00 (ceiling)", ""),
                       "b": (f"{figures['serve.service_vs_engine']:.2f} of (a)", ">= 0.9"),
                       "c": (f"(b) = {figures['serve.vs_naive_loop']:.1f}x (c)", ">= 15x"),
                       "d": (f"tokens {figures['serve.early_reject_token_ratio']:.2f} of (b), decisions "
                             f"agree {agree:.2f}", "<= 0.7 at 1.0")}[key]
        print(f"| {label} | {vps[key]:.3f} | {r['tokens']} | {r['tokens'] / r['wall_s']:.0f} | {ratio} | {goal} |")
    print(f"| (e) one n=8 request vs 8 x n=1 (verif/s ratio, {repeats} repeats) | | | "
          f"| median {figures['serve.n8_vs_8n1_median']:.2f}x (range {figures['serve.n8_vs_8n1_min']:.2f}-"
          f"{figures['serve.n8_vs_8n1_max']:.2f}) | |")
    print(f"\nDecode: {a['batch']} sequences x {max_tokens} tokens (ignore_eos), mean context {context:.0f}: "
          f"{a['decode_tok_s']:.0f} tok/s (prefill {a['prefill_s']:.1f} s timed apart); roofline "
          f"{roof['roofline_tok_s']:.0f} tok/s ({roof['bound']} bound: bandwidth {roof['bandwidth_bound_tok_s']:.0f}, "
          f"compute {roof['compute_bound_tok_s']:.0f}) from {machine['bandwidth_B_s'] / 1e9:.1f} GB/s and "
          f"{machine['matmul_peak_flop_s'] / 1e9:.0f} {short} GFLOP/s measured before and after the engines (best of "
          f"{before['matmul_peak_flop_s'] / 1e9:.0f} and {after['matmul_peak_flop_s'] / 1e9:.0f} GFLOP/s): "
          f"**{figures['serve.decode_vs_roofline']:.2f} of the roofline** (goal >= 0.5)")
    return 0 if b["errors"] == 0 and d["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
