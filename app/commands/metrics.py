"""`proofcheck metrics verifier|prover`: benchmark metrics from saved verifier outputs."""

from __future__ import annotations

import argparse
from typing import Any

from proofcheck.app.commands._common import EXIT_USAGE, JSON_HELP, add_command, add_json, fail, print_json
from proofcheck.metrics import PROVER_COUNTS, PROVER_SCORES, VERIFIER_COUNTS, VERIFIER_SCORES


def register(sub: Any) -> None:
    p = add_command(sub, "metrics", "Compute VerifierBench / ProverBench metrics from saved outputs (no model), "
                    "or recompute a scoring run's summary with --records DIR/records.jsonl.")
    p.add_argument("--records", help="a scoring run's records.jsonl: recompute its summary.json from the records alone")
    p.add_argument("--json", action="store_true", help=f"{JSON_HELP}; --records always prints JSON")
    p.set_defaults(handler=_records)
    msub = p.add_subparsers(dest="metrics_kind", metavar="<kind>")
    v = add_command(msub, "verifier", "Rough/meta TPR, TNR, Balanced F1, first-error-step accuracy, valid rate.")
    v.add_argument("--data", required=True, help="annotated proofs JSONL (VerifierBench format)")
    v.add_argument("--outputs", required=True,
                   help="verifier outputs JSONL: {proof_id, repeat, text, finish_reason[, meta]}; or a results "
                        "file read unchanged: the AdvancedMathBench release's results.jsonl (or its output folder), "
                        "a proofcheck records.jsonl")
    add_json(v)
    v.set_defaults(handler=_verifier)
    pr = add_command(msub, "prover", "Pessimistic ProverBench score: a proof counts iff all k passes accept.")
    pr.add_argument("--problems", required=True, help="problems JSONL")
    pr.add_argument("--submissions", required=True, help="submissions JSONL ({problem_id, sample, proof|steps})")
    pr.add_argument("--outputs", required=True, help="verifier outputs JSONL keyed by proof_id and repeat")
    pr.add_argument("--passes", type=int, default=8, help="passes per proof that must all accept")
    add_json(pr)
    pr.set_defaults(handler=_prover)


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def _table(title: str, splits: dict[str, dict], keys: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    t.add_column("metric")
    for name in splits:
        t.add_column(name, justify="right")
    for k in keys:
        t.add_row(k, *[_fmt(splits[s].get(k)) for s in splits])
    Console().print(t)


def _run(fn, args: argparse.Namespace, title: str, keys: list[str]) -> int:
    from proofcheck.data.loaders import DataError

    try:
        result = fn()
    except (DataError, FileNotFoundError, ValueError) as e:
        return fail(str(e))
    if args.json:
        print_json(result)
    else:
        _table(title, result["splits"], keys)
    from proofcheck.app.commands._common import finish_run

    return finish_run(result, "results", "rerun the scoring run with --resume, then compute the metrics again")


def _verifier(args: argparse.Namespace) -> int:
    from proofcheck.bench.file_metrics import verifier_metrics_from_files

    keys = [*VERIFIER_COUNTS, *VERIFIER_SCORES]
    return _run(lambda: verifier_metrics_from_files(args.data, args.outputs), args, "VerifierBench", keys)


def _prover(args: argparse.Namespace) -> int:
    from proofcheck.bench.file_metrics import prover_metrics_from_files

    keys = [*PROVER_COUNTS, *PROVER_SCORES]
    return _run(lambda: prover_metrics_from_files(args.problems, args.submissions, args.outputs, args.passes),
                args, f"ProverBench (pessimistic, {args.passes} passes)", keys)


def _records(args: argparse.Namespace) -> int:
    if not args.records:
        return fail("choose `metrics verifier`, `metrics prover`, or pass --records DIR/records.jsonl", EXIT_USAGE)
    from proofcheck.bench.scoring import summarise_records

    try:
        summary = summarise_records(args.records)
    except (FileNotFoundError, ValueError, KeyError) as e:
        return fail(f"{args.records}: {e}")
    print_json(summary)
    return 0
