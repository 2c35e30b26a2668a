"""Distillation through the meta-verifier: sampled verifications kept only where they agree with the expert.

A user with expert annotations has labels (first fatal error, recoverable steps), not the step-by-step
verifications a supervised stage trains on. The field's way to get them is rejection sampling (expert
iteration): sample k verifications of each annotated proof from a strong model, or from the current verifier,
and keep those that agree with the expert. The meta-verifier is that filter: each pass is graded against the
proof's annotation (`proofcheck.reward.grading.Grader`: structural, judge or hybrid) and kept when its level is
at least `min_level` (EXACT_MATCH by default).

Output folder (`proofcheck.rundir.RunDir`): `manifest.json` (what the run is), `records.jsonl` (one record per
proof, every pass with its text, finish reason, grade and whether it was kept; appended and fsynced as each proof
finishes), `sft.jsonl` (the SFT dataset: one row per kept pass, `prompt` / `completion` in TRL's conversational
form plus `provenance`: model, level, pass, proof, grader), `summary.json`. Rules:
- a pass the grader could not grade (`grader_error`: the judge failed after its retries) is dropped and counted
  (`grader_failures`), never kept, whatever its structural level;
- an invalid answer (unparsable, cut off) has no level and is never kept;
- a pass that got an endpoint error is not an answer: the record keeps it as an error and `--resume` samples
  exactly those passes again (the rest of the record is kept);
- `sft.jsonl` is rewritten (atomically) from the records at the end, so a resumed run neither loses nor
  duplicates a row.

The engine is any `PassEngine` (`proofcheck.serve.engines.RemoteEngine` against an OpenAI-compatible server: a
vLLM server of a strong model or of the current verifier), handed in by the caller, so this module needs no
serving code; its HTTP goes through `proofcheck.http_retry`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from proofcheck.data.loaders import load_records
from proofcheck.io import write_json_atomic, write_jsonl_atomic
from proofcheck.protocol import DEFAULT_PROMPT_STYLE, verifier_messages
from proofcheck.reward.grading import GradeItem, Grader
from proofcheck.reward.levels import Level
from proofcheck.rundir import RunDir, completeness, errored_passes, file_sha256

SFT_FILE = "sft.jsonl"
PASSES = "verifier_passes"  # the record's pass list (a name `proofcheck.rundir` counts endpoint errors in)


def kept(grade: dict[str, Any], min_level: Level) -> bool:
    """Whether a graded pass goes into the SFT set: a level, no grader error, at least `min_level`.

    >>> kept({"level": "EXACT_MATCH", "grader_error": None}, Level.EXACT_MATCH)
    True
    >>> kept({"level": None, "grader_error": "judge: 503", "structural_level": "EXACT_MATCH"}, Level.POOR_MATCH)
    False
    """
    if grade.get("grader_error") or grade.get("level") is None:
        return False
    return Level.parse(grade["level"]) >= min_level


def sft_rows(records: list[dict[str, Any]], proofs: dict[str, Any], *, model: str, min_level: Level,
             grader: str, style: str, with_reference: bool) -> list[dict[str, Any]]:
    """The SFT dataset of `records`: one conversational prompt/completion row per kept pass, with provenance."""
    rows = []
    for rec in records:
        p = proofs[rec["proof_id"]]
        prompt = verifier_messages(p.problem, list(p.steps), p.reference_solution if with_reference else None, style)
        for t in rec[PASSES]:
            if t.get("kept"):
                rows.append({"prompt": prompt, "completion": [{"role": "assistant", "content": t["text"]}],
                             "provenance": {"source": "distill", "model": model, "level": t["level"],
                                            "min_level": min_level.name, "pass": t["pass"],
                                            "proof_id": rec["proof_id"], "problem_id": p.problem_id,
                                            "grader": grader}})
    return rows


def counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Passes sampled, kept, by level, invalid and grader failures (endpoint errors: `completeness`)."""
    passes = [t for r in records for t in r[PASSES]]
    levels: dict[str, int] = {}
    for t in passes:
        if t["status"] == "ok" and t.get("level"):
            levels[t["level"]] = levels.get(t["level"], 0) + 1
    return {"proofs": len(records), "passes": len(passes), "kept": sum(1 for t in passes if t.get("kept")),
            "invalid": sum(1 for t in passes if t["status"] == "ok" and not t.get("valid")),
            "grader_failures": sum(1 for t in passes if t["status"] == "grader_error"),
            "levels": levels,
            "proofs_with_a_kept_pass": sum(1 for r in records if any(t.get("kept") for t in r[PASSES]))}


