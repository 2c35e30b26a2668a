"""`proofcheck bench ...`: benchmark harnesses. `bench mcq` runs the LiveMathematicianBench
multiple-choice evaluation against vLLM / OpenAI / Azure OpenAI / Anthropic endpoints."""

from __future__ import annotations

import argparse
import os
from typing import Any

from proofcheck.app.commands._common import (
    ENDPOINT_MODEL_HELP,
    EXIT_INCOMPLETE,
    EXIT_USAGE,
    add_command,
    add_deprecated,
    add_json,
    fail,
    print_json,
)

BACKENDS = ("vllm", "openai", "azure", "anthropic")
EFFORTS = ("low", "medium", "high", "xhigh")
KEY_ENV = {"vllm": "VLLM_API_KEY", "openai": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY",
           "anthropic": "ANTHROPIC_API_KEY"}

MCQ_DESCRIPTION = """\
Evaluate a model on the LiveMathematicianBench hard split (five-way multiple choice).

Reads <data-dir>/<month>/hard/qaEval_<month>_ge5_hard.json, shuffles the five options of item i
with random.Random(seed + i), asks for the letter in \\boxed{}, and writes
<results-dir>/<month>/accuracy_test_<model>_<month>_<effort|default>[_sketch].json. Each finished
item is appended at once to <results file>.journal.jsonl; the results file is a snapshot, valid
JSON at every moment, rewritten as it grows, every 30 s, and at the end (when the journal goes).
--resume reads both and re-runs only unanswered or failed items.

API keys: the variable --endpoint-api-key-env names, else the backend's usual one (VLLM_API_KEY,
OPENAI_API_KEY, AZURE_OPENAI_API_KEY, ANTHROPIC_API_KEY). Keys are never printed or written to results."""


def register(sub: Any) -> None:
    p = add_command(sub, "bench", "Benchmark harnesses (LiveMathematicianBench MCQ).")
    bsub = p.add_subparsers(dest="bench_command", metavar="<benchmark>")
    _register_mcq(bsub)


def _register_mcq(bsub: Any) -> None:
    m = add_command(bsub, "mcq", "LiveMathematicianBench multiple-choice evaluation.", MCQ_DESCRIPTION)
    m.add_argument("--month", nargs="+", required=True, help="month(s) to evaluate, e.g. 202511 202512")
    m.add_argument("--backend", choices=BACKENDS, required=True, help="API flavour of the model endpoint")
    m.add_argument("--endpoint-model", metavar="NAME", help=f"{ENDPOINT_MODEL_HELP} (Azure: the deployment name); "
                   "it names the results file")
    add_deprecated(m, "--model", "--endpoint-model", "endpoint_model", metavar="NAME")
    m.add_argument("--endpoint", metavar="URL", help="the API's base URL (vllm: required, e.g. "
                   "http://localhost:8000/v1; openai default https://api.openai.com/v1; anthropic default "
                   "https://api.anthropic.com; azure: the resource, e.g. https://NAME.openai.azure.com)")
    add_deprecated(m, "--base-url", "--endpoint", "endpoint", metavar="URL")
    m.add_argument("--endpoint-api-key-env", metavar="VAR", help="environment variable holding the API key sent to "
                   "--endpoint (default: the backend's usual variable, see above)")
    add_deprecated(m, "--api-key", "--endpoint-api-key-env VAR (a key on the command line is visible to other "
                   "users)", "api_key", metavar="KEY")
    m.add_argument("--api-version", help="Azure api-version (chat default 2024-12-01-preview; Responses API "
                   "default 'v1' = /openai/v1/responses)")
    m.add_argument("--data-dir", default="data/lmb", help="folder holding <month>/hard/qaEval_<month>_ge5_hard.json")
    m.add_argument("--results-dir", default="results", help="output folder")
    m.add_argument("--reasoning-effort", choices=EFFORTS, help="reasoning effort sent to the model (file tag: "
                   "'default' when unset)")
    m.add_argument("--max-tokens", type=int, default=16384, help="max completion/output tokens per reply")
    m.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    m.add_argument("--seed", type=int, default=42, help="shuffle seed (item i uses seed + i)")
    m.add_argument("--n", type=int, default=1, help="samples per question (all kept under 'samples')")
    m.add_argument("--resume", action="store_true", help="keep answered items of an existing results file")
    m.add_argument("--timeout", type=float, default=3600.0, help="HTTP client timeout in seconds (connect/read)")
    m.add_argument("--request-timeout", type=float, default=3600.0, help="wall-clock limit of one request, s")
    m.add_argument("--max-retries", type=int, default=4, help="retries on 429/5xx/timeouts/connection errors")
    m.add_argument("--retry-backoff", type=float, default=1.0, help="first retry delay in s (doubles each time)")
    m.add_argument("--temperature", type=float, help="sampling temperature (vllm default 1.0; other backends "
                   "send it only when given)")
    m.add_argument("--top-p", type=float, help="nucleus sampling (vllm default 0.95; others only when given)")
    m.add_argument("--thinking-budget", type=int, help="anthropic: extended thinking budget_tokens")
    m.add_argument("--use-responses-api", action="store_true", help="use the Responses API instead of chat "
                   "completions (automatic for model names containing gpt-5.4)")
    m.add_argument("--add-sketch", action="store_true", help="append the (expanded) proof sketch as hints; "
                   "adds _sketch to the file name")
    m.add_argument("--strict-parse", action="store_true", help="accept only a \\boxed{A-E} answer (no fallbacks)")
    m.add_argument("--debug", action="store_true", help="one item per month, prompt and reply printed, "
                   "written to a separate *_debug.json file")
    add_json(m)
    m.set_defaults(handler=_mcq)


