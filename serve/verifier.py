"""The k-pass verification core on top of a pass engine, and the one entry point other parts use.

`Verifier.verify(problem, steps, ...)` builds the verifier prompt (core protocol), asks the
engine for k passes in ONE request, parses each pass with the core parser as it finishes and,
once the decision is fixed (`proofcheck.decision.is_decided`: under `unanimous`, the first pass
that rejects or is invalid), lets the engine stop the others (early reject). The result is the
core's `VerificationResult`; cancelled passes keep the tokens they had generated, so
`completion_tokens` is what was really spent.

`make_verifier(endpoint=..., model=...)` is what bench/ and data/ call: it returns an object with
`async verify(problem, steps, reference=None, passes=8, rule="unanimous", all_passes=False,
seed=None) -> VerificationResult`, talking to our `/v1/verify` service or to a plain vLLM
OpenAI-compatible server (detected with `GET /health`), or to an in-process engine (`model=` a path).

Example:
    >>> v = make_verifier(endpoint="http://127.0.0.1:8000/v1", model="tiny")  # doctest: +SKIP
    >>> r = asyncio.run(v.verify("Prove 1+1=2.", ["1+1=2 by definition."]))  # doctest: +SKIP
    >>> r.decision, r.votes  # doctest: +SKIP
"""

from __future__ import annotations

import time
from typing import Any

from proofcheck.decision import CARD_RULE, check_rule, is_decided
from proofcheck.protocol import (
    DEFAULT_PROMPT_STYLE,
    answer_regex,
    style_texts,
    template_messages,
    verifier_messages,
)
from proofcheck.serve.engines import (
    Generation,
    PassEngine,
    PassOutput,
    RemoteEngine,
    RetryPolicy,
    StopWhen,
    endpoint_root,
)
from proofcheck.verification import PassResult, VerificationResult, parse_pass, summarise

SERVICE_NAME = "proofcheck-verify"
DEFAULT_PASSES = 8
DEFAULT_MAX_TOKENS = 1024  # per pass, where neither the caller nor a service sets it
DEFAULT_RULE = "unanimous"


def _parse(p: PassOutput, n_steps: int) -> PassResult:
    """Core parse of one engine output; an unfinished, non-cancelled output is an engine error."""
    if p.cancelled:
        return PassResult("cancelled", text=p.text, completion_tokens=p.completion_tokens)
    error = p.error
    if error is None and p.finish_reason is None:
        error = "the engine returned an unfinished generation"
    return parse_pass(p.text, n_steps, p.finish_reason, p.completion_tokens, error=error,
                      error_status=p.error_status)


def stop_rule(n_steps: int, n: int, rule: str) -> StopWhen:
    """`stop_when` callback: parse the finished passes and ask the core whether the decision is fixed."""
    def stop_when(finished: list[PassOutput]) -> bool:
        return is_decided([_parse(p, n_steps).outcome for p in finished], n, rule)
    return stop_when


def assemble(gen: Generation, n_steps: int, rule: str, latency_s: float) -> VerificationResult:
    """The core result for one generation: every pass parsed (or cancelled), decided by `rule`."""
    return summarise([_parse(p, n_steps) for p in gen.passes], rule, gen.prompt_tokens, latency_s)


def check_request(steps: list[str], passes: int, rule: str) -> None:
    """Raise ValueError (naming the field, with the fix) for arguments no engine should see."""
    if passes < 1:
        raise ValueError(f"passes: must be >= 1, got {passes}")
    try:
        check_rule(rule, passes)
    except ValueError as e:
        raise ValueError(f"rule: {e}") from e
    if not steps or not all(isinstance(s, str) and s.strip() for s in steps):
        raise ValueError("steps: the proof needs at least one step and every step must be non-empty text")


