"""`proofcheck grade`: meta-verifier grades for saved verifier outputs (structural, judge, hybrid)."""

from __future__ import annotations

import argparse
from typing import Any

from proofcheck.app.commands._common import (
    EXIT_INCOMPLETE,
    EXIT_USAGE,
    SCALE_HELP,
    UsageError,
    add_command,
    add_deprecated,
    add_json,
    add_judge_options,
    api_key,
    fail,
    finish_run,
    print_json,
    read_judge_template,
)

MODES = ("structural", "judge", "hybrid")


def register(sub: Any) -> None:
    p = add_command(
        sub, "grade", "Grade saved verifier outputs against the expert annotation (meta-verifier levels).",
        "Grade each verifier output (EXACT_MATCH / BASIC_MATCH / POOR_MATCH / WRONG_POLARITY) against the "
        "annotated proofs. Structural grading compares step indices (no model); a judge endpoint adds an LLM "
        "judge (hybrid: the lower of the two levels). One JSON line per output is appended to --out as it "
        "goes; a re-run skips outputs already graded and retries earlier grader failures. Exit 3 while any output "
        "is ungraded (judge endpoint errors and unparsable judge answers are counted, never scored).")
    p.add_argument("--data", required=True, help="annotated proofs JSONL (VerifierBench format)")
    p.add_argument("--outputs", required=True, help="verifier outputs JSONL: {proof_id, repeat, text, finish_reason}")
    p.add_argument("--out", required=True, help="grades JSONL (appended; resumable)")
    p.add_argument("--mode", choices=MODES, default=None,
                   help="grader; default: hybrid with --judge-endpoint, else structural")
    p.add_argument("--scale", choices=("benchmark", "training"), default="benchmark", help=SCALE_HELP)
    add_judge_options(p, "none")
    p.add_argument("--concurrency", type=int, default=8, help="judge requests in flight at most")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per judge request")
    p.add_argument("--max-retries", type=int, default=3, help="retries per judgement (5xx, 429, timeouts, garbage)")
    p.add_argument("--judge-max-tokens", type=int, default=1024, help="max tokens of the judge's answer")
    add_deprecated(p, "--max-tokens", "--judge-max-tokens", "judge_max_tokens", type=int)
    add_json(p)
    p.set_defaults(handler=_grade)


def _build_grader(args: argparse.Namespace) -> Any:
    from proofcheck.reward.client import JudgeConfig
    from proofcheck.reward.grading import Grader

    mode = args.mode or ("hybrid" if args.judge_endpoint else "structural")
    if mode != "structural" and not args.judge_endpoint:
        raise UsageError(f"--mode {mode} needs a judge: pass --judge-endpoint URL and --judge-model NAME")
    if args.judge_endpoint and not args.judge_model:
        raise UsageError("--judge-endpoint needs --judge-model (the name the endpoint serves)")
    judge, template = None, None
    if args.judge_prompt_file:
        if not args.judge_endpoint:
            raise UsageError("--judge-prompt-file needs a judge: pass --judge-endpoint URL and --judge-model NAME")
        template = read_judge_template(args.judge_prompt_file)
    if mode != "structural":
        judge = JudgeConfig(endpoint=args.judge_endpoint, model=args.judge_model,
                            api_key_env=args.judge_api_key_env, concurrency=args.concurrency,
                            timeout_s=args.timeout, max_retries=args.max_retries,
                            max_tokens=args.judge_max_tokens, cache_dir=args.judge_cache_dir)
    return Grader(mode, args.scale, judge, template)


def _print_summary(summary: dict[str, Any], mode: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Meta-verifier grades ({mode}, {summary['n_outputs']} outputs)")
    t.add_column("level")
    t.add_column("count", justify="right")
    for name, count in summary["levels"].items():
        t.add_row(name, str(count))
    mean = summary["mean_score"] if summary["complete"] else summary["mean_score_so_far"]
    label = "mean score" if summary["complete"] else "mean score (incomplete, so far)"
    t.add_row(label, "-" if mean is None else f"{mean:.4f}")
    t.add_row("grader failures", str(summary["grader_failures"]))
    t.add_row("judge endpoint errors", str(summary["errored_passes"]))
    for k, v in summary.get("judge", {}).items():
        if k != "failure_reasons":
            t.add_row(f"judge {k.replace('_', ' ')}", str(v))
    Console().print(t)


def _grade(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from proofcheck.data.loaders import DataError
    from proofcheck.http_errors import EndpointStop
    from proofcheck.reward.grading import grade_files

    try:
        api_key(args.judge_api_key_env, "--judge-api-key-env")  # an unset key variable: usage error, before any request
        grader = _build_grader(args)
    except UsageError as e:
        return fail(str(e), EXIT_USAGE)
    except ValueError as e:
        return fail(str(e))
    with Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  transient=True, console=Console(stderr=True)) as progress:
        task = progress.add_task("grade", total=None)

        def on_start(total: int, done: int) -> None:
            progress.update(task, total=total, completed=done)

        try:
            summary = grade_files(grader, args.data, args.outputs, args.out, on_start=on_start,
                                  on_result=lambda row: progress.advance(task))
        except EndpointStop as e:
            return fail(f"{e} (grades so far are kept in {args.out}; rerun the same command to continue)",
                        EXIT_INCOMPLETE)
        except (DataError, FileNotFoundError, ValueError) as e:
            return fail(str(e))
    if args.json:
        print_json(summary)
    else:
        _print_summary(summary, grader.mode)
    return finish_run(summary, "grading", "rerun the same command: it grades exactly the outputs not graded yet")
