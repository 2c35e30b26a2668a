"""Metrics from saved files: annotated proofs / submissions plus raw verifier outputs.

(Formerly `proofcheck/offline.py`: it reads files through `proofcheck.data.loaders`, so it
belongs above core, beside the other scoring code.)

These are what `proofcheck metrics verifier|prover` run: no model involved, so any
verifier's saved outputs (ours, a frontier API's) are scored by exactly the same code.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from proofcheck.data.loaders import DataError, load_records
from proofcheck.metrics import ProofTrials, SubmissionPasses, Trial, prover_metrics, verifier_metrics
from proofcheck.parsing import parse_verifier_output
from proofcheck.protocol import ProofFormatError


def pass_outcome(text: str, n_steps: int, finish_reason: str | None) -> str:
    """"accept", "reject" or "invalid" for one raw verifier output."""
    r = parse_verifier_output(text, n_steps, finish_reason)
    if not r.valid:
        return "invalid"
    return "accept" if r.verdict.accepts else "reject"


def _outputs_by_proof(path: str | Path, known: set[str]) -> dict[str, list]:
    outputs = load_records(path, "output")
    unknown = sorted({o.proof_id for o in outputs} - known)
    if unknown:
        raise DataError([f"{path}: proof_id: {u!r} is not in the data file" for u in unknown[:20]])
    by_proof: dict[str, list] = defaultdict(list)
    for o in outputs:
        by_proof[o.proof_id].append(o)
    for v in by_proof.values():
        v.sort(key=lambda o: o.repeat)
    return by_proof


def results_path(outputs: str | Path) -> Path | None:
    """The results file `outputs` names, when it is one: the release's output folder (its
    `results.jsonl`), or a JSONL file whose records carry `verifier_trials` (the release's
    `results.jsonl`, our `records.jsonl`). None for a plain outputs file."""
    from proofcheck.data.loaders import RESULTS_KIND, detect_kind

    path = Path(outputs)
    if path.is_dir():
        for name in ("results.jsonl", "records.jsonl"):
            if (path / name).is_file():
                return path / name
        raise FileNotFoundError(f"{path}: a folder given as --outputs must hold results.jsonl (a release run) or "
                                "records.jsonl (a proofcheck run)")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    return path if detect_kind(path) == RESULTS_KIND else None


def verifier_metrics_from_results(data: str | Path, results: Path) -> dict:
    """VerifierBench summary of a results file, gold labels taken from `data`.

    The passes are re-parsed from their stored text (the release's `response` {text,
    finish_reason, error} or ours), so the numbers are ours on the release's raw outputs; an
    endpoint error there is an error pass (never a verdict) and the run is incomplete. R is the
    manifest's repeats when a `manifest.json` sits beside the file, else the most passes any
    proof has.
    """
    import json

    from proofcheck.bench.scoring import summarise_verifier_records
    from proofcheck.data.loaders import validate_results
    from proofcheck.rundir import latest_records

    proofs = {p.proof_id: p for p in load_records(data, "annotated")}
    rows, problems = validate_results(results)
    problems += [f"{results}: proof_id: {r.get('proof_id')!r} is not in {data}" for r in rows
                 if r.get("proof_id") not in proofs][:20]
    if problems:
        raise DataError(problems)
    rows = latest_records(rows, ("proof_id",), str(results))
    manifest_path = results.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    settings = manifest.get("settings") or {}
    repeats = manifest.get("repeats") or settings.get("verifier_repeats") or max(
        (len(r["verifier_trials"]) for r in rows), default=0)
    expected = manifest.get("expected_records") or manifest.get("selected_rows") or len(rows)
    records = []
    for r in rows:
        p = proofs[r["proof_id"]]
        records.append({**r, "n_steps": len(p.steps), "domain": p.domain, "is_correct": p.gold_is_correct,
                        "first_error_step": p.gold_first_error_step})
    summary = summarise_verifier_records(records, {"repeats": repeats, "expected_records": expected,
                                                   "meta_scale": "benchmark"})
    summary["n_proofs_without_outputs"] = len(proofs) - len(records)
    summary["source"] = str(results)
    return summary


def verifier_metrics_from_files(data: str | Path, outputs: str | Path) -> dict:
    """VerifierBench metrics for saved outputs; proofs without outputs are counted, not scored.

    An output may carry `meta: {"score": x}` (from `proofcheck grade`); then meta metrics appear.
    `outputs` may also be a results file or folder (the release's `results.jsonl` or output
    folder, our `records.jsonl`): see `verifier_metrics_from_results`.
    """
    results = results_path(outputs)
    if results is not None:
        return verifier_metrics_from_results(data, results)
    proofs = {p.proof_id: p for p in load_records(data, "annotated")}
    by_proof = _outputs_by_proof(outputs, set(proofs))
    items = []
    for pid, outs in by_proof.items():
        p = proofs[pid]
        trials = []
        for o in outs:
            r = parse_verifier_output(o.text, len(p.steps), o.finish_reason)
            meta = getattr(o, "meta", None)
            score = meta.get("score") if isinstance(meta, dict) else None
            trials.append(Trial(r.valid, r.verdict.first_error_step if r.valid else None, score))
        items.append(ProofTrials(pid, p.gold_is_correct, p.gold_first_error_step, p.domain, trials))
    result = verifier_metrics(items)
    result["n_proofs_without_outputs"] = len(proofs) - len(by_proof)
    return result


def prover_metrics_from_files(problems: str | Path, submissions: str | Path, outputs: str | Path,
                              passes: int = 8) -> dict:
    """ProverBench pessimistic metrics: the first `passes` outputs of each submitted proof decide it."""
    if passes < 1:
        raise ValueError("--passes must be >= 1")
    probs = {p.problem_id: (p.domain, p.subject) for p in load_records(problems, "problem")}
    subs = load_records(submissions, "submission")
    bad = [f"{submissions}: problem_id: unknown problem {s.problem_id!r} (proof {s.proof_id})"
           for s in subs if s.problem_id not in probs]
    if bad:
        raise DataError(bad)
    by_proof = _outputs_by_proof(outputs, {s.proof_id for s in subs})
    items, problems_found = [], []
    for s in subs:
        if s.failed:
            items.append(SubmissionPasses(s.problem_id, s.sample, []))
            continue
        try:
            n_steps = len(s.step_list())
        except ProofFormatError as e:
            problems_found.append(f"{submissions}: proof: {s.proof_id}: {e}")
            continue
        outs = by_proof.get(s.proof_id, [])
        if len(outs) < passes:
            problems_found.append(f"{outputs}: proof {s.proof_id} has {len(outs)} outputs, --passes needs {passes}")
            continue
        items.append(SubmissionPasses(s.problem_id, s.sample,
                                      [pass_outcome(o.text, n_steps, o.finish_reason) for o in outs[:passes]]))
    if problems_found:
        raise DataError(problems_found)
    result = prover_metrics(probs, items)
    result["passes"] = passes
    return result
