"""`proofcheck data ...`: validate record files, generate synthetic tasks."""

from __future__ import annotations

import argparse
from typing import Any

from proofcheck.app.commands._common import (
    EXIT_USAGE,
    add_command,
    add_endpoint_key,
    add_json,
    fail,
    print_json,
)

KINDS = ("auto", "problem", "annotated", "submission", "output", "candidate", "results")


def register(sub: Any) -> None:
    p = add_command(sub, "data", "Validate, generate and curate data files.")
    dsub = p.add_subparsers(dest="data_command", metavar="<subcommand>")
    v = add_command(dsub, "validate", "Check JSONL files against the schemas; list every bad record as "
                    "file:line: field: reason and exit 1 if any.")
    v.add_argument("files", nargs="+", help="JSONL files to check")
    v.add_argument("--kind", choices=KINDS, default="auto",
                   help="record kind; auto guesses from the first record (verifier_trials -> results, i.e. "
                        "our records.jsonl or the release's results.jsonl; annotation -> annotated; text -> output; "
                        "sample -> submission; else problem) and says which it read")
    add_json(v)
    v.set_defaults(handler=_validate)
    s = add_command(dsub, "synth", "Write synthetic verification tasks with exact labels (arithmetic chains "
                    "with injected fatal or recoverable errors) as annotated-proof JSONL.")
    s.add_argument("--n", type=int, default=100, help="number of tasks")
    s.add_argument("--seed", type=int, default=0, help="random seed (same seed, same tasks)")
    s.add_argument("--out", required=True, help="output JSONL path (written atomically)")
    s.add_argument("--families", default="", help="proof families, comma-separated or `all` (chain, prose, "
                   "linear, expand, parity, inequality): valid/flawed pairs drawn from them; unset: arithmetic chains")
    s.add_argument("--exclude", default="", help="families to leave out (comma-separated), e.g. for a "
                   "leave-one-family-out training set")
    add_json(s)
    s.set_defaults(handler=_synth)
    b = add_command(dsub, "build", "Build a training set: validate, de-duplicate, mix origins, split by problem "
                    "(no problem in both splits), save a datasets.DatasetDict + JSONL + card that train/grpo.py reads.")
    b.add_argument("--expert", help="expert-annotated proofs JSONL")
    b.add_argument("--repaired", help="repaired proofs JSONL (from `proofcheck data repair`)")
    b.add_argument("--synthetic", type=int, default=0, help="number of synthetic tasks to add")
    b.add_argument("--mix", default="", help="share of each origin in the train split, e.g. expert=0.7,repaired=0.3 "
                   "(origins not named get none; unset: every record once). The rule train/grpo.py's mix_ratios uses")
    b.add_argument("--train-size", type=int, help="train split size with --mix (small origins are repeated); "
                   "default: as many as possible without repeating a record")
    b.add_argument("--eval-fraction", type=float, default=0.1, help="share of the problems (normalised statements) "
                   "held out whole for eval; the rule train/grpo.py's eval_fraction uses")
    b.add_argument("--balance", action="store_true", help="down-sample the train split's majority label")
    b.add_argument("--seed", type=int, default=0, help="seed for sampling and the split")
    b.add_argument("--out", required=True, help="output folder (dataset/, train.jsonl, eval.jsonl, card.json)")
    add_json(b)
    b.set_defaults(handler=_build)
    se = add_command(dsub, "select", "Uncertainty selection: verify candidates repeatedly with one or more verifiers "
                     "and keep those whose accept/reject entropy (bits, pooled) is at least --min-entropy.")
    se.add_argument("--proofs", required=True, help="candidate proofs JSONL (problem fields, proof_id, steps)")
    se.add_argument("--verifier", action="append", required=True,
                    help="a verifier: URL (a vLLM server or proofcheck service; URL#model to pick the model) or a "
                         "local model folder; repeat for several")
    se.add_argument("--repeats", type=int, default=5, help="verifier runs per proof and verifier")
    se.add_argument("--min-entropy", type=float, default=0.8, help="keep proofs with pooled entropy >= this")
    se.add_argument("--constrain-format", action="store_true", help="constrain every pass to the answer format "
                    "with vLLM structured outputs (vLLM servers and local folders; not for thinking models)")
    _add_run_args(se, "every --verifier URL")
    add_json(se)
    se.set_defaults(handler=_select)
    rp = add_command(dsub, "repair", "Positive-sample repair: a strong model rewrites expert-rejected proofs from the "
                     "expert's hint; a rewrite is kept (origin: repaired) only if every pass of every checker accepts.")
    rp.add_argument("--rejected", required=True, help="expert-annotated proofs JSONL (only flawed ones are used)")
    rp.add_argument("--repairer", required=True, help="OpenAI-compatible endpoint of the repair model (URL or URL#model)")
    rp.add_argument("--checker", action="append", required=True, help="a checking verifier: URL (a vLLM server or proofcheck "
                    "service; URL#model to pick the model) or a local model folder; repeatable")
    rp.add_argument("--passes", type=int, default=8, help="passes per checker; all must accept")
    _add_run_args(rp, "the --repairer and --checker URLs")
    add_json(rp)
    rp.set_defaults(handler=_repair)
    _register_distill(dsub)


