"""ProverBench and VerifierBench scoring runs: verify, record as we go, summarise.

Both runs take a *verifier*: any object with
`async verify(problem, steps, reference=None, passes=8, rule="unanimous", all_passes=False, seed=None)
-> proofcheck.verification.VerificationResult` (serve/'s engines provide it for a local model,
our service, or any OpenAI-compatible endpoint). Each proof's record is appended (fsynced) the
moment it is verified; `summary.json`, `report.md` and plots are derived from the records alone
(`summarise_records`), so `proofcheck metrics --records` reproduces them exactly.

A run is complete or says it is not: passes that got an endpoint error (status "error", with
the HTTP status and message) are never scored as verdicts; they are counted (`errored_passes`),
the summary says `complete: false` with what is missing, and `--resume` re-runs exactly those
passes. VerifierBench runs as the AdvancedMathBench release runs it: no reference solution
unless `with_reference`, meta scores on the benchmark scale.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from proofcheck.data.loaders import DataError, iter_json_lines, load_records
from proofcheck.decision import decide
from proofcheck.metrics import (
    PROVER_SCORES,
    VERIFIER_SCORES,
    ProofTrials,
    SubmissionPasses,
    Trial,
    prover_metrics,
    verifier_metrics,
)
from proofcheck.protocol import ProofFormatError, prompt_sha256
from proofcheck.rundir import RunDir, errored_passes, file_sha256, fill, latest_records
from proofcheck.rundir import completeness as run_completeness
from proofcheck.verification import PassResult, VerificationResult, parse_pass


class Verifier(Protocol):
    async def verify(self, problem: str, steps: list[str], reference: str | None = None, passes: int = 8,
                     rule: str = "unanimous", all_passes: bool = False,
                     seed: int | None = None) -> VerificationResult: ...


def trial_entry(p: PassResult, latency_s: float) -> dict[str, Any]:
    """A verification record's per-pass entry (`proofcheck.schemas`)."""
    return {"status": p.status, "text": p.text, "finish_reason": p.finish_reason, "valid": p.status == "valid",
            "parsed": {"verdict": p.verdict, "first_error_step": p.first_error_step,
                       "flagged_steps": p.flagged_steps} if p.status == "valid" else None,
            "invalid_reason": p.invalid_reason, "error": p.error, "error_status": p.error_status,
            "completion_tokens": p.completion_tokens, "latency_s": latency_s}


def reparse(trial: dict[str, Any], n_steps: int) -> PassResult:
    """Re-derive a pass's outcome from its stored text: records are the source of truth.

    Reads our records and the AdvancedMathBench release's results (`response` {text,
    finish_reason, error}): an endpoint error there is an "error" pass too, never a verdict.
    """
    if trial.get("status") == "cancelled":
        return PassResult("cancelled")
    resp = trial.get("response") if isinstance(trial.get("response"), dict) else {}
    text = trial.get("text", resp.get("text")) or ""
    finish = trial.get("finish_reason", resp.get("finish_reason"))
    error = trial.get("error") if "status" in trial else resp.get("error")  # ours | the release's
    return parse_pass(text, n_steps, finish, trial.get("completion_tokens", 0), error,
                      trial.get("error_status"))


