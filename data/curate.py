"""Data curation (docs/curation.md): uncertainty selection and positive-sample repair.

Selection verifies each candidate proof `repeats` times with one or more verifiers and keeps
the proofs whose accept/reject outcomes are most uncertain (entropy in bits, pooled over the
verifiers, >= a threshold): those are the ones worth an expert's time. Invalid outputs are
counted apart, never as accepts, and do not enter the entropy.

Repair turns an expert-rejected proof into a positive example: a strong model rewrites it
using the expert's hint, and the rewrite joins the training pool as `origin: repaired` only
if every pass of every checker accepts it (pessimistic verification).

Both runs keep their records in a `proofcheck.rundir.RunDir` (append-only, resumable).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from proofcheck.data.loaders import load_records
from proofcheck.io import write_json_atomic, write_jsonl_atomic
from proofcheck.parsing import strip_thinking
from proofcheck.protocol import ProofFormatError, neutralise, split_steps, stepped_block
from proofcheck.rundir import RunDir, completeness, file_sha256, fill


def entropy_bits(accepts: int, rejects: int) -> float:
    """Binary entropy of the accept/reject split, in bits (0 when either count is 0).

    >>> round(entropy_bits(3, 2), 3)
    0.971
    """
    n = accepts + rejects
    if n == 0 or accepts == 0 or rejects == 0:
        return 0.0
    p = accepts / n
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def parse_verifier_spec(spec: str) -> tuple[str | None, str | None]:
    """`URL` or `URL#model` -> (endpoint, model); anything else is a local model path."""
    if spec.startswith(("http://", "https://")):
        url, _, model = spec.partition("#")
        return url, model or None
    return None, spec


def open_verifier(spec: str, max_tokens: int, api_key: str | None = None, constrain: str | None = None) -> Any:
    from proofcheck.serve.verifier import make_verifier

    endpoint, model = parse_verifier_spec(spec)
    return make_verifier(endpoint=endpoint, model=model, api_key=api_key, max_tokens=max_tokens,
                         constrain=constrain)


# ------------------------------------------------------------------ selection

def pass_entry(spec: str, x: Any) -> dict[str, Any]:
    """One verifier pass as curation records keep it; an endpoint error keeps its status and message."""
    return {"verifier": spec, "status": x.status, "verdict": x.verdict, "first_error_step": x.first_error_step,
            "invalid_reason": x.invalid_reason, "error": x.error, "error_status": x.error_status, "text": x.text}


def entry_outcome(e: dict[str, Any]) -> str:
    """accept | reject | invalid | cancelled | error, as `proofcheck.decision` counts it."""
    return (e.get("verdict") or "invalid") if e["status"] == "valid" else e["status"]


def pass_votes(entries: list[dict[str, Any]]) -> dict[str, int]:
    from proofcheck.decision import vote_counts

    return vote_counts([entry_outcome(e) for e in entries])


async def rerun_passes(verifier: Any, spec: str, old: list[dict[str, Any]], run: Callable[[Any, int],
                       Awaitable[Any]]) -> list[dict[str, Any]]:
    """`old` entries of one verifier with each errored pass replaced by a fresh one (a resume).

    `run(verifier, n)` verifies again with `n` passes; exactly the errored passes are re-run.
    """
    n = sum(1 for e in old if e["status"] == "error")
    if not n:
        return old
    res = await run(verifier, n)
    fresh = iter(pass_entry(spec, x) for x in res.passes)
    return [next(fresh) if e["status"] == "error" else e for e in old]


def select(proofs_path: str, verifier_specs: list[str], out: str | Path, *, repeats: int = 5,
           min_entropy: float = 0.8, concurrency: int = 4, max_tokens: int = 1024, seed: int | None = None,
           resume: bool = False, api_key: str | None = None, constrain: str | None = None) -> dict[str, Any]:
    """Run selection; writes records.jsonl, selected.jsonl, summary.json, entropy.png in `out`.

    `constrain="steps"` constrains every pass to the answer format (vLLM structured outputs), so the
    entropy measures decisions only.

    A pass that got an endpoint error is kept as an error (status, message), never as a vote:
    its proof is not selected yet, the summary says `complete: false`, and `resume=True`
    re-runs exactly the errored passes. A 401/403/404 raises `EndpointStop`.
    """
    if repeats < 1 or not verifier_specs:
        raise ValueError("select needs --repeats >= 1 and at least one --verifier")
    proofs = load_records(proofs_path, "candidate")
    manifest = {"kind": "select", "proofs_sha256": file_sha256(proofs_path), "verifiers": verifier_specs,
                "repeats": repeats, "max_tokens": max_tokens, "seed": seed}
    run = RunDir(out, manifest, ("proof_id",), resume)

    async def main() -> None:
        verifiers = []
        try:
            for spec in verifier_specs:
                verifiers.append(open_verifier(spec, max_tokens, api_key, constrain))

            async def work(p: Any) -> dict:
                old = run.errored.get((p.proof_id,))

                async def verify(v: Any, n: int) -> Any:
                    return await v.verify(p.problem, p.steps, p.reference_solution, passes=n, all_passes=True,
                                          seed=seed)

                passes: list[dict[str, Any]] = []
                for spec, v in zip(verifier_specs, verifiers, strict=True):
                    if old is None:
                        passes += [pass_entry(spec, x) for x in (await verify(v, repeats)).passes]
                    else:
                        mine = [e for e in old["verifier_passes"] if e["verifier"] == spec]
                        passes += await rerun_passes(v, spec, mine, verify)
                return selection_record(p.proof_id, verifier_specs, passes)

            await fill(run, [p for p in proofs if (p.proof_id,) not in run.done], work, concurrency, "selecting")
        finally:
            for v in verifiers:
                await v.aclose()

    try:
        asyncio.run(main())
    finally:
        run.close()
    by_id = {r["proof_id"]: r for r in run.records}
    selected = []
    for p in proofs:
        r = by_id[p.proof_id]
        if r["entropy"] >= min_entropy and not r.get("error"):
            selected.append({**p.model_dump(mode="json"), "selection": {k: r[k] for k in
                             ("accept", "reject", "invalid", "entropy", "per_model")},
                             "verifier_passes": r["verifier_passes"]})
    write_jsonl_atomic(Path(out) / "selected.jsonl", selected)
    whole = [by_id[p.proof_id] for p in proofs if not by_id[p.proof_id].get("error")]
    entropies = [r["entropy"] for r in whole]
    summary = {"n_candidates": len(proofs), "n_selected": len(selected), "min_entropy": min_entropy,
               "repeats": repeats, "verifiers": verifier_specs,
               "mean_entropy": sum(entropies) / len(entropies) if entropies else None,
               "invalid_outputs": sum(r["invalid"] for r in whole),
               "proofs_with_errors": len(proofs) - len(whole),
               **completeness(run.records, len(proofs))}
    write_json_atomic(Path(out) / "summary.json", summary)
    _entropy_plot(Path(out) / "entropy.png", entropies, min_entropy)
    return summary


def selection_record(proof_id: str, specs: list[str], passes: list[dict[str, Any]]) -> dict[str, Any]:
    """One proof's selection record: votes per verifier and pooled; errors never vote.

    A proof with errored passes has `error: true` and no entropy worth selecting on yet (its
    entropy is computed over the answers it has, for information only).
    """
    per_model = {}
    for spec in specs:
        votes = pass_votes([e for e in passes if e["verifier"] == spec])
        per_model[spec] = {"accept": votes["accept"], "reject": votes["reject"], "invalid": votes["invalid"],
                           "error": votes["error"], "entropy": entropy_bits(votes["accept"], votes["reject"])}
    acc = sum(m["accept"] for m in per_model.values())
    rej = sum(m["reject"] for m in per_model.values())
    errors = sum(m["error"] for m in per_model.values())
    return {"proof_id": proof_id, "per_model": per_model, "accept": acc, "reject": rej,
            "invalid": sum(m["invalid"] for m in per_model.values()), "error": bool(errors),
            "errored_passes": errors, "entropy": entropy_bits(acc, rej), "verifier_passes": passes}


def _entropy_plot(path: Path, entropies: list[float], threshold: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.hist(entropies, bins=[i / 10 for i in range(11)], color="#4c72b0")
    ax.axvline(threshold, color="#c44e52", linestyle="--", label=f"keep >= {threshold}")
    ax.set_xlabel("accept/reject entropy (bits)")
    ax.set_ylabel("proofs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ repair

REPAIR_SYSTEM = (
    "You are an expert mathematician who repairs flawed proofs. Keep what is correct, fix what "
    "an expert reviewer found wrong, and make every step rigorous."
)


def repair_messages(problem: str, steps: list[str], comment: str, fatal: int) -> list[dict[str, str]]:
    """The repair prompt: problem, the flawed stepped proof, the expert's hint."""
    where = f"The first fatal error is in step {fatal}." if fatal >= 0 else "The proof has recoverable errors."
    user = (f"## Problem\n{neutralise(problem)}\n\n## Flawed proof\n{stepped_block(steps)}\n\n"
            f"## Expert review\n{where} Reviewer comment: {neutralise(comment)}\n\n"
            "Write a complete, corrected proof. Put each step in its own <step>...</step> tags, in order, "
            "and write nothing outside the tags.")
    return [{"role": "system", "content": REPAIR_SYSTEM}, {"role": "user", "content": user}]


