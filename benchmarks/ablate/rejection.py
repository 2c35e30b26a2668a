"""The rejection-sampling arm: the SFT start's own verifications of GRPO tasks, kept by the meta-verifier, then SFT.

Expert iteration on the CPU curriculum, for the same wall-clock time as the reference GRPO arm of its seed trained
(its run minus its evaluations, as the SFT control): the SFT start is served by a vLLM server (an OpenAI-compatible
endpoint on 127.0.0.1), `proofcheck data distill` samples `rejection_passes` verifications of each of the first
`rejection_tasks` GRPO tasks and keeps those the structural meta-verifier grades EXACT_MATCH against the task's
exact labels, and `proofcheck.train.sft` continues SFT from the start on the kept verifications (as tasks whose
gold verification is the kept pass) for the time left. Evaluated as every arm is (a GRPO run whose one step at
learning rate 0 changes nothing). A sampling that keeps nothing leaves the start as it is, said in the record.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from proofcheck.app.launch import SftRun

from .arms import grpo, run_record
from .config import AblateConfig, jsonl, run_logged


def distilled_tasks(tasks: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tasks for `proofcheck.train.sft --data`: one per kept verification (`proofcheck data distill`'s sft.jsonl
    rows), the task of its proof with the kept text as its gold verification.

    >>> distilled_tasks([{"proof_id": "a", "problem": "p", "steps": ["s"], "gold_verification": "g"}],
    ...                 [{"provenance": {"proof_id": "a"}, "completion": [{"role": "assistant", "content": "kept"}]}])
    [{'proof_id': 'a', 'problem': 'p', 'steps': ['s'], 'gold_verification': 'kept'}]
    """
    by_id = {t["proof_id"]: t for t in tasks}
    return [{**by_id[r["provenance"]["proof_id"]], "gold_verification": r["completion"][-1]["content"]} for r in rows]


def served_start(cfg: AblateConfig, start: Path, seed: int, env: dict[str, str]) -> Any:
    """A vLLM OpenAI-compatible server of `start` (served as `verifier`), stopped by its handle on exit."""
    from proofcheck.precision import choose_dtype
    from proofcheck.process import ServiceProcess, free_port

    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(start), "--served-model-name",
           "verifier", "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "4096",
           "--seed", str(seed), "--no-enable-chunked-prefill", "--max-num-batched-tokens", "32768",
           "--dtype", choose_dtype(device="cpu").dtype]
    (cfg.out / "logs").mkdir(parents=True, exist_ok=True)
    return ServiceProcess(cmd, f"http://127.0.0.1:{port}/health", cfg.out / "logs" / f"rejection-vllm-s{seed}.log",
                          env={"VLLM_CPU_KVCACHE_SPACE": "1", **env})


def rejection_arm(cfg: AblateConfig, seed: int, start: Path, tasks: list[dict[str, Any]], plain: Any,
                  reference: dict[str, Any] | None, env: dict[str, str], console: Any, stage: Any,
                  endpoint: str | None = None) -> dict[str, Any]:
    """The arm's record for `seed` (module docstring); `endpoint`: sample there instead of serving the start
    (tests: a scripted server)."""
    if reference is None:
        raise RuntimeError("the rejection arm needs the training arm (its GRPO time is the arm's)")
    ref = run_record(reference, seed)
    budget = max(1.0, (ref["wall_s"] or 0) - ref["eval_s"])
    folder = cfg.out / "runs" / f"rejection-s{seed}"
    pool = jsonl(folder / "pool.jsonl", tasks[:cfg.rejection_tasks])
    timing = folder / "distill_s.json"

    def sample() -> dict[str, Any]:
        out = folder / "distill"
        if not timing.is_file():
            t0 = time.perf_counter()
            cmd = [sys.executable, "-m", "proofcheck.app.cli", "data", "distill", "--data", str(pool), "--endpoint",
                   "{url}", "--endpoint-model", "verifier", "--passes", str(cfg.rejection_passes), "--max-tokens",
                   str(cfg.max_tokens), "--seed", str(seed), "--prompt-style", cfg.prompt_style, "--out", str(out),
                   "--json", *(["--resume"] if (out / "manifest.json").is_file() else [])]
            if endpoint is not None:
                run_logged([c.replace("{url}", endpoint) for c in cmd], cfg.out / "logs" / f"rejection-s{seed}.log",
                           env, console)
            else:
                with served_start(cfg, start, seed, env) as server:
                    server.wait_ready(600)
                    url = server.health_url.removesuffix("/health") + "/v1"
                    run_logged([c.replace("{url}", url) for c in cmd],
                               cfg.out / "logs" / f"rejection-s{seed}.log", env, console)
            timing.write_text(json.dumps({"distill_s": round(time.perf_counter() - t0, 1)}))
        return json.loads((out / "summary.json").read_text())

    summary = stage(f"seed {seed}: rejection sampling ({cfg.rejection_passes} passes x {len(tasks[:cfg.rejection_tasks])}"
                    " GRPO tasks from the SFT start, kept at EXACT_MATCH)", sample)
    distill_s = json.loads(timing.read_text())["distill_s"]
    rows = [json.loads(x) for x in (folder / "distill" / "sft.jsonl").open(encoding="utf-8")]
    model = folder / "model"
    left = max(1.0, budget - distill_s)

    def train_and_eval() -> dict[str, Any]:
        nonlocal model
        if not rows:
            model = start
        elif not (model / "sft_plan.json").is_file():  # written last by train.sft
            kept = jsonl(folder / "kept_tasks.jsonl", distilled_tasks(tasks, rows))
            run = SftRun(model=start, out=model, data=kept, steps=100000, lr=cfg.sft_lr, lora_r=cfg.sft_lora_r,
                         seed=seed, prompt_style=cfg.prompt_style, time_budget_s=left)
            run_logged(run.command(), cfg.out / "logs" / f"rejection-sft-s{seed}.log", env, console)
        return grpo(cfg, "rejection-eval", seed, model, plain, env, console,
                    ["--max_steps", "1", "--learning_rate", "0"])

    s = stage(f"seed {seed}: SFT on {len(rows)} kept verifications for {left:.0f} s + its held-out evaluation",
              train_and_eval)
    plan = folder / "model" / "sft_plan.json"
    rec = run_record(s, seed)
    rec.update(steps=(json.loads(plan.read_text()).get("steps") if plan.is_file() else 0), time_budget_s=round(budget),
               distill_s=distill_s, sampled=summary["passes"], kept=summary["kept"],
               proofs_with_a_kept_pass=summary["proofs_with_a_kept_pass"], invalid=summary["invalid"],
               grader_failures=summary["grader_failures"], levels=summary["levels"])
    return rec
