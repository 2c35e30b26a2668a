"""Model backends for the MCQ harness, spoken over plain async httpx so every wire format is explicit.

| backend | request | reply text / thinking |
|---|---|---|
| `vllm`, `openai` chat | POST `{base}/chat/completions` (Bearer key) | `choices[0].message.content` / `.reasoning(_content)` |
| Responses API | POST `{base}/responses` | `output[type=message].content[type=output_text]` / `output[type=reasoning]` |
| `azure` chat | POST `{endpoint}/openai/deployments/{model}/chat/completions?api-version=V` (`api-key`) | as chat |
| `azure` Responses | POST `{endpoint}/openai/responses?api-version=V`, or `/openai/v1/responses` when V is `v1` | as Responses |
| `anthropic` | POST `{base}/v1/messages` (`x-api-key`, `anthropic-version`) | `content[type=text]` / `content[type=thinking]` |

Token accounting is normalised to the OpenAI convention (completion tokens include reasoning
tokens): a *separate* top-level `usage.reasoning_tokens` (Gemini-style proxies, some Anthropic
proxies) is added to the completion count, while a `*_tokens_details.reasoning_tokens` breakdown
(OpenAI, Azure, vLLM, Responses API) is already part of it and is only recorded. Anthropic's
`usage.output_tokens` already counts thinking tokens.

Failures go through the one HTTP layer (`proofcheck.http_retry`): 408, 429, 5xx (incl. Anthropic's
529), timeouts, connection errors and unreadable 200 bodies are retried with exponential backoff
and jitter (honouring `Retry-After`); other 4xx fail at once. When the retries are exhausted
`RequestFailed` carries the reason; the API key never appears in it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from proofcheck.http_errors import EndpointError
from proofcheck.http_retry import RetryPolicy, acall_with_retries, check, from_exception

BACKENDS = ("vllm", "openai", "azure", "anthropic")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
AZURE_CHAT_API_VERSION = "2024-12-01-preview"
ANTHROPIC_VERSION = "2023-06-01"
MAX_BACKOFF_S = 60.0


@dataclass
class BackendSettings:
    """Everything a backend needs to build and send one request."""

    backend: str
    model: str
    base_url: str
    api_key: str | None = None
    api_version: str | None = None
    use_responses_api: bool = False
    max_tokens: int = 16384
    reasoning_effort: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    thinking_budget: int | None = None
    timeout_s: float = 3600.0  # httpx connect/read/write/pool timeout
    request_timeout_s: float = 3600.0  # wall-clock limit of one attempt
    max_retries: int = 4
    backoff_s: float = 1.0


@dataclass
class Generation:
    """One model reply, normalised across backends."""

    text: str
    thinking: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None


class RequestFailed(Exception):
    """A request that failed for good (non-retryable error, or retries exhausted)."""

    def __init__(self, message: str, attempts: int = 1):
        super().__init__(message)
        self.attempts = attempts


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def normalize_usage(prompt: Any, completion: Any, total: Any, separate_reasoning: Any,
                    detail_reasoning: Any) -> dict[str, int | None]:
    """Token counts in the OpenAI convention (completion includes reasoning).

    `separate_reasoning` is a reasoning count reported beside an output count that excludes it
    (added); `detail_reasoning` is a breakdown of the output count (not added, unless it exceeds
    the output count, which proves the output count excluded it).
    """
    p, c, t = _int(prompt), _int(completion), _int(total)
    sep, det = _int(separate_reasoning), _int(detail_reasoning)
    reasoning = sep if sep is not None else det
    if c is not None and reasoning:
        if sep is not None or (det is not None and det > c):
            c += reasoning
            t = None  # recomputed below from the normalised parts
    if t is None and p is not None and c is not None:
        t = p + c
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": t, "reasoning_tokens": reasoning}


def _join(parts: list[str]) -> str | None:
    parts = [p for p in parts if p]
    return "\n\n".join(parts) if parts else None


def build_request(s: BackendSettings, system: str, user: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(url, headers, json body) of one request for settings `s`."""
    base = s.base_url.rstrip("/")
    headers = {"content-type": "application/json"}
    if s.backend == "anthropic":
        if base.endswith("/v1"):
            base = base[:-3]
        headers |= {"x-api-key": s.api_key or "", "anthropic-version": ANTHROPIC_VERSION}
        body: dict[str, Any] = {"model": s.model, "system": system, "max_tokens": s.max_tokens,
                                "messages": [{"role": "user", "content": user}]}
        if s.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": s.thinking_budget}
        if s.reasoning_effort:
            body["output_config"] = {"effort": s.reasoning_effort}
        _sampling(body, s)
        return f"{base}/v1/messages", headers, body
    if s.backend == "azure":
        headers["api-key"] = s.api_key or ""
        if s.use_responses_api:
            version = s.api_version or "v1"
            url = (f"{base}/openai/v1/responses" if version == "v1"
                   else f"{base}/openai/responses?api-version={version}")
        else:
            version = s.api_version or AZURE_CHAT_API_VERSION
            url = f"{base}/openai/deployments/{s.model}/chat/completions?api-version={version}"
    else:
        if s.api_key:
            headers["authorization"] = f"Bearer {s.api_key}"
        url = f"{base}/responses" if s.use_responses_api else f"{base}/chat/completions"
    if s.use_responses_api:
        body = {"model": s.model, "instructions": system, "input": user, "max_output_tokens": s.max_tokens}
        if s.reasoning_effort:
            body["reasoning"] = {"effort": s.reasoning_effort}
    else:
        body = {"model": s.model, "max_completion_tokens": s.max_tokens,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        if s.reasoning_effort:
            body["reasoning_effort"] = s.reasoning_effort
    _sampling(body, s)
    return url, headers, body


def _sampling(body: dict[str, Any], s: BackendSettings) -> None:
    if s.temperature is not None:
        body["temperature"] = s.temperature
    if s.top_p is not None:
        body["top_p"] = s.top_p


def parse_chat(body: dict[str, Any]) -> Generation:
    """An OpenAI-compatible chat completion (vLLM, OpenAI, Azure)."""
    choice = body["choices"][0]
    msg = choice["message"]
    usage = body.get("usage") or {}
    details = usage.get("completion_tokens_details") or {}
    thinking = msg.get("reasoning_content") or msg.get("reasoning")
    return Generation(text=msg.get("content") or "", thinking=thinking if isinstance(thinking, str) else None,
                      finish_reason=choice.get("finish_reason"),
                      **normalize_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"),
                                        usage.get("total_tokens"), usage.get("reasoning_tokens"),
                                        details.get("reasoning_tokens")))


