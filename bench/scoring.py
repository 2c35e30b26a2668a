"""ProverBench and VerifierBench scoring runs: verify, record as we go, summarise.

Both runs take a *verifier*: any object with
`async verify(problem, steps, reference=None, passes=8, rule="unanimous", all_passes=False, seed=None)
-> proofcheck.verification.VerificationResult` (serve/'s engines provide it for a local model,
our service, or any OpenAI-compatible endpoint). Each proof's record is appended (fsynced) the
moment it is verified; `summary.json`, `report.md` and plots are derived from the records alone
(`summarise_records`), so `proofcheck metrics --records` reproduces them exactly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from proofcheck.data.loaders import DataError, iter_json_lines, load_records
from proofcheck.metrics import ProofTrials, SubmissionPasses, Trial, prover_metrics, verifier_metrics
from proofcheck.protocol import ProofFormatError
from proofcheck.rundir import RunDir, file_sha256, fill
from proofcheck.verification import PassResult, VerificationResult, parse_pass


class Verifier(Protocol):
    async def verify(self, problem: str, steps: list[str], reference: str | None = None, passes: int = 8,
                     rule: str = "unanimous", all_passes: bool = False,
                     seed: int | None = None) -> VerificationResult: ...


def trial_entry(p: PassResult, latency_s: float) -> dict[str, Any]:
    """A verification record's per-pass entry (SPEC section 3)."""
    return {"status": p.status, "text": p.text, "finish_reason": p.finish_reason, "valid": p.status == "valid",
            "parsed": {"verdict": p.verdict, "first_error_step": p.first_error_step,
                       "flagged_steps": p.flagged_steps} if p.status == "valid" else None,
            "invalid_reason": p.invalid_reason, "error": p.error, "completion_tokens": p.completion_tokens,
            "latency_s": latency_s}


def reparse(trial: dict[str, Any], n_steps: int) -> PassResult:
    """Re-derive a pass's outcome from its stored text: records are the source of truth."""
    if trial.get("status") == "cancelled":
        return PassResult("cancelled")
    return parse_pass(trial.get("text") or "", n_steps, trial.get("finish_reason"), trial.get("completion_tokens", 0),
                      trial.get("error"))


async def _run_all(items: list[Any], work: Callable[[Any], Awaitable[dict]], run: RunDir, concurrency: int,
                   label: str, verifier: Any) -> None:
    """Verify `items` into `run` (see `proofcheck.rundir.fill`), then close the verifier."""
    try:
        await fill(run, items, work, concurrency, label)
    finally:
        close = getattr(verifier, "aclose", None)
        if close is not None:
            await close()


# ---------------------------------------------------------------- ProverBench

def prover_manifest(problems: str, submissions: str, table: dict[str, tuple[str, str]], verifier_id: str,
                    passes: int, rule: str, max_tokens: int, seed: int | None) -> dict[str, Any]:
    """What a prover run measures; `problems` (id -> [domain, subject]) lets records alone be summarised."""
    return {"kind": "prover", "problems_sha256": file_sha256(problems), "submissions_sha256": file_sha256(submissions),
            "verifier": verifier_id, "passes": passes, "rule": rule, "max_tokens": max_tokens, "seed": seed,
            "problems": {k: list(v) for k, v in sorted(table.items())}}


def load_prover_inputs(problems: str, submissions: str) -> tuple[dict, list]:
    """Problems by id and the submissions, with unknown ids reported as data errors."""
    probs = {p.problem_id: p for p in load_records(problems, "problem")}
    subs = load_records(submissions, "submission")
    bad = [f"{submissions}:{lineno}: problem_id: unknown problem {v.get('problem_id')!r}; it is not in {problems}"
           for lineno, v, _ in iter_json_lines(submissions)
           if isinstance(v, dict) and v.get("problem_id") not in probs]
    if bad:
        raise DataError(bad)
    return probs, subs


def score_prover(problems: str, submissions: str, verifier: Verifier, verifier_id: str, out: str | Path, *,
                 passes: int = 8, rule: str = "unanimous", concurrency: int = 4, resume: bool = False,
                 max_tokens: int = 1024, seed: int | None = None) -> dict[str, Any]:
    """Verify every submitted proof with `passes` passes; write records, summary, report, plots."""
    probs, subs = load_prover_inputs(problems, submissions)
    table = {k: (v.domain, v.subject) for k, v in probs.items()}
    run = RunDir(out, prover_manifest(problems, submissions, table, verifier_id, passes, rule, max_tokens, seed),
                 ("proof_id",), resume)
    t0 = time.perf_counter()

    async def work(s: Any) -> dict:
        p = probs[s.problem_id]
        base = {"proof_id": s.proof_id, "problem_id": s.problem_id, "sample": s.sample, "domain": p.domain,
                "subject": p.subject, "policy": s.policy}
        try:
            steps = [] if s.failed else s.step_list()
        except ProofFormatError as e:
            return {**base, "n_steps": 0, "failed": True, "failure": str(e), "verifier_trials": []}
        if s.failed:
            return {**base, "n_steps": 0, "failed": True, "failure": "generation failed", "verifier_trials": []}
        res = await verifier.verify(p.problem, steps, p.reference_solution, passes=passes, rule=rule, seed=seed)
        per = res.latency_s
        return {**base, "n_steps": len(steps), "failed": False, "decision": res.decision,
                "verifier_trials": [trial_entry(x, per) for x in res.passes],
                "prompt_tokens": res.prompt_tokens, "latency_s": res.latency_s}

    todo = [s for s in subs if (s.proof_id,) not in run.done]
    try:
        asyncio.run(_run_all(todo, work, run, concurrency, "verifying proofs", verifier))
    finally:
        run.close()
    summary = summarise_prover_records(run.records, run.manifest)
    summary["wall_time_s_this_run"] = time.perf_counter() - t0
    from .report import write_prover_report

    write_prover_report(run.path, summary, run.records)
    return summary


