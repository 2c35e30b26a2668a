"""Read the AdvancedMathBench release's results folders (`manifest.json` + `results.jsonl`).

`proofcheck metrics --records DIR/results.jsonl` on a release run gives our summary of the
release's own records, re-parsed with our (release-compatible) parser: the numbers can be
compared with the release's `summary.json` line by line. A release trial keeps its raw
`response` {text, finish_reason, error}; an `error` there (HTTP status, network) is an
endpoint error: an "error" pass, never a verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proofcheck.io import read_jsonl_tolerant


def _verifier_record(r: dict[str, Any]) -> dict[str, Any]:
    return {**r, "n_steps": len(r["steps"])}


def _prover_record(r: dict[str, Any]) -> dict[str, Any]:
    sample = int(r.get("sample_index", 0))
    return {**r, "proof_id": f"{r['problem_id']}#{sample}", "sample": sample, "n_steps": len(r.get("steps") or []),
            "failed": bool(r.get("generation_error")), "failure": r.get("generation_error")}


def summarise_release_results(path: str | Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Our summary of a release results file; `manifest` is the release's `manifest.json`."""
    from proofcheck.bench.scoring import summarise_prover_records, summarise_verifier_records

    records = read_jsonl_tolerant(path)
    settings = manifest.get("settings") or {}
    task = manifest.get("task")
    units = int(settings.get("samples") or 1) if task == "prover" else 1
    expected = int(manifest.get("selected_rows") or len(records)) * units
    ours = {"kind": task, "repeats": settings.get("verifier_repeats"), "passes": settings.get("verifier_repeats"),
            "rule": "unanimous", "expected_records": expected, "verifier": (manifest.get("config") or {}).get(
                "verifier", {}).get("model"), "with_reference": settings.get("use_reference_solution"),
            "meta_scale": "benchmark", "source": "AdvancedMathBench release results"}
    if task == "prover":
        recs = [_prover_record(r) for r in records]
        ours["problems"] = {r["problem_id"]: [r["domain"], r.get("subject", "")] for r in recs}
        summary = summarise_prover_records(recs, ours)
    elif task == "verifier":
        summary = summarise_verifier_records([_verifier_record(r) for r in records], ours)
    else:
        raise ValueError(f"{Path(path).parent / 'manifest.json'}: task {task!r} is neither prover nor verifier")
    summary["source"] = ours["source"]
    return summary
