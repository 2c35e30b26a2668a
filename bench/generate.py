"""Generate ProverBench submissions with a prover model (closing the loop to `score prover`).

The prover sees only the problem (never the reference solution) and must answer with a
complete proof whose steps are each wrapped in `<step>...</step>`. A sample whose generation
was cut off, is empty, or has no usable step is kept as a *failed* submission: it scores 0
and the verifier is never called on it. A sample that got an endpoint error (HTTP status,
timeout, malformed body) is not a submission at all: it is not written, it is counted
(`errored`), and `--resume` generates exactly the missing samples. Samples are appended
(fsynced) as they arrive.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from proofcheck.data.loaders import load_records
from proofcheck.io import JsonlAppender, read_jsonl_tolerant
from proofcheck.parsing import strip_thinking
from proofcheck.protocol import ProofFormatError, neutralise, split_steps

PROVER_SYSTEM = (
    "You are an expert mathematician writing rigorous proofs. Prove the statement completely: "
    "justify every step, state which standard results you use, and do not skip cases."
)
PROVER_INSTRUCTIONS = (
    "Write a complete proof of the problem below. Put each step of the proof in its own "
    "<step>...</step> tags, in order, and write nothing outside the tags."
)


def prover_messages(problem: str) -> list[dict[str, str]]:
    """The prover prompt: problem only (the reference solution is never shown)."""
    return [{"role": "system", "content": PROVER_SYSTEM},
            {"role": "user", "content": f"{PROVER_INSTRUCTIONS}\n\n## Problem\n{neutralise(problem.strip())}"}]


def submission_from_output(problem_id: str, sample: int, text: str, finish_reason: str | None,
                           error: str | None, policy: str) -> dict[str, Any]:
    """One submission record; failed generations are marked `failed` with the reason."""
    base = {"problem_id": problem_id, "sample": sample, "policy": policy}
    if error:
        return {**base, "failed": True, "failure": f"engine error: {error}", "raw": text}
    if finish_reason != "stop":
        return {**base, "failed": True, "failure": f"generation not finished (finish_reason={finish_reason})",
                "raw": text}
    final = strip_thinking(text)
    if final is None or not final.strip():
        return {**base, "failed": True, "failure": "empty answer", "raw": text}
    try:
        split_steps(final)
    except ProofFormatError as e:
        return {**base, "failed": True, "failure": str(e), "raw": text}
    return {**base, "proof": final.strip()}


async def _generate(engine: Any, todo: list[tuple[Any, list[int]]], temperature: float, max_tokens: int,
                    seed: int | None, out: JsonlAppender, policy: str, concurrency: int) -> list[dict]:
    """Generate the missing sample indices of each problem; returns the endpoint errors met."""
    from rich.progress import Progress

    sem = asyncio.Semaphore(concurrency)
    errors: list[dict] = []

    async def one(p: Any, indices: list[int]) -> list[dict]:
        async with sem:
            gen = await engine.sample(prover_messages(p.problem), len(indices), temperature=temperature,
                                             max_tokens=max_tokens, seed=seed)
        recs = []
        for x, idx in zip(gen.passes, indices, strict=True):
            if x.error is not None:
                errors.append({"problem_id": p.problem_id, "sample": idx, "error": x.error,
                               "error_status": x.error_status})
            else:
                recs.append(submission_from_output(p.problem_id, idx, x.text, x.finish_reason, None, policy))
        return recs

    try:
        with Progress() as bar:
            task = bar.add_task("generating proofs", total=len(todo))
            for fut in asyncio.as_completed([one(p, idx) for p, idx in todo]):
                for rec in await fut:
                    out.append(rec)
                bar.advance(task)
    finally:
        await engine.aclose()
    return errors


def generate(problems_path: str, engine: Any, policy: str, out: str | Path, *, samples: int = 4,
             temperature: float = 1.0, max_tokens: int = 4096, seed: int | None = None, resume: bool = False,
             concurrency: int = 4) -> dict[str, int]:
    """Write `samples` submissions per problem to `out`.

    Returns counts: written, failed (kept, score 0), errored (endpoint errors: not written;
    `resume=True` generates exactly those), skipped_problems (already complete).
    """
    problems = load_records(problems_path, "problem")
    out = Path(out)
    done = read_jsonl_tolerant(out) if out.exists() else []
    if done and not resume:
        raise ValueError(f"{out} already holds {len(done)} submissions; pass --resume to continue or choose a new --out")
    per_problem: dict[str, set[int]] = {}
    for r in done:
        per_problem.setdefault(r["problem_id"], set()).add(r["sample"])
    todo = [(p, [i for i in range(samples) if i not in per_problem.get(p.problem_id, set())]) for p in problems]
    todo = [(p, idx) for p, idx in todo if idx]
    with JsonlAppender(out) as app:
        errors = asyncio.run(_generate(engine, todo, temperature, max_tokens, seed, app, policy, concurrency))
    recs = read_jsonl_tolerant(out)
    return {"written": len(recs), "failed": sum(1 for r in recs if r.get("failed")), "errored": len(errors),
            "errors": errors[:20], "skipped_problems": len(problems) - len(todo)}