def summarise_prover_records(records: list[dict], manifest: dict[str, Any]) -> dict[str, Any]:
    """Pessimistic ProverBench summary from records and manifest alone (outcomes re-parsed from text)."""
    rule = manifest.get("rule", "unanimous")
    problems = {k: (v[0], v[1]) for k, v in manifest["problems"].items()}
    items, tokens, latency, n_passes, cancelled = [], 0, 0.0, 0, 0
    for r in records:
        passes = [reparse(t, r["n_steps"]) for t in r["verifier_trials"]]
        outcomes = [p.outcome for p in passes]
        # an early-cancelled pass never accepted: under unanimity it is a non-accept like the reject that stopped it
        items.append(SubmissionPasses(r["problem_id"], r["sample"], outcomes))
        tokens += sum(p.completion_tokens for p in passes)
        latency += r.get("latency_s", 0.0)
        n_passes += len(passes)
        cancelled += outcomes.count("cancelled")
    m = prover_metrics(problems, items)
    m.update(rule=rule, passes=manifest.get("passes"), n_records=len(records), completion_tokens=tokens,
             verification_time_s=latency, n_passes=n_passes, n_cancelled_passes=cancelled,
             verifier=manifest.get("verifier"))
    return m


# ---------------------------------------------------------------- VerifierBench

def verifier_manifest(data: str, verifier_id: str, repeats: int, judge: str | None, max_tokens: int,
                      seed: int | None) -> dict[str, Any]:
    return {"kind": "verifier", "data_sha256": file_sha256(data), "verifier": verifier_id, "repeats": repeats,
            "judge": judge, "max_tokens": max_tokens, "seed": seed}


Grader = Callable[[Any, list[dict]], Awaitable[list[dict | None]]]


def score_verifier(data: str, verifier: Verifier, verifier_id: str, out: str | Path, *, repeats: int = 4,
                   grader: Grader | None = None, judge_id: str | None = None, concurrency: int = 4,
                   resume: bool = False, max_tokens: int = 1024, seed: int | None = None) -> dict[str, Any]:
    """Run the verifier `repeats` times on every annotated proof; grade with `grader` when given.

    `grader(proof, trials)` returns one `meta` dict {level, score, valid, grader_error} per trial.
    """
    proofs = load_records(data, "annotated")
    run = RunDir(out, verifier_manifest(data, verifier_id, repeats, judge_id, max_tokens, seed), ("proof_id",), resume)

    async def work(p: Any) -> dict:
        res = await verifier.verify(p.problem, p.steps, p.reference_solution, passes=repeats, rule="unanimous",
                                    all_passes=True, seed=seed)
        trials = [trial_entry(x, res.latency_s) for x in res.passes]
        if grader is not None:
            for t, meta in zip(trials, await grader(p, trials), strict=True):
                t["meta"] = meta
        return {"proof_id": p.proof_id, "problem_id": p.problem_id, "domain": p.domain, "subject": p.subject,
                "n_steps": len(p.steps), "is_correct": p.gold_is_correct, "first_error_step": p.gold_first_error_step,
                "verifier_trials": trials, "latency_s": res.latency_s}

    todo = [p for p in proofs if (p.proof_id,) not in run.done]
    try:
        asyncio.run(_run_all(todo, work, run, concurrency, "verifying annotated proofs", verifier))
    finally:
        run.close()
    summary = summarise_verifier_records(run.records, run.manifest)
    from .report import write_verifier_report

    write_verifier_report(run.path, summary, run.records)
    return summary


def summarise_verifier_records(records: list[dict], manifest: dict[str, Any]) -> dict[str, Any]:
    """VerifierBench summary from records alone (outcomes re-parsed; meta scores as recorded)."""
    items, levels = [], {}
    for r in records:
        trials = []
        for t in r["verifier_trials"]:
            p = reparse(t, r["n_steps"])
            meta = t.get("meta")
            score = meta.get("score") if meta else None
            if meta and meta.get("level"):
                levels[meta["level"]] = levels.get(meta["level"], 0) + 1
            trials.append(Trial(p.status == "valid", p.first_error_step, score))
        items.append(ProofTrials(r["proof_id"], r["is_correct"], r["first_error_step"], r["domain"], trials))
    m = verifier_metrics(items)
    m.update(n_records=len(records), repeats=manifest.get("repeats"), verifier=manifest.get("verifier"),
             judge=manifest.get("judge"), meta_levels=levels,
             grader_failures=sum(1 for r in records for t in r["verifier_trials"]
                                 if t.get("meta") and t["meta"].get("grader_error")))
    return m


def summarise_records(path: str | Path) -> dict[str, Any]:
    """Recompute a scoring run's summary from `DIR/records.jsonl` (+ its manifest)."""
    import json

    from proofcheck.io import read_jsonl_tolerant

    path = Path(path)
    manifest_path = path.parent / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path}: missing; records must sit in a scoring run folder")
    manifest = json.loads(manifest_path.read_text())
    records = read_jsonl_tolerant(path)
    if manifest.get("kind") == "prover":
        return summarise_prover_records(records, manifest)
    return summarise_verifier_records(records, manifest)