def parse_responses(body: dict[str, Any]) -> Generation:
    """A Responses API object: message output_text parts; reasoning summaries/content as thinking."""
    texts: list[str] = []
    thoughts: list[str] = []
    for out in body["output"]:
        if out.get("type") == "message":
            texts += [c.get("text", "") for c in out.get("content") or [] if c.get("type") == "output_text"]
        elif out.get("type") == "reasoning":
            for key in ("summary", "content"):
                thoughts += [c.get("text", "") for c in out.get(key) or [] if isinstance(c, dict)]
    usage = body.get("usage") or {}
    details = usage.get("output_tokens_details") or {}
    status = body.get("status")
    reason = (body.get("incomplete_details") or {}).get("reason")
    finish = "length" if reason == "max_output_tokens" else "stop" if status == "completed" else status
    return Generation(text="".join(texts), thinking=_join(thoughts), finish_reason=finish,
                      **normalize_usage(usage.get("input_tokens"), usage.get("output_tokens"),
                                        usage.get("total_tokens"), usage.get("reasoning_tokens"),
                                        details.get("reasoning_tokens")))


def parse_anthropic(body: dict[str, Any]) -> Generation:
    """An Anthropic Messages reply: the prediction comes from the last text block, as in the
    LiveMathematicianBench release (`eval_claude.py` keeps the last one); every thinking block is
    kept apart in `thinking`, never read for the answer."""
    texts = [b.get("text", "") for b in body["content"] if b.get("type") == "text"][-1:]
    thoughts = [b.get("thinking", "") for b in body["content"] if b.get("type") == "thinking"]
    usage = body.get("usage") or {}
    stop = body.get("stop_reason")
    finish = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}.get(stop, stop)
    return Generation(text="\n\n".join(t for t in texts if t), thinking=_join(thoughts), finish_reason=finish,
                      **normalize_usage(usage.get("input_tokens"), usage.get("output_tokens"), None,
                                        usage.get("reasoning_tokens"), None))


def parse_reply(s: BackendSettings, body: Any) -> Generation:
    """Dispatch on the backend / API kind; raises KeyError/TypeError/ValueError on a malformed body."""
    if not isinstance(body, dict):
        raise TypeError(f"expected a JSON object, got {type(body).__name__}")
    if s.backend == "anthropic":
        return parse_anthropic(body)
    return parse_responses(body) if s.use_responses_api else parse_chat(body)


class McqClient:
    """Sends requests for one backend with bounded retries; use as an async context manager."""

    def __init__(self, settings: BackendSettings):
        self.settings = settings
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> McqClient:
        s = self.settings
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(s.timeout_s),
                                       limits=httpx.Limits(max_connections=None, max_keepalive_connections=32))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def _attempt(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> Generation:
        assert self._http is not None, "use McqClient as an async context manager"
        s = self.settings
        try:
            resp = check(await asyncio.wait_for(self._http.post(url, headers=headers, json=body),
                                                s.request_timeout_s))
        except TimeoutError as e:
            raise EndpointError(f"timeout after {s.request_timeout_s:g} s ({type(e).__name__})") from e
        except httpx.HTTPError as e:
            raise from_exception(e) from e
        try:
            return parse_reply(s, resp.json())
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            raise from_exception(e) from e

    async def generate(self, system: str, user: str) -> tuple[Generation, int]:
        """One reply and the number of attempts it took; raises `RequestFailed`."""
        s = self.settings
        url, headers, body = build_request(s, system, user)
        policy = RetryPolicy(max_retries=s.max_retries, base_delay_s=s.backoff_s, max_delay_s=MAX_BACKOFF_S)
        attempts = 0

        async def attempt() -> Generation:
            nonlocal attempts
            attempts += 1
            return await self._attempt(url, headers, body)

        try:
            return await acall_with_retries(attempt, policy), attempts
        except EndpointError as e:
            if e.kind == "retryable":
                raise RequestFailed(f"gave up after {e.attempts} attempt(s): {e.message}", e.attempts) from e
            raise RequestFailed(f"HTTP {e.status} (not retried): {e.detail.get('message')}", e.attempts) from e
