"""`proofcheck score prover|verifier`: crash-safe scoring runs with summary, report and plots."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from proofcheck.app.commands._common import (
    ENDPOINT_MODEL_HELP,
    EXIT_INCOMPLETE,
    EXIT_USAGE,
    MAX_TOKENS_CLIENT_HELP,
    MODEL_HELP,
    RULE_HELP,
    UsageError,
    add_chat_template_kwargs,
    add_command,
    add_endpoint_key,
    add_json,
    add_judge_options,
    add_prompt_style,
    api_key,
    deprecation_warning,
    fail,
    finish_run,
    generation_settings,
    print_json,
    prompt_style,
    read_judge_template,
)
from proofcheck.metrics import PROVER_COUNTS, PROVER_SCORES, RUN_FAILURES, VERIFIER_COUNTS, VERIFIER_SCORES
from proofcheck.protocol import DEFAULT_PROMPT_STYLE


def _add_verifier_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--endpoint", metavar="URL", help="a proofcheck service or any OpenAI-compatible server (base URL, e.g. "
                     "http://127.0.0.1:8000/v1)")
    src.add_argument("--model", metavar="PATH_OR_ID", help=f"{MODEL_HELP}, run in-process with vLLM")
    p.add_argument("--endpoint-model", metavar="NAME", help=f"{ENDPOINT_MODEL_HELP} (default: its first model)")
    add_endpoint_key(p)
    p.add_argument("--prompt-file", help="verifier prompt file in the AdvancedMathBench release's format (one user "
                   "message with {problem}, {human_solution}, {solution}); its hash is kept in the manifest")
    add_prompt_style(p)
    p.add_argument("--concurrency", type=int, default=4, help="proofs verified at once")
    p.add_argument("--max-tokens", type=int, default=None, help=MAX_TOKENS_CLIENT_HELP)
    p.add_argument("--seed", type=int, default=None, help="sampling seed (same seed, same passes on vLLM)")
    p.add_argument("--out", required=True, help="run folder: records.jsonl, summary.json, report.md, *.png")
    add_chat_template_kwargs(p)  # e.g. Qwen3's thinking switch, set explicitly
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out (same inputs and "
                   "prompt only); re-runs exactly the passes that got an endpoint error")
    add_json(p)


def register(sub: Any) -> None:
    p = add_command(sub, "score", "Score ProverBench submissions or evaluate a verifier on VerifierBench data.")
    ssub = p.add_subparsers(dest="score_kind", metavar="<kind>")
    pr = add_command(ssub, "prover", "Verify every submitted proof with k passes; pessimistic score (all passes "
                     "must accept) for all / ugd / qe / subjects, report and plots.")
    pr.add_argument("--problems", required=True, help="problems JSONL (AdvancedMathBench format)")
    pr.add_argument("--submissions", required=True, help="submissions JSONL ({problem_id, sample, proof|steps})")
    pr.add_argument("--passes", type=int, default=8, help="verifier passes per proof")
    pr.add_argument("--rule", metavar="RULE", default="unanimous", help=RULE_HELP + "; the records' decision. The "
                    "pessimistic score is unanimity's whatever the rule, and a model card's calibrated rule is "
                    "scored beside it (calibrated_score)")
    _add_verifier_args(pr)
    pr.set_defaults(handler=_prover)
    v = add_command(ssub, "verifier", "Run the verifier R times on every annotated proof; rough and meta Balanced F1, "
                    "TPR/TNR, first-error-step accuracy, report and plots.")
    v.add_argument("--data", required=True, help="annotated proofs JSONL (VerifierBench format)")
    v.add_argument("--repeats", type=int, default=4, help="verifier runs per proof")
    v.add_argument("--with-reference", action="store_true", help="show the verifier the reference solution (the "
                   "release's VerifierBench does not; off by default)")
    add_judge_options(v, "<out>/judge-cache")
    _add_verifier_args(v)
    v.set_defaults(handler=_verifier)
    register_generate(sub)


def _print(summary: dict, args: argparse.Namespace, keys: tuple[str, ...], title: str) -> None:
    if args.json:
        print_json(summary)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    t.add_column("metric")
    for name in summary["splits"]:
        t.add_column(name, justify="right")
    for k in keys:
        t.add_row(k, *["-" if s.get(k) is None else f"{s[k]:.4f}" if isinstance(s[k], float) else str(s[k])
                       for s in summary["splits"].values()])
    Console().print(t)
    print(f"report: {args.out}/report.md  summary: {args.out}/summary.json  plots: {args.out}/*.png")


def _make_verifier(args: argparse.Namespace, template: str | None, style: str,
                   card: dict | None = None) -> tuple[Any, str]:
    """The verifier the run uses, and the id recorded in its manifest (a resume must match it).

    With --model, the chat template options and tokens per pass default to the model's card
    (`card`: what it was trained with); an endpoint applies its own.
    """
    import json
    import os

    from proofcheck.serve.verifier import make_verifier

    key = api_key(args.endpoint_api_key_env, "--endpoint-api-key-env")
    gen = None if args.endpoint else generation_settings(card, args, args.model)
    ctk = gen.chat_template_kwargs if gen else args.chat_template_kwargs
    # the template's switches change every prompt: a resume must use the same ones
    suffix = f" chat_template_kwargs:{json.dumps(ctk, sort_keys=True)}" if ctk else ""
    if gen is None:
        # a service renders its own style (and refuses an explicit other one); vLLM takes --prompt-style or full
        v = make_verifier(endpoint=args.endpoint, model=args.endpoint_model, api_key=key, max_tokens=args.max_tokens,
                          prompt_template=template, chat_template_kwargs=ctk, prompt_style=args.prompt_style)
        return v, f"{args.endpoint}#{args.endpoint_model or 'default'}{suffix}"
    return (make_verifier(model=args.model, max_tokens=gen.max_tokens, prompt_template=template,
                          chat_template_kwargs=ctk, prompt_style=style, max_model_len=gen.max_model_len),
            f"local:{os.path.abspath(args.model)}{suffix}")


def _check(args: argparse.Namespace) -> str | None:
    if args.concurrency < 1:
        return "--concurrency must be >= 1"
    if getattr(args, "passes", 1) < 1 or getattr(args, "repeats", 1) < 1:
        return "--passes / --repeats must be >= 1"
    if args.prompt_file and args.prompt_style:
        return "--prompt-file replaces our prompt, so --prompt-style does not apply: give one of them"
    return None


def _template(args: argparse.Namespace, style: str = DEFAULT_PROMPT_STYLE) -> tuple[str | None, str]:
    """The prompt file's text (or None) and the prompt hash for the manifest (our prompt: in `style`)."""
    from proofcheck.protocol import check_template, prompt_sha256

    if not args.prompt_file:
        return None, prompt_sha256(style=style)
    text = open(args.prompt_file, encoding="utf-8").read()
    check_template(text, args.prompt_file)
    return text, prompt_sha256(text)