def merge_retried(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`old` trials with each errored one replaced, in order, by the next of `new` (a resume)."""
    fresh = iter(new)
    merged = [next(fresh) if t.get("status") == "error" else t for t in old]
    left = list(fresh)
    if left:
        raise ValueError(f"{len(left)} re-run passes left over: the record had fewer errored passes")
    return merged


def completeness(records: list[dict], expected: int | None, grader_failures: int = 0,
                 problems_without_submission: int = 0) -> dict[str, Any]:
    """`complete` and what is missing (`proofcheck.rundir.completeness`).

    Problems without a submission are counted but do not make the run incomplete: they are a
    property of the submissions file (each scores 0, a missing proof is a failed proof), not
    something a rerun could fill.
    """
    return run_completeness(records, expected, grader_failures,
                            problems_without_submission=problems_without_submission)




def _record_whole(r: dict[str, Any]) -> bool:
    """No errored pass and no grader failure in this record."""
    return not errored_passes(r) and not any((t.get("meta") or {}).get("grader_error")
                                             for t in r.get("verifier_trials") or [])


def withhold_incomplete(summary: dict[str, Any], records: list[dict], score_keys: tuple[str, ...],
                        groups: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """The release's rule for an incomplete run: a split that is not complete reports no scores.

    Each split (and each subject, for ProverBench) gets `complete`; when it is false its score
    keys are None (counts stay). A split is incomplete when the run misses records (they cannot
    be placed in a split) or when one of its records holds an errored pass or a grader failure.
    The top-level keys (the `all` split) follow `summary["complete"]`. `groups` maps a summary
    section ("splits", "subjects") to the record field that places a record in it.
    """
    groups = groups or {"splits": "domain"}
    missing = bool(summary.get("missing_records"))
    for section, field in groups.items():
        for name, split in (summary.get(section) or {}).items():
            if section == "splits" and name == "all":
                ok = bool(summary["complete"])
            else:
                ok = not missing and all(_record_whole(r) for r in records if r.get(field) == name)
            split["complete"] = ok
            if not ok:
                split.update({k: None for k in score_keys if k in split})
    if not summary["complete"]:
        summary.update({k: None for k in (*score_keys, "generation_failure_rate") if k in summary})
    return summary


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
                    passes: int, rule: str, max_tokens: int, seed: int | None, n_submissions: int = 0,
                    prompt_hash: str | None = None, calibrated: tuple[str, int] | None = None) -> dict[str, Any]:
    """What a prover run measures; `problems` (id -> [domain, subject]) lets records alone be summarised;
    `calibrated` (rule, k): the model card's calibrated rule, scored beside the pessimistic one."""
    extra = {} if calibrated is None else {"calibrated": {"rule": calibrated[0], "passes": calibrated[1]}}
    return {**extra, "kind": "prover", "problems_sha256": file_sha256(problems),
            "submissions_sha256": file_sha256(submissions),
            "verifier": verifier_id, "passes": passes, "rule": rule, "max_tokens": max_tokens, "seed": seed,
            "expected_records": n_submissions, "prompt_sha256": prompt_hash or prompt_sha256(),
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


def _needs_more(rule: str, k: int) -> bool:
    """True when `rule` cannot decide k passes (at_least:T with T > k)."""
    from proofcheck.decision import threshold

    try:
        threshold(rule, k)
    except ValueError:
        return True
    return False


def score_prover(problems: str, submissions: str, verifier: Verifier, verifier_id: str, out: str | Path, *,
                 passes: int = 8, rule: str = "unanimous", concurrency: int = 4, resume: bool = False,
                 max_tokens: int = 1024, seed: int | None = None, prompt_hash: str | None = None,
                 calibrated: tuple[str, int] | None = None, all_passes: bool = False) -> dict[str, Any]:
    """Verify every submitted proof with `passes` passes; write records, summary, report, plots.

    `all_passes`: run every pass (no early stop), so the records also give the per-pass accept rate.

    `calibrated` (rule, k): the verifier's calibrated rule (its model card): each proof then gets
    max(passes, k) passes, all of them (no early stop, so both rules see the same passes), and the
    summary gives `calibrated_score` (the rule over the first k passes) beside `pessimistic`
    (unanimity over the first `passes`).

    `prompt_hash` is `proofcheck.protocol.prompt_sha256` of the verifier prompt (a resume refuses
    another prompt); default: our built-in prompt.
    """
    probs, subs = load_prover_inputs(problems, submissions)
    table = {k: (v.domain, v.subject) for k, v in probs.items()}
    run = RunDir(out, prover_manifest(problems, submissions, table, verifier_id, passes, rule, max_tokens, seed,
                                      len(subs), prompt_hash, calibrated), ("proof_id",), resume)
    n, every = (passes, all_passes) if calibrated is None else (max(passes, calibrated[1]), True)
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
        old = run.errored.get((s.proof_id,))
        if old is None:
            res = await verifier.verify(p.problem, steps, p.reference_solution, passes=n, rule=rule, seed=seed,
                                        all_passes=every)
            trials = [trial_entry(x, res.latency_s) for x in res.passes]
        else:  # a resume: re-run exactly the passes that got an endpoint error
            again = errored_passes(old)  # fewer passes than the rule may need: then run them all, any rule decides
            whole = every or _needs_more(rule, again)
            res = await verifier.verify(p.problem, steps, p.reference_solution, passes=again,
                                        rule="any" if whole else rule, seed=seed, all_passes=whole)
            trials = merge_retried(old["verifier_trials"], [trial_entry(x, res.latency_s) for x in res.passes])
        decision = decide([reparse(t, len(steps)).outcome for t in trials][:passes], rule)
        return {**base, "n_steps": len(steps), "failed": False, "decision": decision, "verifier_trials": trials,
                "prompt_tokens": res.prompt_tokens, "latency_s": res.latency_s + (old or {}).get("latency_s", 0.0)}

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
    k = manifest.get("passes")
    if k:  # with a calibrated rule a proof has more passes than the pessimistic score reads
        items = [SubmissionPasses(s.problem_id, s.sample, s.outcomes[:k]) for s in items]
    m = prover_metrics(problems, items)
    if cal := manifest.get("calibrated"):
        cal_items = [SubmissionPasses(r["problem_id"], r["sample"], [reparse(t, r["n_steps"]).outcome for t in
                                                                    r["verifier_trials"]][:cal["passes"]], cal["rule"])
                     for r in records]
        cm = prover_metrics(problems, cal_items)
        m["calibrated_rule"] = f"{cal['rule']} of {cal['passes']} passes"
        m["calibrated_score"] = cm["pessimistic"]
        for section in ("splits", "subjects"):
            for name, split in m[section].items():
                split["calibrated_score"] = cm[section][name]["pessimistic"]
    m.update(rule=rule, passes=manifest.get("passes"), n_records=len(records), completion_tokens=tokens,
             verification_time_s=latency, n_passes=n_passes, n_cancelled_passes=cancelled,
             verifier=manifest.get("verifier"),
             generation_failure_rate=(sum(bool(r.get("failed")) for r in records) / len(records)) if records else None)
    m.update(completeness(records, manifest.get("expected_records"),
                          problems_without_submission=m["n_problems_without_submission"]))
    return withhold_incomplete(m, records, (*PROVER_SCORES, "calibrated_score"),
                               {"splits": "domain", "subjects": "subject"})


# ---------------------------------------------------------------- VerifierBench

def verifier_manifest(data: str, verifier_id: str, repeats: int, judge: str | None, max_tokens: int,
                      seed: int | None, n_proofs: int = 0, with_reference: bool = False, scale: str = "benchmark",
                      prompt_hash: str | None = None) -> dict[str, Any]:
    return {"kind": "verifier", "data_sha256": file_sha256(data), "verifier": verifier_id, "repeats": repeats,
            "judge": judge, "max_tokens": max_tokens, "seed": seed, "expected_records": n_proofs,
            "with_reference": with_reference, "meta_scale": scale, "prompt_sha256": prompt_hash or prompt_sha256()}


class Grader(Protocol):
    """`await grader(proof, trials)` -> one meta dict per trial; `session()` spans the whole run
    (`proofcheck.bench.meta.TrialGrader`: one judge client per run, not per proof)."""

    def __call__(self, proof: Any, trials: list[dict]) -> Awaitable[list[dict | None]]: ...

    def session(self) -> contextlib.AbstractAsyncContextManager[Any]: ...


def score_verifier(data: str, verifier: Verifier, verifier_id: str, out: str | Path, *, repeats: int = 4,
                   grader: Grader | None = None, judge_id: str | None = None, concurrency: int = 4,
                   resume: bool = False, max_tokens: int = 1024, seed: int | None = None,
                   with_reference: bool = False, scale: str = "benchmark",
                   prompt_hash: str | None = None) -> dict[str, Any]:
    """Run the verifier `repeats` times on every annotated proof; grade with `grader` when given.

    As in the AdvancedMathBench release, the verifier sees the problem and the stepped proof,
    not the reference solution, unless `with_reference`. `grader(proof, trials)` returns one
    `meta` dict {level, score, valid, grader_error} per trial (`scale` names its score scale).
    """
    proofs = load_records(data, "annotated")
    run = RunDir(out, verifier_manifest(data, verifier_id, repeats, judge_id, max_tokens, seed, len(proofs),
                                        with_reference, scale, prompt_hash), ("proof_id",), resume)

    async def work(p: Any) -> dict:
        ref = p.reference_solution if with_reference else None
        old = run.errored.get((p.proof_id,))
        n = errored_passes(old) if old is not None else repeats
        res = await verifier.verify(p.problem, p.steps, ref, passes=n, rule="unanimous", all_passes=True, seed=seed)
        fresh = [trial_entry(x, res.latency_s) for x in res.passes]
        if grader is not None:
            for t, meta in zip(fresh, await grader(p, fresh), strict=True):
                t["meta"] = meta
        trials = fresh if old is None else merge_retried(old["verifier_trials"], fresh)
        return {"proof_id": p.proof_id, "problem_id": p.problem_id, "domain": p.domain, "subject": p.subject,
                "n_steps": len(p.steps), "is_correct": p.gold_is_correct, "first_error_step": p.gold_first_error_step,
                "verifier_trials": trials, "latency_s": res.latency_s}

    todo = [p for p in proofs if (p.proof_id,) not in run.done]

    async def all_proofs() -> None:
        async with grader.session() if grader is not None else contextlib.nullcontext():  # one judge client
            await _run_all(todo, work, run, concurrency, "verifying annotated proofs", verifier)

    try:
        asyncio.run(all_proofs())
    finally:
        run.close()
    summary = summarise_verifier_records(run.records, run.manifest)
    from .report import write_verifier_report

    write_verifier_report(run.path, summary, run.records)
    return summary


def summarise_verifier_records(records: list[dict], manifest: dict[str, Any]) -> dict[str, Any]:
    """VerifierBench summary from records alone (outcomes re-parsed; meta scores as recorded).

    Reads our records and the release's results records (`steps` instead of `n_steps`,
    `meta.valid`); a release record's meta score counts only when its meta evaluation is valid.
    """
    items, levels = [], {}
    repeats = manifest.get("repeats") or manifest.get("settings", {}).get("verifier_repeats")
    for r in records:
        n_steps = r["n_steps"] if "n_steps" in r else len(r["steps"])
        trials = []
        for t in r["verifier_trials"]:
            p = reparse(t, n_steps)
            meta = t.get("meta")
            score = meta.get("score") if meta and meta.get("valid", True) else None
            if meta and p.status != "valid":
                score = 0.0  # an invalid verifier output was graded: it earns 0, and meta metrics exist
            if meta and meta.get("level"):
                levels[meta["level"]] = levels.get(meta["level"], 0) + 1
            trials.append(Trial(p.status == "valid", p.first_error_step, score,
                                meta_valid=bool(meta and meta.get("valid") and meta.get("score") is not None)))
        items.append(ProofTrials(r["proof_id"], r["is_correct"], r["first_error_step"], r["domain"], trials))
    m = verifier_metrics(items, repeats)
    failures = sum(1 for r in records for t in r["verifier_trials"] if t.get("meta") and t["meta"].get("grader_error"))
    m.update(n_records=len(records), repeats=repeats, verifier=manifest.get("verifier"),
             judge=manifest.get("judge"), meta_levels=levels, meta_scale=manifest.get("meta_scale", "benchmark"),
             with_reference=manifest.get("with_reference", manifest.get("settings", {}).get("use_reference_solution")))
    m.update(completeness(records, manifest.get("expected_records"), grader_failures=failures))
    return withhold_incomplete(m, records, VERIFIER_SCORES)


def summarise_records(path: str | Path) -> dict[str, Any]:
    """Recompute a scoring run's summary from `DIR/records.jsonl` (+ its manifest)."""
    import json

    from proofcheck.io import read_jsonl_tolerant

    path = Path(path)
    manifest_path = path.parent / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path}: missing; records must sit in a scoring run folder")
    manifest = json.loads(manifest_path.read_text())
    if "task" in manifest and "kind" not in manifest:  # the AdvancedMathBench release's results folder
        from proofcheck.bench.release import summarise_release_results

        return summarise_release_results(path, manifest)
    records = latest_records(read_jsonl_tolerant(path), ("proof_id",), str(path))
    if manifest.get("kind") == "prover":
        return summarise_prover_records(records, manifest)
    return summarise_verifier_records(records, manifest)