def _register_distill(dsub: Any) -> None:
    from proofcheck.app.commands._common import ENDPOINT_MODEL_HELP, add_judge_options

    d = add_command(dsub, "distill", "Distillation through the meta-verifier: sample verifications of annotated proofs "
                    "from an endpoint, keep those graded at or above a level against the expert annotation, write an "
                    "SFT dataset with provenance.")
    d.add_argument("--data", required=True, help="expert-annotated proofs JSONL (VerifierBench format)")
    d.add_argument("--endpoint", metavar="URL", required=True, help="OpenAI-compatible base URL of the model whose "
                   "verifications are sampled (a strong model, or the current verifier on a vLLM server)")
    d.add_argument("--endpoint-model", metavar="NAME", required=True, help=ENDPOINT_MODEL_HELP)
    d.add_argument("--passes", type=int, default=4, help="k: verifications sampled per proof (one n=k request)")
    d.add_argument("--min-level", choices=("EXACT_MATCH", "BASIC_MATCH", "POOR_MATCH"), default="EXACT_MATCH",
                   help="keep a verification graded at this meta-verifier level or above (a grader failure or an "
                   "invalid answer is never kept)")
    d.add_argument("--mode", choices=("structural", "judge", "hybrid"), default=None,
                   help="grader; default: hybrid with --judge-endpoint, else structural")
    add_judge_options(d, "<out>/judge-cache")
    d.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    d.add_argument("--prompt-style", metavar="STYLE", choices=("full", "compact"), default="full", help="the "
                   "verifier prompt style of the prompts sampled and written into the SFT rows, full or compact "
                   "(train with the same prompt_style)")
    d.add_argument("--with-reference", action="store_true", help="show the verifier the reference solution (train "
                   "with include_reference_solution: true)")
    _add_run_args(d, "--endpoint")
    add_json(d)
    d.set_defaults(handler=_distill, scale="training", timeout=120.0, max_retries=3,
                   judge_max_tokens=1024)


def _add_run_args(p: argparse.ArgumentParser, key_target: str) -> None:
    p.add_argument("--concurrency", type=int, default=4, help="proofs in flight (raise it against a data-parallel "
                   "vLLM deployment)")
    p.add_argument("--max-tokens", type=int, default=1024, help="max tokens per verifier pass")
    p.add_argument("--seed", type=int, default=None, help="sampling seed")
    add_endpoint_key(p, key_target)
    p.add_argument("--out", required=True, help="run folder (records.jsonl, summary.json, outputs)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out; re-runs exactly "
                   "the passes that got an endpoint error")


def _curate(args: argparse.Namespace, run: Any, what: str) -> tuple[int, dict | None]:
    """Run `run(api_key)` with the CLI's error handling: exit 2 for an unset key variable (before any
    request), 3 for a stop on a refused key / unknown model, 1 for bad input; else (0, summary)."""
    from proofcheck.app.commands._common import EXIT_INCOMPLETE, EXIT_USAGE, UsageError, api_key
    from proofcheck.data.loaders import DataError
    from proofcheck.http_errors import EndpointStop
    from proofcheck.rundir import RunDirError

    try:
        key = api_key(args.endpoint_api_key_env, "--endpoint-api-key-env")
    except UsageError as e:
        return fail(str(e), EXIT_USAGE), None
    try:
        return 0, run(key)
    except EndpointStop as e:
        return fail(f"{e} ({what} records so far are kept in {args.out}; rerun with --resume)", EXIT_INCOMPLETE), None
    except (DataError, RunDirError, FileNotFoundError, ValueError) as e:
        return fail(str(e)), None


def _report(args: argparse.Namespace, rc: int, s: dict | None, what: str, line: Any) -> int:
    """A curation run's ending: the exit code of a failed run, else the summary (`--json`) or its one
    line `line(summary)`, then `finish_run`'s code (incomplete runs say what is missing)."""
    from proofcheck.app.commands._common import finish_run

    if s is None:
        return rc
    if args.json:
        print_json(s)
    else:
        print(line(s))
    return finish_run(s, what)


def _select(args: argparse.Namespace) -> int:
    from proofcheck.data.curate import select

    rc, s = _curate(args, lambda key: select(
        args.proofs, args.verifier, args.out, repeats=args.repeats, min_entropy=args.min_entropy,
        concurrency=args.concurrency, max_tokens=args.max_tokens, seed=args.seed, resume=args.resume, api_key=key,
        constrain="steps" if args.constrain_format else None), "selection")
    return _report(args, rc, s, "selection", lambda s: (
        f"selected {s['n_selected']} of {s['n_candidates']} proofs (entropy >= {s['min_entropy']}; "
        f"{s['invalid_outputs']} invalid outputs counted apart) -> {args.out}/selected.jsonl, entropy.png"))


