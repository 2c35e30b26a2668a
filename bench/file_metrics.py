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


def verifier_metrics_from_files(data: str | Path, outputs: str | Path) -> dict:
    """VerifierBench metrics for saved outputs; proofs without outputs are counted, not scored.

    An output may carry `meta: {"score": x}` (from `proofcheck grade`); then meta metrics appear.
    """
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
