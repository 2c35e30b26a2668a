"""`proofcheck serve` (the HTTP verification service) and `proofcheck verify` (one proof, k passes).

Only argparse here; the handlers import vLLM / FastAPI / httpx when they run.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from proofcheck.app.commands._common import (
    CARD_DEFAULT,
    CARD_RULE_HELP,
    ENDPOINT_MODEL_HELP,
    EXIT_USAGE,
    MAX_TOKENS_CLIENT_HELP,
    MODEL_HELP,
    REQUIRE_KEY_HELP,
    RULE_HELP,
    add_chat_template_kwargs,
    add_command,
    add_deprecated,
    add_endpoint_key,
    add_json,
    add_prompt_style,
    fail,
    generation_settings,
    print_json,
    prompt_style,
)

SERVE_DESCRIPTION = """\
Serve the verifier over HTTP: POST /v1/verify (k passes, pessimistic decision), POST /v1/verify/batch,
GET /health, GET /metrics.

A model folder trained by proofcheck holds proofcheck_prompt.json (an adapter's own is read first):
the prompt style, the chat template options (e.g. Qwen3's enable_thinking) and the completion length
it was trained with. --prompt-style, --chat-template-kwargs and --max-tokens default to them (and
--max-model-len to room for them), so a thinking verifier trained at 8192 tokens is served at 8192
with thinking on. An explicit flag wins; a --max-tokens below the card's, or other template
options, is warned about. GET /health reports what the service applies.

The decision rule is unanimous (the paper's pessimistic verification) unless --rule says otherwise:
--rule at_least:T accepts with T accepts of the k passes; --rule card serves the rule calibrated for
the model (`proofcheck calibrate`, or a GRPO run's final held-out evaluation) with its k, and GET
/health says which rule is served and why (rule, rule_source, rule_reason, card_rule)."""


def _add_verify_options(p: argparse.ArgumentParser, client: bool = False) -> None:
    """The pass settings `serve` starts with (its defaults and limits) and `verify` asks for (`client`)."""
    p.add_argument("--passes", type=int, default=None, help="verifier passes per proof (k; default: the card's k "
                   "with --rule card, else 8)")
    p.add_argument("--rule", metavar="RULE", default="unanimous", help=RULE_HELP + CARD_RULE_HELP)
    if client:
        p.add_argument("--max-tokens", type=int, default=None, help=MAX_TOKENS_CLIENT_HELP)
    else:
        p.add_argument("--max-tokens", type=int, default=None, help="max tokens per pass, the most a request may ask "
                       f"(default: {CARD_DEFAULT}, else 1024; a smaller value than the card's is warned about)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the passes")
    add_chat_template_kwargs(p)
    add_prompt_style(p)


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lora", metavar="NAME=PATH", help="serve a peft LoRA adapter on top of --model (vLLM "
                   "enable_lora); requests use it by default")
    p.add_argument("--served-model-name", metavar="NAME", help="with --model: the name this service publishes for "
                   "the weights it loads, in /health and responses (vLLM's flag; default: the path)")
    p.add_argument("--max-model-len", type=int, default=None, help="vLLM max_model_len, the context of prompt and "
                   "pass (default: 4096, or --max-tokens + 4096 when a pass may be longer than 1024)")
    p.add_argument("--tensor-parallel-size", type=int, help="vLLM tensor parallelism (GPUs per replica)")
    p.add_argument("--data-parallel-size", type=int, help="vLLM data parallelism (engine replicas)")
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="any vLLM engine argument, repeatable (VALUE parsed as JSON when it is), "
                        "e.g. --engine-arg gpu_memory_utilization=0.9")


def register(sub: Any) -> None:
    s = add_command(sub, "serve", "Serve the verifier over HTTP: POST /v1/verify (k passes, pessimistic decision), "
                    "POST /v1/verify/batch, GET /health, GET /metrics.", SERVE_DESCRIPTION)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="PATH_OR_ID", help=f"{MODEL_HELP}, served by vLLM in-process")
    src.add_argument("--endpoint", metavar="URL", help="front a running vLLM OpenAI-compatible server instead "
                     "(base URL)")
    s.add_argument("--endpoint-model", metavar="NAME", help=f"{ENDPOINT_MODEL_HELP} (default: the first it lists)")
    s.add_argument("--endpoint-api-key-env", metavar="VAR", help="environment variable holding the API key sent to "
                   "--endpoint (must be set)")
    s.add_argument("--card", metavar="DIR", help="with --endpoint: the served model's folder; its proofcheck_prompt.json "
                   "applies as with --model (prompt style, template options, tokens per pass, --rule card)")
    _add_engine_options(s)
    _add_verify_options(s)
    s.add_argument("--host", default="127.0.0.1", help="bind address (use 0.0.0.0 deliberately)")
    s.add_argument("--port", type=int, default=8000, help="port")
    s.add_argument("--require-api-key-env", metavar="VAR", help=f"{REQUIRE_KEY_HELP} on /v1/")
    # `serve --api-key-env` named the incoming key: kept with that meaning for one release, so no
    # service silently loses its key
    add_deprecated(s, "--api-key-env", "--require-api-key-env", "require_api_key_env", metavar="VAR")
    s.add_argument("--max-queue", type=int, default=64, help="verifications in flight before answering 429")
    s.add_argument("--max-proof-chars", type=int, default=100_000, help="larger proofs get 413")
    s.add_argument("--drain-timeout", type=float, default=600.0, help="seconds to finish in-flight work on shutdown")
    s.add_argument("--seed", type=int, default=0, help="engine seed")
    s.add_argument("--constrain-format", nargs="?", const="steps", metavar="VERDICTS",
                   help="constrain every pass to the answer format with vLLM structured outputs, so every pass "
                        "parses and the run measures decisions, not format (not for thinking models). VERDICTS "
                        "narrows the <first_error_step> values, a regex: '-1' forces accept, '0' a reject")
    s.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    s.set_defaults(handler=_serve)

    v = add_command(sub, "verify", "Verify one proof with k passes and print the decision, votes and first error.")
    vsrc = v.add_mutually_exclusive_group(required=True)
    vsrc.add_argument("--endpoint", metavar="URL", help="our service (`proofcheck serve`) or a vLLM "
                      "OpenAI-compatible server")
    vsrc.add_argument("--model", metavar="PATH_OR_ID", help=f"{MODEL_HELP}, served in-process by vLLM for this call")
    v.add_argument("--endpoint-model", metavar="NAME", help=f"{ENDPOINT_MODEL_HELP} (default: the first it lists)")
    add_endpoint_key(v)
    v.add_argument("--problem", required=True, help="problem text, or @FILE")
    v.add_argument("--proof", required=True, help="proof text (steps in <step> tags or blank-line paragraphs), or @FILE")
    v.add_argument("--reference", help="reference solution text, or @FILE")
    v.add_argument("--all-passes", action="store_true", help="no early reject: run all k passes")
    v.add_argument("--seed", type=int, help="sampling seed")
    v.add_argument("--lora", metavar="NAME=PATH", help="with --model: apply this LoRA adapter")
    add_json(v)
    _add_verify_options(v, client=True)
    v.set_defaults(handler=_verify)


def _text(value: str | None, flag: str) -> str | None:
    if value is None or not value.startswith("@"):
        return value
    path = Path(value[1:])
    if not path.is_file():
        raise ValueError(f"{flag} {value}: file {path} not found")
    return path.read_text(encoding="utf-8")


def _key(var: str | None, flag: str) -> str | None:
    if var is None:
        return None
    key = os.environ.get(var, "")
    if not key:
        raise ValueError(f"{flag} {var}: the environment variable {var} is unset or empty")
    return key


def _lora(value: str | None) -> tuple[str, str] | None:
    from proofcheck.serve.server import parse_key_value

    return None if value is None else parse_key_value(value, "--lora")


def _engine_args(args: argparse.Namespace) -> dict[str, Any]:
    from proofcheck.serve.server import parse_engine_args

    out = parse_engine_args(getattr(args, "engine_arg", []) or [])
    for name in ("tensor_parallel_size", "data_parallel_size"):
        if getattr(args, name, None) is not None:
            out[name] = getattr(args, name)
    return out


def _serve(args: argparse.Namespace) -> int:
    from proofcheck.serve.server import ServeConfig, check_config, run_server

    try:
        cfg = ServeConfig(model=args.model, served_model_name=args.served_model_name, lora=_lora(args.lora),
                          endpoint=args.endpoint, endpoint_model=args.endpoint_model,
                          endpoint_api_key=_key(args.endpoint_api_key_env, "--endpoint-api-key-env"),
                          passes=args.passes, rule=args.rule, card=args.card, temperature=args.temperature,
                          max_tokens=args.max_tokens, max_model_len=args.max_model_len, seed=args.seed,
                          host=args.host, port=args.port,
                          api_key=_key(args.require_api_key_env, "--require-api-key-env"),
                          max_queue=args.max_queue, max_proof_chars=args.max_proof_chars,
                          drain_timeout_s=args.drain_timeout, engine_args=_engine_args(args),
                          log_level=args.log_level, constrain=args.constrain_format,
                          chat_template_kwargs=args.chat_template_kwargs, prompt_style=args.prompt_style)
        check_config(cfg)  # a context shorter than a pass: stop before the engine starts
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    run_server(cfg)
    return 0


def _first_error(result: Any, steps: list[str]) -> str | None:
    """The most voted first error step and one verifier's reason for it."""
    from proofcheck.parsing import parse_verifier_output

    votes = {k: v for k, v in result.first_error_step_votes.items() if k != "-1"}
    if not votes:
        return None
    step = int(max(votes, key=lambda k: (votes[k], -int(k))))
    for p in result.passes:
        if p.status == "valid" and p.first_error_step == step:
            v = parse_verifier_output(p.text, len(steps), p.finish_reason).verdict
            lines = [ln.strip() for ln in (v.errors if v else "").splitlines() if ln.strip()]
            item = next((ln for ln in lines if str(step) in ln), lines[0] if lines else "")[:200]
            return f"step {step} ({votes[str(step)]} vote(s)): {item}".rstrip(": ")
    return f"step {step}"


def _verify_rule(args: argparse.Namespace) -> tuple[int | None, str]:
    """(k, rule) for `verify`: `--rule card` is the model card's calibrated rule and k (with --model), or left
    to a proofcheck service to resolve (with --endpoint); any other rule must decide --passes (default 8)."""
    import sys

    from proofcheck.decision import CARD_RULE, check_rule, check_rule_name

    check_rule_name(args.rule, allow_card=True)
    if args.rule != CARD_RULE:
        check_rule(args.rule, args.passes or 8)
        return args.passes or 8, args.rule
    if args.endpoint:
        from proofcheck.serve.verifier import service_health

        if service_health(args.endpoint) is None:
            raise ValueError(f"--rule card: {args.endpoint} is not a proofcheck service, so nothing there knows the "
                             "model's card; verify with --model DIR, or through `proofcheck serve` for that model")
        return args.passes, CARD_RULE  # the service resolves it (passes None: the card's k)
    from proofcheck.prompt_card import card_rule, read_calibration

    lora = _lora(args.lora)
    folders = [lora[1] if lora else None, args.model]
    record = next((c for f in folders if f and (c := read_calibration(f)) is not None), None)
    rule, k, why = card_rule({"calibration": record} if record else None, folders[0] or args.model)
    if args.passes is not None and args.passes != k:
        raise ValueError(f"--passes {args.passes}: the card's rule is {rule} of {k} passes; drop --passes, or name "
                         "a rule (e.g. --rule at_least:T)")
    print(f"rule from the card: {why}", file=sys.stderr)
    return k, rule


def _verify(args: argparse.Namespace) -> int:
    import asyncio

    from proofcheck.http_errors import EndpointStop
    from proofcheck.protocol import ProofFormatError, split_steps
    from proofcheck.serve.client import VerifyAPIError
    from proofcheck.serve.verifier import make_verifier

    try:
        api_key = _key(args.endpoint_api_key_env, "--endpoint-api-key-env")
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    # with --endpoint: a service checks these against its own, a vLLM server takes them (or the defaults)
    style, ctk, max_tokens, engine = args.prompt_style, args.chat_template_kwargs, args.max_tokens, {}
    if args.model:  # what the weights were trained with: the adapter's card first, as serve reads it
        from proofcheck.prompt_card import weights_card, weights_folder

        try:
            lora = _lora(args.lora)
            adapter = lora[1] if lora else None
            card, where = weights_card(args.model, adapter), weights_folder(args.model, adapter)
            style = prompt_style(args.prompt_style, card, where)
            gen = generation_settings(card, args, where)
        except ValueError as e:
            return fail(str(e), EXIT_USAGE)
        ctk, max_tokens, engine = gen.chat_template_kwargs, gen.max_tokens, {"max_model_len": gen.max_model_len}
    try:
        passes, rule = _verify_rule(args)
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    try:
        problem, proof = _text(args.problem, "--problem"), _text(args.proof, "--proof")
        reference = _text(args.reference, "--reference")
        steps = split_steps(proof or "")
    except (ValueError, ProofFormatError) as e:
        return fail(str(e))

    async def run() -> Any:
        verifier = make_verifier(endpoint=args.endpoint, model=args.endpoint_model if args.endpoint else args.model,
                                 api_key=api_key, passes=passes, rule=rule, temperature=args.temperature,
                                 max_tokens=max_tokens, lora=_lora(args.lora),
                                 chat_template_kwargs=ctk, prompt_style=style, **engine)
        try:
            return await verifier.verify(problem or "", steps, reference, all_passes=args.all_passes, seed=args.seed)
        finally:
            await verifier.aclose()

    try:
        result = asyncio.run(run())
    except (ValueError, VerifyAPIError, EndpointStop) as e:  # EndpointStop: 401/403/404, the fix in its text
        return fail(str(e))
    if args.json:
        print_json(result.to_dict())
        return 0
    votes = ", ".join(f"{k} {v}" for k, v in result.votes.items())
    print(f"decision: {result.decision} ({result.rule}, {len(result.passes)} passes)")
    print(f"votes: {votes}")
    print(f"first error: {_first_error(result, steps) or 'none'}")
    print(f"tokens: {result.completion_tokens} completion, {result.prompt_tokens} prompt; {result.latency_s:.2f} s")
    return 0