async def _sample_and_grade(engine: Any, grader: Grader, proof: Any, messages: list[dict[str, str]],
                            indices: list[int], min_level: Level, *, temperature: float, max_tokens: int,
                            seed: int | None) -> list[dict[str, Any]]:
    """The passes `indices` of one proof: sampled in one request, each graded (or kept as an endpoint error)."""
    gen = await engine.sample(messages, len(indices), temperature=temperature, max_tokens=max_tokens,
                              seed=None if seed is None else seed + 1000 * min(indices))
    out: list[dict[str, Any]] = []
    answered = [(i, x) for i, x in zip(indices, gen.passes, strict=True) if x.error is None]
    items = [GradeItem(proof.problem, list(proof.steps), x.text, proof.annotation, x.finish_reason,
                       proof.reference_solution) for _, x in answered]
    grades = {i: g.to_dict() for (i, _), g in zip(answered, await grader.grade(items), strict=True)}
    for i, x in zip(indices, gen.passes, strict=True):
        if x.error is not None:
            out.append({"pass": i, "status": "error", "error": x.error, "error_status": x.error_status})
            continue
        g = grades[i]
        status = "grader_error" if g["grader_error"] else "ok"
        out.append({"pass": i, "status": status, "text": x.text, "finish_reason": x.finish_reason,
                    "valid": g["valid"], "level": g["level"], "score": g["score"], "grader_error": g["grader_error"],
                    "structural_level": g["structural_level"], "judge_level": g["judge_level"],
                    "kept": status == "ok" and kept(g, min_level)})
    return out


def distill(data: str | Path, engine: Any, model: str, out: str | Path, *, passes: int = 4,
            min_level: str = "EXACT_MATCH", grader: Grader | None = None, temperature: float = 1.0,
            max_tokens: int = 1024, seed: int | None = None, prompt_style: str = DEFAULT_PROMPT_STYLE,
            with_reference: bool = False, resume: bool = False, concurrency: int = 4) -> dict[str, Any]:
    """Sample `passes` verifications of every annotated proof in `data` from `engine` (served as `model`), grade
    each with `grader` (default: structural on the training scale), keep those at or above `min_level`, write the
    run folder `out` (module docstring). Returns the summary (also `out/summary.json`)."""
    level = Level.parse(min_level)
    grader = grader or Grader("structural")
    proofs = {p.proof_id: p for p in load_records(data, "annotated")}
    manifest = {"kind": "distill", "data_sha256": file_sha256(data), "model": model, "passes": passes,
                "min_level": level.name, "grader": grader.mode, "scale": grader.scale.name,
                "temperature": temperature, "max_tokens": max_tokens, "seed": seed, "prompt_style": prompt_style,
                "with_reference": with_reference}
    run = RunDir(out, manifest, ("proof_id",), resume)
    todo = [(pid, list(range(passes)), None) for pid in proofs if (pid,) not in run.done and (pid,) not in run.errored]
    todo += [(rec["proof_id"], [t["pass"] for t in rec[PASSES] if t["status"] == "error"], rec)
             for rec in run.errored.values()]

    async def work(item: tuple[str, list[int], dict[str, Any] | None]) -> dict[str, Any]:
        pid, indices, old = item
        p = proofs[pid]
        messages = verifier_messages(p.problem, list(p.steps), p.reference_solution if with_reference else None,
                                     prompt_style)
        new = await _sample_and_grade(engine, grader, p, messages, indices, level, temperature=temperature,
                                      max_tokens=max_tokens, seed=seed)
        keep = [t for t in (old or {}).get(PASSES, []) if t["status"] != "error"]
        return {"proof_id": pid, PASSES: sorted(keep + new, key=lambda t: t["pass"])}

    async def main() -> None:
        from proofcheck.rundir import fill

        try:
            async with grader.session():
                await fill(run, todo, work, concurrency, "distilling")
        finally:
            await engine.aclose()

    try:
        asyncio.run(main())
    finally:
        run.close()
    records = [r for r in run.records if r["proof_id"] in proofs]
    rows = sft_rows(records, proofs, model=model, min_level=level, grader=grader.mode, style=prompt_style,
                    with_reference=with_reference)
    write_jsonl_atomic(Path(out) / SFT_FILE, rows)
    c = counts(records)
    summary = {**completeness(records, len(proofs)), **c, "sft_rows": len(rows), "min_level": level.name,
               "model": model, "sft_file": str(Path(out) / SFT_FILE)}
    summary["complete"] = summary["complete"] and not any(errored_passes(r) for r in records)
    write_json_atomic(Path(out) / "summary.json", summary)
    return summary