def _finish(summary: dict) -> int:
    """0 for a complete run; 3 (and what is missing, on stderr) for an incomplete one."""
    return finish_run(summary)


def _prover(args: argparse.Namespace) -> int:
    card = _model_card(args)
    try:
        style = _style(args, card)  # warns here when --prompt-style differs from the card
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    if (msg := _check(args)) is not None:
        return fail(msg, EXIT_USAGE)
    from proofcheck.bench.scoring import score_prover
    from proofcheck.data.loaders import DataError
    from proofcheck.http_errors import EndpointStop
    from proofcheck.rundir import RunDirError

    try:
        calibrated = _prover_rules(args)
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    try:
        template, phash = _template(args, style)
        verifier, verifier_id = _make_verifier(args, template, style, card)
        summary = score_prover(args.problems, args.submissions, verifier, verifier_id, args.out,
                               passes=args.passes, rule=args.rule, concurrency=args.concurrency, resume=args.resume,
                               max_tokens=verifier.max_tokens, seed=args.seed, prompt_hash=phash,
                               calibrated=calibrated)
    except UsageError as e:
        return fail(str(e), EXIT_USAGE)
    except EndpointStop as e:
        return fail(f"{e} (records so far are kept in {args.out}; rerun with --resume)", EXIT_INCOMPLETE)
    except (DataError, RunDirError, FileNotFoundError, ValueError) as e:
        return fail(str(e))
    cal = ("calibrated_score",) if calibrated else ()
    _print(summary, args, (*PROVER_COUNTS, *PROVER_SCORES, *cal, *RUN_FAILURES),
           f"ProverBench ({args.rule}, {args.passes} passes"
           + (f"; calibrated_score: {summary.get('calibrated_rule')}, from the model card)" if calibrated else ")"))
    return _finish(summary)


