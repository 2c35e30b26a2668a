"""Data curation (SPEC section 8): uncertainty selection and positive-sample repair.

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
from pathlib import Path
from typing import Any

from proofcheck.data.loaders import load_records
from proofcheck.io import write_json_atomic, write_jsonl_atomic
from proofcheck.parsing import strip_thinking
from proofcheck.protocol import ProofFormatError, neutralise, split_steps, stepped_block
from proofcheck.rundir import RunDir, file_sha256, fill


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


def open_verifier(spec: str, max_tokens: int, api_key: str | None = None) -> Any:
    from proofcheck.serve.verifier import make_verifier

    endpoint, model = parse_verifier_spec(spec)
    return make_verifier(endpoint=endpoint, model=model, api_key=api_key, max_tokens=max_tokens)


# ------------------------------------------------------------------ selection

def select(proofs_path: str, verifier_specs: list[str], out: str | Path, *, repeats: int = 5,
           min_entropy: float = 0.8, concurrency: int = 4, max_tokens: int = 1024, seed: int | None = None,
           resume: bool = False, api_key: str | None = None) -> dict[str, Any]:
    """Run selection; writes records.jsonl, selected.jsonl, summary.json, entropy.png in `out`."""
    if repeats < 1 or not verifier_specs:
        raise ValueError("select needs --repeats >= 1 and at least one --verifier")
    proofs = load_records(proofs_path, "candidate")
    manifest = {"kind": "select", "proofs_sha256": file_sha256(proofs_path), "verifiers": verifier_specs,
                "repeats": repeats, "max_tokens": max_tokens, "seed": seed}
    run = RunDir(out, manifest, ("proof_id",), resume)

    async def main() -> None:
        verifiers = [open_verifier(s, max_tokens, api_key) for s in verifier_specs]

        async def work(p: Any) -> dict:
            per_model, passes = {}, []
            for spec, v in zip(verifier_specs, verifiers, strict=True):
                res = await v.verify(p.problem, p.steps, p.reference_solution, passes=repeats, all_passes=True,
                                     seed=seed)
                votes = res.votes
                per_model[spec] = {"accept": votes["accept"], "reject": votes["reject"], "invalid": votes["invalid"],
                                   "entropy": entropy_bits(votes["accept"], votes["reject"])}
                passes += [{"verifier": spec, "status": x.status, "verdict": x.verdict,
                            "first_error_step": x.first_error_step, "invalid_reason": x.invalid_reason,
                            "text": x.text} for x in res.passes]
            acc = sum(m["accept"] for m in per_model.values())
            rej = sum(m["reject"] for m in per_model.values())
            return {"proof_id": p.proof_id, "per_model": per_model, "accept": acc, "reject": rej,
                    "invalid": sum(m["invalid"] for m in per_model.values()), "entropy": entropy_bits(acc, rej),
                    "verifier_passes": passes}

        try:
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
        if r["entropy"] >= min_entropy:
            selected.append({**p.model_dump(mode="json"), "selection": {k: r[k] for k in
                             ("accept", "reject", "invalid", "entropy", "per_model")},
                             "verifier_passes": r["verifier_passes"]})
    write_jsonl_atomic(Path(out) / "selected.jsonl", selected)
    entropies = [by_id[p.proof_id]["entropy"] for p in proofs]
    summary = {"n_candidates": len(proofs), "n_selected": len(selected), "min_entropy": min_entropy,
               "repeats": repeats, "verifiers": verifier_specs,
               "mean_entropy": sum(entropies) / len(entropies) if entropies else None,
               "invalid_outputs": sum(by_id[p.proof_id]["invalid"] for p in proofs)}
    write_json_atomic(Path(out) / "summary.json", summary)
    _entropy_plot(Path(out) / "entropy.png", entropies, min_entropy)
    return summary


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
    """Repair expert-rejected proofs; accepted repairs go to `out/repaired.jsonl` as `origin: repaired`."""
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
        verifiers = [open_verifier(c, check_max_tokens, api_key) for c in checkers]

        async def work(p: Any) -> dict:
            ann = p.annotation
            base = {"source_proof_id": p.proof_id, "repairer": repairer}
            gen = await gen_engine.sample(repair_messages(p.problem, p.steps, ann.reviewer_comment,
                                                                 ann.first_fatal_error_step), 1,
                                                 temperature=0.7, max_tokens=max_tokens, seed=seed)
            out0 = gen.passes[0]
            if out0.error or out0.finish_reason != "stop":
                return {**base, "status": "generation_failed",
                        "reason": out0.error or f"finish_reason={out0.finish_reason}", "raw": out0.text}
            final = strip_thinking(out0.text) or ""
            try:
                steps = split_steps(final)
            except ProofFormatError as e:
                return {**base, "status": "unusable_repair", "reason": str(e), "raw": out0.text}
            votes = {}
            for spec, v in zip(checkers, verifiers, strict=True):
                res = await v.verify(p.problem, steps, p.reference_solution, passes=passes, rule="unanimous",
                                     seed=seed)
                votes[spec] = res.votes
            accepted = all(vt["accept"] == passes for vt in votes.values())
            return {**base, "status": "accepted" if accepted else "rejected_by_checkers", "steps": steps,
                    "checker_votes": votes}

        try:
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
               "passes": passes, "checkers": checkers, "repairer": repairer}
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