def _settings(args: argparse.Namespace) -> Any:
    """BackendSettings from the arguments; raises ValueError with the fix for bad combinations."""
    from proofcheck.bench.mcq_backends import DEFAULT_BASE_URLS, BackendSettings

    b = args.backend
    if not getattr(args, "endpoint_model", None):
        raise ValueError("--endpoint-model NAME is required (the model's name at the endpoint; Azure: the deployment)")
    base = args.endpoint or DEFAULT_BASE_URLS.get(b)
    if not base:
        raise ValueError({"vllm": "--backend vllm needs --endpoint (e.g. http://localhost:8000/v1)",
                          "azure": "--backend azure needs --endpoint (e.g. https://NAME.openai.azure.com)"}[b])
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"endpoint URL must start with http:// or https://, got {base!r}")
    responses = args.use_responses_api or "gpt-5.4" in args.endpoint_model
    if b == "anthropic":
        if args.use_responses_api:
            raise ValueError("--use-responses-api is for OpenAI-style backends, not anthropic")
        responses = False
        if args.reasoning_effort == "xhigh":
            raise ValueError("anthropic accepts --reasoning-effort low|medium|high")
    if args.thinking_budget is not None:
        if b != "anthropic":
            raise ValueError("--thinking-budget applies to --backend anthropic; use --reasoning-effort otherwise")
        if not 0 < args.thinking_budget < args.max_tokens:
            raise ValueError("--thinking-budget must be positive and below --max-tokens (the thinking "
                             "budget is part of max_tokens)")
    for name in ("max_tokens", "concurrency", "n"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
    if args.max_retries < 0 or args.timeout <= 0 or args.request_timeout <= 0 or args.retry_backoff < 0:
        raise ValueError("--max-retries/--retry-backoff must be >= 0 and timeouts > 0")
    env = args.endpoint_api_key_env or KEY_ENV[b]
    key = getattr(args, "api_key", None) or os.environ.get(env)
    if args.endpoint_api_key_env and not key:
        raise ValueError(f"--endpoint-api-key-env {env}: the variable {env} is not set (or empty)")
    if not key and b != "vllm":
        raise ValueError(f"--backend {b} needs an API key: set {KEY_ENV[b]} or name a variable with "
                         "--endpoint-api-key-env")
    temperature, top_p = args.temperature, args.top_p
    if b == "vllm":
        temperature = 1.0 if temperature is None else temperature
        top_p = 0.95 if top_p is None else top_p
    return BackendSettings(backend=b, model=args.endpoint_model, base_url=base, api_key=key, api_version=args.api_version,
                           use_responses_api=responses, max_tokens=args.max_tokens,
                           reasoning_effort=args.reasoning_effort, temperature=temperature, top_p=top_p,
                           thinking_budget=args.thinking_budget, timeout_s=args.timeout,
                           request_timeout_s=args.request_timeout, max_retries=args.max_retries,
                           backoff_s=args.retry_backoff)


def _mcq(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from proofcheck.bench.mcq_run import ResumeMismatch, RunConfig, prepare_month
    from proofcheck.data.loaders import DataError

    try:
        settings = _settings(args)
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    cfg = RunConfig(months=list(dict.fromkeys(args.month)), settings=settings, data_dir=Path(args.data_dir),
                    results_dir=Path(args.results_dir), seed=args.seed, n=args.n, concurrency=args.concurrency,
                    resume=args.resume, add_sketch=args.add_sketch, strict_parse=args.strict_parse,
                    debug=args.debug)
    try:  # validate every month's file (and resumable results) before the first request
        prepared = [prepare_month(cfg, month) for month in cfg.months]
    except (DataError, FileNotFoundError, ResumeMismatch) as e:
        return fail(str(e))
    docs = asyncio.run(_run_all(cfg, prepared))
    if args.json:  # the table goes to stderr
        print_json({"results": [str(run.path) for run, _ in prepared],
                    "months": {d["test_info"]["month"]: d["summary"]["all"] for d in docs}})
    _print_table(docs, [run.path for run, _ in prepared])
    failed = sum(d["summary"]["all"]["errors"] for d in docs)
    if failed:
        return fail(f"{failed} item(s) failed after retries (see their 'error' field); rerun the same "
                    "command with --resume to retry only those", EXIT_INCOMPLETE)
    return 0


async def _run_all(cfg: Any, prepared: list[tuple[Any, list[int]]]) -> list[dict[str, Any]]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from proofcheck.bench.mcq_backends import McqClient
    from proofcheck.bench.mcq_prompt import SYSTEM_PROMPT, build_user_prompt
    from proofcheck.bench.mcq_run import run_month

    console = Console(stderr=True)
    docs = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    async with McqClient(cfg.settings) as client:
        with Progress(*columns, console=console) as progress:
            for run, pending in prepared:
                kept = len(run.items) - len(pending)
                if kept:
                    progress.console.print(f"{run.month}: resuming, {kept} item(s) kept, {len(pending)} to run")
                task = progress.add_task(f"{run.month}", total=len(run.items), completed=kept)

                def on_item(rec: dict[str, Any], task: Any = task, run: Any = run) -> None:
                    progress.advance(task)
                    mark = "ok " if rec["is_correct"] else "err" if rec["error"] else "no "
                    progress.console.print(f"  {mark} {rec['id']}  answer={rec['model_answer']} "
                                           f"correct={rec['correct_answer']} {rec['elapsed_seconds']:.1f}s"
                                           + (f"  error: {rec['error']}" if rec["error"] else ""))
                    if cfg.debug:
                        item = run.items[rec["index"]]
                        options = run.shuffled[rec["index"]][0]
                        progress.console.print(f"[system]\n{SYSTEM_PROMPT}\n[user]\n"
                                               f"{build_user_prompt(item, options, cfg.add_sketch)}\n"
                                               f"[reply]\n{rec['raw_response']}", markup=False)

                docs.append(await run_month(cfg, run, pending, client, on_item))
    return docs


def _print_table(docs: list[dict[str, Any]], paths: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="LiveMathematicianBench MCQ accuracy")
    table.add_column("month")
    table.add_column("model", overflow="fold")
    table.add_column("effort")
    for col in ("accuracy", "correct", "total", "answered", "errors"):
        table.add_column(col, justify="right")
    for doc in docs:
        info, s = doc["test_info"], doc["summary"]["all"]
        table.add_row(info["month"], info["model"], info["reasoning_effort"] or "default", f"{s['accuracy']:.2%}",
                      str(s["correct"]), str(s["total"]), str(s["answered"]), str(s["errors"]))
    console = Console()
    console.print(table)
    for path in paths:
        console.print(f"results: {path}", markup=False, highlight=False, soft_wrap=True)