def _prover_rules(args: argparse.Namespace) -> tuple[str, int] | None:
    """Check `--rule` against `--passes`; the verifier's calibrated (rule, k) from its model card (a local
    folder's, or what a proofcheck service reports in GET /health), None when it has none."""
    from proofcheck.decision import CARD_RULE, check_rule, check_rule_name

    if args.rule == CARD_RULE:
        raise ValueError("score prover: --rule card is not needed: the pessimistic score (unanimity) is always "
                         "reported, and the model card's calibrated rule beside it (calibrated_score); drop --rule, "
                         "or name a rule: unanimous, majority, any, at_least:T")
    check_rule_name(args.rule)
    check_rule(args.rule, args.passes)
    if args.model:
        from proofcheck.prompt_card import card_rule, read_calibration

        record = read_calibration(args.model)
        if record is None:
            return None
        try:
            rule, k, _ = card_rule({"calibration": record}, args.model)
        except ValueError as e:
            print(f"warning: {e}; scoring the pessimistic rule alone", file=sys.stderr)
            return None
        return rule, k
    from proofcheck.serve.verifier import service_health

    got = (service_health(args.endpoint) or {}).get("card_rule")
    return (str(got["rule"]), int(got["passes"])) if isinstance(got, dict) else None


def _served_prompt_card(endpoint: str) -> dict | None:
    """The served model's prompt settings from a proofcheck service's GET /health (None elsewhere):
    `prompt_style` (the style it renders) always, `with_reference` when the service knows it."""
    from proofcheck.serve.verifier import service_health

    health = service_health(endpoint)
    if health is None:
        return None
    card: dict[str, Any] = {"prompt_style": health.get("prompt_style") or DEFAULT_PROMPT_STYLE}
    if isinstance(flag := health.get("trained_with_reference"), bool):
        card["with_reference"] = flag
    return card


def _model_card(args: argparse.Namespace) -> dict | None:
    """What the model was trained with: a local folder's prompt card, or what a proofcheck service reports."""
    from proofcheck.prompt_card import read_prompt_card

    return read_prompt_card(args.model) if args.model else _served_prompt_card(args.endpoint)


def _style(args: argparse.Namespace, card: dict | None) -> str:
    """Our prompt's style for this run: a service's own; else --prompt-style, the model's card, full
    (warning when an explicit flag differs from the card)."""
    if args.endpoint:
        return card["prompt_style"] if card else args.prompt_style or DEFAULT_PROMPT_STYLE
    return prompt_style(args.prompt_style, card, args.model)


def _warn_reference_mismatch(args: argparse.Namespace, card: dict | None) -> None:
    """Warn when the model was trained with the other reference-solution setting."""
    from proofcheck.prompt_card import reference_mismatch

    if msg := reference_mismatch(card, args.with_reference):
        print(f"warning: {args.model or args.endpoint}: {msg}", file=sys.stderr)


def _verifier(args: argparse.Namespace) -> int:
    card = _model_card(args)
    _warn_reference_mismatch(args, card)
    try:
        style = _style(args, card)  # warns here when --prompt-style differs from the card
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    if (msg := _check(args)) is not None:
        return fail(msg, EXIT_USAGE)
    if bool(args.judge_endpoint) != bool(args.judge_model):
        return fail("--judge-endpoint and --judge-model go together", EXIT_USAGE)
    from proofcheck.bench.scoring import score_verifier
    from proofcheck.data.loaders import DataError
    from proofcheck.http_errors import EndpointStop
    from proofcheck.protocol import prompt_sha256
    from proofcheck.rundir import RunDirError

    if args.judge_prompt_file and not args.judge_endpoint:
        return fail("--judge-prompt-file needs a judge: pass --judge-endpoint URL and --judge-model NAME", EXIT_USAGE)
    try:
        judge_template = read_judge_template(args.judge_prompt_file) if args.judge_prompt_file else None
        template, phash = _template(args, style)
        verifier, verifier_id = _make_verifier(args, template, style, card)
        from proofcheck.bench.meta import make_trial_grader

        # meta levels always: structural without a judge, hybrid min(structural, judge) with one
        api_key(args.judge_api_key_env, "--judge-api-key-env")  # an unset variable: usage error, before any request
        grader = make_trial_grader(args.judge_endpoint, args.judge_model,
                                   args.judge_cache_dir or f"{args.out}/judge-cache", judge_template=judge_template,
                                   with_reference=args.with_reference, judge_api_key_env=args.judge_api_key_env)
        judge_id = f"hybrid:{args.judge_model}@{args.judge_endpoint}" if args.judge_endpoint else "structural"
        if judge_template is not None:  # a resume refuses another judge prompt
            judge_id += f" prompt_sha256:{prompt_sha256(judge_template)}"
        summary = score_verifier(args.data, verifier, verifier_id, args.out, repeats=args.repeats,
                                 grader=grader, judge_id=judge_id,
                                 concurrency=args.concurrency, resume=args.resume, max_tokens=verifier.max_tokens,
                                 seed=args.seed, with_reference=args.with_reference, prompt_hash=phash)
    except UsageError as e:
        return fail(str(e), EXIT_USAGE)
    except EndpointStop as e:
        return fail(f"{e} (records so far are kept in {args.out}; rerun with --resume)", EXIT_INCOMPLETE)
    except (DataError, RunDirError, FileNotFoundError, ValueError) as e:
        return fail(str(e))
    ref = "with reference solution" if args.with_reference else "no reference solution"
    _print(summary, args, (*VERIFIER_COUNTS, *VERIFIER_SCORES),
           f"VerifierBench ({args.repeats} repeats, {ref}, meta on the benchmark scale 1/.75/.5/0)")
    return _finish(summary)