def _repair(args: argparse.Namespace) -> int:
    from proofcheck.data.curate import repair

    rc, s = _curate(args, lambda key: repair(
        args.rejected, args.repairer, args.checker, args.out, passes=args.passes, concurrency=args.concurrency,
        check_max_tokens=args.max_tokens, seed=args.seed, resume=args.resume, api_key=key), "repair")
    return _report(args, rc, s, "repair", lambda s: (
        f"{s['n_accepted']} of {s['n_rejected_inputs']} repairs accepted ({s['status_counts']}) -> "
        f"{args.out}/repaired.jsonl"))


def _distill(args: argparse.Namespace) -> int:
    from proofcheck.app.commands._common import UsageError
    from proofcheck.app.commands.grade import _build_grader

    if args.passes < 1 or args.concurrency < 1:
        return fail("--passes and --concurrency must be >= 1", EXIT_USAGE)
    if args.judge_cache_dir is None:
        args.judge_cache_dir = f"{args.out}/judge-cache"
    try:
        grader = _build_grader(args)
    except UsageError as e:
        return fail(str(e), EXIT_USAGE)

    def run(key: str | None) -> dict[str, Any]:
        from proofcheck.bench.distill import distill
        from proofcheck.serve.engines import RemoteEngine

        engine = RemoteEngine(args.endpoint, args.endpoint_model, api_key=key)
        return distill(args.data, engine, args.endpoint_model, args.out, passes=args.passes, min_level=args.min_level,
                       grader=grader, temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed,
                       prompt_style=args.prompt_style, with_reference=args.with_reference, resume=args.resume,
                       concurrency=args.concurrency)

    rc, s = _curate(args, run, "distillation")
    return _report(args, rc, s, "distillation", lambda s: (
        f"kept {s['kept']} of {s['passes']} verifications (>= {s['min_level']}) from {s['proofs_with_a_kept_pass']} "
        f"of {s['proofs']} proofs; dropped: {s['invalid']} invalid, {s['grader_failures']} grader failures "
        f"(never kept) -> {s['sft_file']}"))


def _validate(args: argparse.Namespace) -> int:
    from proofcheck.data.loaders import detect_kind_why, validate_records

    total_bad, files = 0, []
    for path in args.files:
        try:
            kind, why = detect_kind_why(path) if args.kind == "auto" else (args.kind, "--kind")
            print(f"{path}: read as {kind} records ({why})")
            records, problems = validate_records(path, kind)
        except (FileNotFoundError, ValueError) as e:
            total_bad += 1
            print(f"{path}: {e}")
            files.append({"path": path, "kind": None, "n_valid": 0, "problems": [str(e)]})
            continue
        for line in problems:
            print(line)
        total_bad += len(problems)
        status = "ok" if not problems else f"{len(problems)} problem(s)"
        print(f"{path}: {len(records)} valid {kind} record(s), {status}")
        files.append({"path": path, "kind": kind, "why": why, "n_valid": len(records), "problems": problems})
    if args.json:  # the lines above went to stderr
        print_json({"ok": not total_bad, "n_problems": total_bad, "files": files})
    return 1 if total_bad else 0


def _synth(args: argparse.Namespace) -> int:
    from proofcheck.data.synth import make_tasks
    from proofcheck.io import write_jsonl_atomic

    if args.n < 1:
        return fail("--n must be >= 1", EXIT_USAGE)
    if args.families or args.exclude:
        from proofcheck.data.families import family_names, family_selection
        from proofcheck.data.synth import balanced_tasks

        try:
            tasks = balanced_tasks(args.n, seed=args.seed, families=family_selection(args.families),
                                   exclude=family_names(args.exclude))
        except ValueError as e:
            return fail(f"{e} (--families / --exclude)", EXIT_USAGE)
    else:
        tasks = make_tasks(args.n, seed=args.seed)
    write_jsonl_atomic(args.out, tasks)
    n_valid = sum(t["is_correct"] for t in tasks)
    print(f"wrote {len(tasks)} synthetic tasks ({n_valid} valid, {len(tasks) - n_valid} flawed) to {args.out}")
    if args.json:
        print_json({"out": args.out, "n": len(tasks), "n_valid": n_valid, "n_flawed": len(tasks) - n_valid})
    return 0


def _build(args: argparse.Namespace) -> int:
    from proofcheck.data.build import build_dataset, parse_mix
    from proofcheck.data.loaders import DataError

    try:
        c = build_dataset(args.out, expert=args.expert, repaired=args.repaired, synthetic=args.synthetic,
                          shares=parse_mix(args.mix), train_size=args.train_size, eval_fraction=args.eval_fraction,
                          balance_labels=args.balance, seed=args.seed)
    except (DataError, FileNotFoundError, ValueError) as e:
        return fail(str(e))
    for name, s in c["splits"].items():
        print(f"{name}: {s['n']} records from {s['problems']} problems ({s['label']['valid']} valid, "
              f"{s['label']['invalid']} invalid), origins {s['origin']}")
    print(f"duplicates removed: {c['duplicates_removed']}; saved to {args.out}")
    if args.json:
        print_json({"out": args.out, **c})
    return 0