class Verifier:
    """k-pass pessimistic verification over any `PassEngine` (in-process or remote)."""

    def __init__(self, engine: PassEngine, *, passes: int = DEFAULT_PASSES, rule: str = DEFAULT_RULE,
                 temperature: float = 1.0, max_tokens: int = DEFAULT_MAX_TOKENS, model: str | None = None,
                 prompt_template: str | None = None, constrain: str | None = None, prompt_style: str = DEFAULT_PROMPT_STYLE):
        check_request(["x"], passes, rule)
        style_texts(prompt_style)  # an unknown style: ValueError naming the choices
        self.prompt_style = prompt_style  # proofcheck.protocol.PROMPT_STYLES: the one the model was trained with
        # vLLM structured outputs on every pass: "steps" = any verdict valid for the proof, or a
        # regex of the verdicts allowed ("-1" forces accept); None = free generation
        self.constrain = constrain
        self.prompt_template = prompt_template  # a release-format prompt file's text (one user turn)
        self.engine = engine
        self.passes = passes
        self.rule = rule
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.model = model

    async def verify(self, problem: str, steps: list[str], reference: str | None = None, passes: int | None = None,
                     rule: str | None = None, all_passes: bool = False, seed: int | None = None,
                     model: str | None = None, max_tokens: int | None = None) -> VerificationResult:
        """Verify one stepped proof; `all_passes=True` turns early stopping off."""
        k = passes or self.passes
        rule = rule or self.rule
        check_request(steps, k, rule)
        t0 = time.perf_counter()
        messages = (template_messages(self.prompt_template, problem, steps, reference) if self.prompt_template
                    else verifier_messages(problem, steps, reference, self.prompt_style))
        regex = None
        if self.constrain is not None:
            regex = answer_regex(len(steps), None if self.constrain == "steps" else self.constrain)
        gen = await self.engine.sample(
            messages, k, temperature=self.temperature,
            max_tokens=max_tokens or self.max_tokens, seed=seed,
            stop_when=None if all_passes else stop_rule(len(steps), k, rule), model=model or self.model,
            answer_regex=regex)
        return assemble(gen, len(steps), rule, time.perf_counter() - t0)

    async def aclose(self) -> None:
        await self.engine.aclose()


class ServiceVerifier:
    """The same `verify` interface over our HTTP service (`POST /v1/verify`).

    `rule="card"` asks for the service's calibrated rule (its model's card); `passes=None` then
    takes the card's k.

    A service that stays unreachable after the client's bounded retries, or refuses one request
    (e.g. a prompt too long), yields a result whose passes are all "error" passes (status and
    message kept): never a verdict. A 401/403/404 raises `EndpointStop` with the fix.
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 retry: RetryPolicy | None = None, passes: int | None = DEFAULT_PASSES, rule: str = DEFAULT_RULE,
                 model: str | None = None, max_tokens: int | None = None):
        from proofcheck.serve.client import AsyncVerifyClient

        self.client = AsyncVerifyClient(url, api_key=api_key, timeout_s=timeout_s, retry=retry)
        self.passes, self.rule, self.model = passes, rule, model
        self.max_tokens = max_tokens  # per pass, sent with every request; None = the service's --max-tokens

    async def verify(self, problem: str, steps: list[str], reference: str | None = None, passes: int | None = None,
                     rule: str | None = None, all_passes: bool = False, seed: int | None = None,
                     model: str | None = None, max_tokens: int | None = None) -> VerificationResult:
        from proofcheck.serve.client import VerifyAPIError, result_from_response

        k, rule = passes or self.passes, rule or self.rule
        if rule == CARD_RULE:  # the service resolves it from its model's card (passes None: the card's)
            check_request(steps, k or 1, "any")
        else:
            k = k or DEFAULT_PASSES
            check_request(steps, k, rule)
        t0 = time.perf_counter()
        try:
            body = await self.client.verify(problem, steps=steps, reference_solution=reference, passes=k, rule=rule,
                                            all_passes=all_passes, seed=seed, model=model or self.model,
                                            max_tokens=max_tokens or self.max_tokens)
        except VerifyAPIError as e:
            from proofcheck.http_errors import EndpointError, EndpointStop, classify
            from proofcheck.verification import error_pass

            if classify(e.status, str(e)) in ("auth", "not_found"):
                raise EndpointStop(EndpointError(str(e), e.status), self.client.url, model or self.model) from e
            failed = [error_pass(str(e), e.status) for _ in range(k or DEFAULT_PASSES)]
            return summarise(failed, "unanimous" if rule == CARD_RULE else rule, latency_s=time.perf_counter() - t0)
        return result_from_response(body)

    async def aclose(self) -> None:
        await self.client.aclose()


def service_health(url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """A proofcheck service's `GET /health` JSON, or None when `url` is not one (or does not answer)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(endpoint_root(url) + "/health", timeout=timeout_s, headers=headers)
        if r.status_code == 200 and r.headers.get("content-type", "").startswith("application/json"):
            body = r.json()
            if isinstance(body, dict) and body.get("service") == SERVICE_NAME:
                return body
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return None