def repair(rejected_path: str, repairer: str, checkers: list[str], out: str | Path, *, passes: int = 8,
           concurrency: int = 4, max_tokens: int = 2048, check_max_tokens: int = 1024, seed: int | None = None,
           resume: bool = False, api_key: str | None = None) -> dict[str, Any]:
    """Repair expert-rejected proofs; accepted repairs go to `out/repaired.jsonl` as `origin: repaired`.

    An endpoint error (repairer or checker) is never an outcome: the attempt's status is
    "error" with the failed request kept (`generation_passes` or `verifier_passes`: status and
    message), the summary says `complete: false`, and `resume=True` re-runs exactly what failed
    (the generation, or only the checker passes that errored, keeping the repaired proof).
    """
    if not checkers or passes < 1:
        raise ValueError("repair needs at least one --checker and --passes >= 1")
    proofs = [p for p in load_records(rejected_path, "annotated") if not p.gold_is_correct]
    manifest = {"kind": "repair", "rejected_sha256": file_sha256(rejected_path), "repairer": repairer,
                "checkers": checkers, "passes": passes, "max_tokens": max_tokens, "seed": seed}
    run = RunDir(out, manifest, ("source_proof_id",), resume)

    async def main() -> None:
        from proofcheck.serve.engines import RemoteEngine

        endpoint, model = parse_verifier_spec(repairer)
        if endpoint is None:
            raise ValueError(f"--repairer {repairer!r}: give an OpenAI-compatible endpoint URL (URL or URL#model)")
        if model is None:
            from proofcheck.serve.verifier import first_model

            model = first_model(endpoint, api_key=api_key)
        gen_engine = RemoteEngine(endpoint.rstrip("/"), model, api_key=api_key)
        verifiers: list[Any] = []

        async def work(p: Any) -> dict:
            ann = p.annotation
            base = {"source_proof_id": p.proof_id, "repairer": repairer}
            old = run.errored.get((p.proof_id,))
            if old is not None and old.get("steps"):  # a resume after checker errors: keep the repaired proof
                steps = old["steps"]
            else:
                gen = await gen_engine.sample(repair_messages(p.problem, p.steps, ann.reviewer_comment,
                                                              ann.first_fatal_error_step), 1,
                                              temperature=0.7, max_tokens=max_tokens, seed=seed)
                out0 = gen.passes[0]
                if out0.error is not None:
                    return {**base, "status": "error", "stage": "generation", "reason": out0.error,
                            "generation_passes": [{"status": "error", "error": out0.error,
                                                   "error_status": out0.error_status}]}
                if out0.finish_reason != "stop":
                    return {**base, "status": "generation_failed", "reason": f"finish_reason={out0.finish_reason}",
                            "raw": out0.text}
                final = strip_thinking(out0.text) or ""
                try:
                    steps = split_steps(final)
                except ProofFormatError as e:
                    return {**base, "status": "unusable_repair", "reason": str(e), "raw": out0.text}

            async def check(v: Any, n: int) -> Any:
                return await v.verify(p.problem, steps, p.reference_solution, passes=n, rule="unanimous", seed=seed)

            entries: list[dict[str, Any]] = []
            for spec, v in zip(checkers, verifiers, strict=True):
                if old is not None and old.get("steps"):
                    entries += await rerun_passes(v, spec, [e for e in old["verifier_passes"] if e["verifier"] == spec],
                                                  check)
                else:
                    entries += [pass_entry(spec, x) for x in (await check(v, passes)).passes]
            votes = {spec: pass_votes([e for e in entries if e["verifier"] == spec]) for spec in checkers}
            if any(vt["error"] for vt in votes.values()):
                status = "error"
            else:
                status = "accepted" if all(vt["accept"] == passes for vt in votes.values()) else "rejected_by_checkers"
            rec = {**base, "status": status, "steps": steps, "checker_votes": votes, "verifier_passes": entries}
            return {**rec, "stage": "check"} if status == "error" else rec

        try:
            for c in checkers:
                verifiers.append(open_verifier(c, check_max_tokens, api_key))
            await fill(run, [p for p in proofs if (p.proof_id,) not in run.done], work, concurrency, "repairing")
        finally:
            await gen_engine.aclose()
            for v in verifiers:
                await v.aclose()

    try:
        asyncio.run(main())
    finally:
        run.close()
    by_src = {p.proof_id: p for p in proofs}
    repaired = [repaired_record(by_src[r["source_proof_id"]], r) for r in run.records if r["status"] == "accepted"]
    write_jsonl_atomic(Path(out) / "repaired.jsonl", repaired)
    counts: dict[str, int] = {}
    for r in run.records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    summary = {"n_rejected_inputs": len(proofs), "n_accepted": len(repaired), "status_counts": counts,
               "passes": passes, "checkers": checkers, "repairer": repairer,
               **completeness(run.records, len(proofs))}
    write_json_atomic(Path(out) / "summary.json", summary)
    return summary


def repaired_record(src: Any, attempt: dict[str, Any]) -> dict[str, Any]:
    """An accepted repair as an AMB-format positive with provenance."""
    rec = src.model_dump(mode="json", exclude={"annotation", "is_correct", "first_error_step", "origin", "proof_id",
                                               "steps", "policy"})
    return {**rec, "proof_id": f"{src.proof_id}-repaired", "steps": attempt["steps"], "policy": attempt["repairer"],
            "annotation": {"first_fatal_error_step": -1, "recoverable_error_steps": [-1],
                           "reviewer_comment": f"repair of {src.proof_id}, accepted by every pass of every checker",
                           "first_error_reason": "", "remark": "repaired"},
            "is_correct": True, "first_error_step": -1, "origin": "repaired",
            "provenance": {"source_proof_id": src.proof_id, "repairer": attempt["repairer"],
                           "checker_votes": attempt["checker_votes"]}}