def register_generate(sub: Any) -> None:
    g = add_command(sub, "generate", "Write ProverBench submissions with a prover model: each proof's steps in "
                    "<step> tags; cut-off or empty generations are kept as failed samples (score 0).")
    g.add_argument("--problems", required=True, help="problems JSONL")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--endpoint", metavar="URL", help="OpenAI-compatible base URL of the prover (with --endpoint-model)")
    g.add_argument("--model", metavar="PATH_OR_ID", help=f"{MODEL_HELP}, run in-process with vLLM")
    g.add_argument("--endpoint-model", metavar="NAME", help=ENDPOINT_MODEL_HELP)
    add_endpoint_key(g)
    g.add_argument("--samples", type=int, default=4, help="proofs per problem (one n=S request)")
    g.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    g.add_argument("--max-tokens", type=int, default=4096, help="max tokens per proof")
    g.add_argument("--seed", type=int, default=None, help="sampling seed")
    g.add_argument("--concurrency", type=int, default=4, help="problems in flight at once")
    g.add_argument("--out", required=True, help="submissions JSONL (appended as samples arrive)")
    g.add_argument("--resume", action="store_true", help="continue an interrupted run: generate exactly the samples "
                   "still missing (including those that got an endpoint error)")
    add_json(g)
    g.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    if args.samples < 1 or args.concurrency < 1:
        return fail("--samples and --concurrency must be >= 1", EXIT_USAGE)
    from proofcheck.bench.generate import generate
    from proofcheck.data.loaders import DataError
    from proofcheck.http_errors import EndpointStop

    if args.endpoint and args.endpoint_model is None and args.model:
        deprecation_warning("--model NAME with --endpoint", "--endpoint-model NAME")
        args.endpoint_model, args.model = args.model, None
    if args.endpoint and not args.endpoint_model:
        return fail("--endpoint needs --endpoint-model NAME (the prover's name at the endpoint)", EXIT_USAGE)
    if not args.endpoint and not args.model:
        return fail("give --model PATH_OR_ID (in-process vLLM) or --endpoint URL --endpoint-model NAME", EXIT_USAGE)
    try:
        key = api_key(args.endpoint_api_key_env, "--endpoint-api-key-env")
    except UsageError as e:
        return fail(str(e), EXIT_USAGE)
    name = args.endpoint_model if args.endpoint else args.model
    if args.endpoint:
        from proofcheck.serve.engines import RemoteEngine

        engine = RemoteEngine(args.endpoint, name, api_key=key)
    else:
        from proofcheck.serve.inprocess import InProcessEngine

        engine = InProcessEngine(args.model, seed=args.seed or 0)
    try:
        counts = generate(args.problems, engine, name, args.out, samples=args.samples,
                          temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed,
                          resume=args.resume, concurrency=args.concurrency)
    except EndpointStop as e:
        return fail(f"{e} (samples so far are kept in {args.out}; rerun with --resume)", EXIT_INCOMPLETE)
    except (DataError, FileNotFoundError, ValueError) as e:
        return fail(str(e))
    if args.json:
        print_json({"out": args.out, **counts})
    else:
        print(f"{args.out}: {counts['written']} submissions ({counts['failed']} failed generations kept as failed)")
    if counts["errored"]:
        first = counts["errors"][0]
        print(f"incomplete: {counts['errored']} samples got an endpoint error and were not written (first: "
              f"{first['error']}); rerun with --resume to generate exactly those", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0