def detect_endpoint(url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> str:
    """"service" when `GET /health` answers our JSON, else "vllm" (a plain OpenAI-compatible server)."""
    return "service" if service_health(url, api_key=api_key, timeout_s=timeout_s) is not None else "vllm"


def first_model(url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> str:
    """The first model id a vLLM server lists (`GET /v1/models`), for when none was named.

    A 401/403/404 there is what every later request would get (wrong key or URL): it raises
    `EndpointStop` with the fix, as a refused pass would. Anything else that leaves no model
    to use is a ValueError that says to name the model.
    """
    import httpx

    from proofcheck.http_errors import EndpointError, EndpointStop, error_message

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    models_url = endpoint_root(url) + "/v1/models"
    try:
        r = httpx.get(models_url, timeout=timeout_s, headers=headers)
    except httpx.HTTPError as e:
        raise ValueError(f"--endpoint-model not given and {models_url} did not answer ({type(e).__name__}: {e}); "
                         "check the URL, or name the served model with --endpoint-model") from e
    if r.status_code != 200:
        err = EndpointError(error_message(r.status_code, r.content), r.status_code)
        if err.stops_run:
            raise EndpointStop(err, models_url)
        raise ValueError(f"--endpoint-model not given and {models_url} answered {err.message}; "
                         "name the served model with --endpoint-model")
    try:
        return str(r.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise ValueError(f"--endpoint-model not given and {models_url} did not list a model "
                         f"({type(e).__name__}: {e}); name the served model with --endpoint-model") from e


def check_service_settings(endpoint: str, health: dict[str, Any], prompt_style: str | None,
                           max_tokens: int | None) -> None:
    """Refuse, before any request, what a proofcheck service would refuse on every proof: another
    prompt style than the one it renders, or more tokens per pass than its `--max-tokens`."""
    if prompt_style is not None:
        served = health.get("prompt_style") or DEFAULT_PROMPT_STYLE
        if served != prompt_style:
            raise ValueError(f"--prompt-style {prompt_style}: {endpoint} is a proofcheck service that renders "
                             f"the {served} style; start it with --prompt-style {prompt_style}, or drop the flag")
    limit = health.get("max_tokens")
    if max_tokens is not None and limit is not None and max_tokens > limit:
        raise ValueError(f"--max-tokens {max_tokens}: {endpoint} is a proofcheck service that allows at most {limit} "
                         f"tokens per pass; pass --max-tokens {limit} or less (or drop it to use {limit}), or restart "
                         "the service with a larger --max-tokens")


def make_verifier(endpoint: str | None = None, model: str | None = None, *, kind: str = "auto",
                  api_key: str | None = None, passes: int | None = DEFAULT_PASSES, rule: str = DEFAULT_RULE,
                  temperature: float = 1.0, max_tokens: int | None = None, timeout_s: float = 600.0,
                  retry: RetryPolicy | None = None, lora: tuple[str, str] | None = None,
                  prompt_template: str | None = None, constrain: str | None = None,
                  chat_template_kwargs: dict[str, Any] | None = None, prompt_style: str | None = None,
                  **engine_args: Any) -> Verifier | ServiceVerifier:
    """The one entry point: a verifier over our service, a vLLM server, or an in-process engine.

    - `endpoint` is our service (detected by `GET /health`, or `kind="service"`): `model` picks
      the served model/adapter (optional);
    - `endpoint` is a vLLM OpenAI-compatible server (`kind="vllm"`): `model` is the served model
      name (default: the first one it lists);
    - no `endpoint`: `model` is a local path served in-process by vLLM's AsyncLLM (`lora`,
      `engine_args` go to the engine).
    `prompt_template` (a release-format verifier prompt file's text) replaces our prompt; our
    service builds its own prompt, so it cannot take one. `constrain` ("steps", or a regex of the
    verdicts allowed) constrains every pass to the answer format with vLLM structured outputs
    (`proofcheck.protocol.answer_regex`); a service applies what it was started with
    (`proofcheck serve --constrain-format`). `chat_template_kwargs` sets the chat
    template's switches (Qwen3: `{"enable_thinking": True}`) on every prompt; a service applies the
    ones it was started with (`proofcheck serve --chat-template-kwargs`). `prompt_style` is our
    prompt's style (`proofcheck.protocol.PROMPT_STYLES`; None = "full"); a service renders its own,
    reported in `GET /health`, and refuses a different one. `rule` is any `proofcheck.decision` rule
    (`at_least:T` included); `rule="card"` only for our service, which resolves it from its model's card
    (`passes=None`: the card's k; elsewhere None means 8). `max_tokens` is per pass: default
    1024, or a service's own `--max-tokens` (a larger one than the service allows is refused here,
    before any proof is sent).
    """
    if endpoint is None:
        if not model:
            raise ValueError("make_verifier needs endpoint=URL or model=PATH")
        from proofcheck.serve.inprocess import InProcessEngine

        return Verifier(InProcessEngine(model, lora=lora, chat_template_kwargs=chat_template_kwargs, **engine_args),
                        passes=passes or DEFAULT_PASSES, rule=rule, temperature=temperature, max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
                        prompt_template=prompt_template, constrain=constrain, prompt_style=prompt_style or DEFAULT_PROMPT_STYLE)
    health = service_health(endpoint, api_key=api_key) if kind in ("auto", "service") else None
    if kind == "auto":  # the one GET /health tells the kind and, for our service, its settings
        kind = "service" if health is not None else "vllm"
    if kind == "service":
        if prompt_template is not None:
            raise ValueError(f"--prompt-file: {endpoint} is a proofcheck service, which builds its own prompt; "
                             "point --endpoint at the vLLM server itself to use a prompt file")
        if constrain is not None:
            raise ValueError(f"{endpoint} is a proofcheck service: start it with --constrain-format instead")
        if chat_template_kwargs:
            raise ValueError(f"{endpoint} is a proofcheck service: start it with --chat-template-kwargs instead")
        health = health or {}
        check_service_settings(endpoint, health, prompt_style, max_tokens)
        return ServiceVerifier(endpoint_root(endpoint), api_key=api_key, timeout_s=timeout_s, retry=retry,
                               passes=passes, rule=rule, model=model, max_tokens=max_tokens or health.get("max_tokens"))
    if kind != "vllm":
        raise ValueError(f"kind: expected auto, service or vllm, got {kind!r}")
    name = model or first_model(endpoint, api_key=api_key)
    engine = RemoteEngine(endpoint, name, api_key=api_key, timeout_s=timeout_s, retry=retry,
                          chat_template_kwargs=chat_template_kwargs)
    return Verifier(engine, passes=passes or DEFAULT_PASSES, rule=rule, temperature=temperature,
                    max_tokens=max_tokens or DEFAULT_MAX_TOKENS, prompt_template=prompt_template, constrain=constrain, prompt_style=prompt_style or DEFAULT_PROMPT_STYLE)
