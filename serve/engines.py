"""Pass engines: what generates k samples of one prompt, behind one interface.

The verifier's k passes, a prover's proofs (`proofcheck generate`) and repaired proofs
(`data repair`) are all k samples of one conversation, so the method says just that:
`PassEngine.sample(messages, n, ...)` asks for `n` samples of one conversation in ONE
request (`n=k`, the prompt prefix is computed once) and returns one `PassOutput` per sample.
It takes a `stop_when(finished)` callback that the engine calls every time a sample finishes:
once it returns True the decision is fixed, and the engine stops the rest (the remote engine
closes the stream, which makes vLLM abort the request; the in-process engine aborts the request
id). Stopped samples come back with `cancelled=True`, their partial text and token count.

Two implementations: `RemoteEngine` (a vLLM OpenAI-compatible server, over HTTP, streaming) here
and `InProcessEngine` (vLLM's AsyncLLM) in `proofcheck.serve.inprocess`.

Transport faults (connection errors, timeouts, 5xx, 429, a stream cut short, garbage) are
retried with bounded backoff, re-asking only for the samples that have not finished; when the
retries are spent (or the error is not worth retrying, e.g. a 400 for a prompt too long) the
unfinished samples come back with `error` and `error_status` set, which the verifier turns into
"error" passes: a fault is never a verdict. A 401/403/404 (wrong key, URL or model) raises
`proofcheck.http_errors.EndpointStop` at once, with the fix in its message. Failures, what is
retryable and how long to wait come from the one HTTP layer (`proofcheck.http_errors`,
`proofcheck.http_retry`); only the re-asking of unfinished samples is particular to this engine.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from proofcheck.http_errors import EndpointError, EndpointStop
from proofcheck.http_retry import RetryPolicy, from_exception, from_response

StopWhen = Callable[[list["PassOutput"]], bool]


@dataclass
class PassOutput:
    """One generated sample: its text, why it ended, how many tokens it took."""

    index: int
    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int = 0
    cancelled: bool = False
    error: str | None = None
    error_status: int | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class Generation:
    """The samples of one request plus request-level usage."""

    passes: list[PassOutput]
    prompt_tokens: int = 0
    attempts: int = 1


class PassEngine(Protocol):
    """Anything that can generate k samples of one conversation (see module docstring)."""

    async def sample(self, messages: list[dict[str, str]], n: int, *, temperature: float,
                            max_tokens: int, seed: int | None, stop_when: StopWhen | None = None,
                            model: str | None = None, answer_regex: str | None = None) -> Generation:
        ...

    async def aclose(self) -> None:
        ...


def endpoint_root(url: str) -> str:
    """`http://h:p/v1/` -> `http://h:p` (our service and vLLM are both addressed from the root)."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class _Stream:
    """Per-attempt state: maps the attempt's choice indexes onto our pass slots."""

    def __init__(self, slots: list[PassOutput]):
        self.slots = slots  # choice index i of this attempt -> slots[i]
        self.prompt_tokens = 0
        self.usage_seen = False

    def apply_chunk(self, chunk: dict[str, Any]) -> list[PassOutput]:
        """Fold one chat.completion(.chunk) into the slots; returns the slots that just finished."""
        done: list[PassOutput] = []
        usage = chunk.get("usage") or None
        if usage and usage.get("prompt_tokens"):
            self.prompt_tokens = int(usage["prompt_tokens"])
        choices = chunk.get("choices") or []
        for ch in choices:
            i = int(ch.get("index", 0))
            if not 0 <= i < len(self.slots):
                raise EndpointError(f"malformed stream: choice index {i} outside 0..{len(self.slots) - 1}")
            slot = self.slots[i]
            if slot.finished:
                continue
            piece = ch.get("delta") if "delta" in ch else ch.get("message")
            content = (piece or {}).get("content") or ""
            slot.text += content
            if usage and len(choices) == 1 and usage.get("completion_tokens") is not None:
                # vLLM's continuous usage stats: cumulative tokens of this choice
                slot.completion_tokens = int(usage["completion_tokens"])
                self.usage_seen = True
            elif "token_ids" in ch and ch["token_ids"] is not None:
                slot.completion_tokens += len(ch["token_ids"])
            elif content and not self.usage_seen:
                slot.completion_tokens += 1  # one streamed delta ~ one token (other servers)
            if ch.get("finish_reason") is not None:
                slot.finish_reason = str(ch["finish_reason"])
                done.append(slot)
        if "message" in (choices[0] if choices else {}) and usage and len(choices) > 1:
            # a non-streamed answer: spread the usage total evenly (per-choice counts are not given)
            per = int(usage.get("completion_tokens") or 0) // len(choices)
            for ch in choices:
                self.slots[int(ch.get("index", 0))].completion_tokens = per
        return done


class RemoteEngine:
    """k passes from a vLLM OpenAI-compatible server, streamed, with early stop and retries.

    Example:
        >>> eng = RemoteEngine("http://127.0.0.1:8001/v1", "tiny")  # doctest: +SKIP
        >>> gen = await eng.sample(messages, 8, temperature=1.0, max_tokens=512, seed=0)  # doctest: +SKIP
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 connect_timeout_s: float = 10.0, retry: RetryPolicy | None = None, max_connections: int = 256,
                 chat_template_kwargs: dict[str, Any] | None = None):
        import httpx

        self.base_url = endpoint_root(base_url) + "/v1"  # accepts the server root or its /v1 base
        self.model = model
        self.retry = retry or RetryPolicy()
        # the chat template's switches (e.g. Qwen3's enable_thinking), sent as vLLM's `chat_template_kwargs`
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def sample(self, messages: list[dict[str, str]], n: int, *, temperature: float = 1.0,
                            max_tokens: int = 1024, seed: int | None = None, stop_when: StopWhen | None = None,
                            model: str | None = None, answer_regex: str | None = None) -> Generation:
        """`n` samples of `messages` in one streamed request (see module docstring); `answer_regex`
        constrains them with vLLM structured outputs."""
        passes = [PassOutput(i) for i in range(n)]
        finished: list[PassOutput] = []
        prompt_tokens, attempt, last_error, last_status = 0, 0, "", None
        while True:
            pending = [p for p in passes if not p.finished]
            for p in pending:  # a retry starts the unfinished samples afresh
                p.text, p.completion_tokens = "", 0
            stream = _Stream(pending)
            body = {"model": model or self.model, "messages": messages, "n": len(pending),
                    "temperature": temperature, "max_tokens": max_tokens, "stream": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
            if answer_regex:
                body["structured_outputs"] = {"regex": answer_regex}  # vLLM's extension of the API
            if self.chat_template_kwargs:
                body["chat_template_kwargs"] = self.chat_template_kwargs  # vLLM's extension of the API
            if seed is not None:
                body["seed"] = seed + attempt * n  # fresh samples on retry, still reproducible
            try:
                decided = await self._stream(body, stream, finished, stop_when)
                prompt_tokens = stream.prompt_tokens or prompt_tokens
                if decided:
                    for p in passes:
                        if not p.finished:
                            p.cancelled = True
                    return Generation(passes, prompt_tokens, attempt + 1)
                if all(p.finished for p in passes):
                    return Generation(passes, prompt_tokens, attempt + 1)
                raise EndpointError("the stream ended before every choice finished")
            except EndpointError as e:
                prompt_tokens = stream.prompt_tokens or prompt_tokens
                last_error, last_status = str(e), e.status
                if e.stops_run:
                    raise EndpointStop(e, self.base_url, model or self.model) from e
                if not self.retry.retries(e, attempt):
                    break
                await asyncio.sleep(self.retry.delay(attempt, e.retry_after))
            attempt += 1
        for p in passes:
            if not p.finished:
                p.error = f"{last_error} (after {attempt + 1} attempt(s))"
                p.error_status = last_status
        return Generation(passes, prompt_tokens, attempt + 1)

    async def _stream(self, body: dict[str, Any], stream: _Stream, finished: list[PassOutput],
                      stop_when: StopWhen | None) -> bool:
        """Run one streamed request; True when `stop_when` fixed the decision (stream closed early)."""
        import httpx

        try:
            async with self._client.stream("POST", f"{self.base_url}/chat/completions", json=body) as resp:
                if resp.status_code != 200:
                    raise from_response(resp.status_code, await resp.aread(), resp.headers)
                if "text/event-stream" not in resp.headers.get("content-type", ""):
                    # a server that ignored stream=True: one JSON body
                    raw = await resp.aread()
                    try:
                        chunk = json.loads(raw)
                    except ValueError as e:
                        raise EndpointError(f"malformed response body: {e}") from e
                    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
                        raise EndpointError("malformed response: no choices")
                    for slot in stream.apply_chunk(chunk):
                        finished.append(slot)
                    return bool(stop_when and stop_when(list(finished)) and
                                not all(s.finished for s in stream.slots))
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError as e:
                        raise EndpointError(f"malformed stream chunk: {e}") from e
                    if "error" in chunk and not chunk.get("choices"):
                        err = chunk["error"]
                        raise EndpointError(f"stream error: {err.get('message', err)}")
                    newly = stream.apply_chunk(chunk)
                    finished.extend(newly)
                    if newly and stop_when is not None and stop_when(list(finished)) \
                            and not all(s.finished for s in stream.slots):
                        return True  # leaving the block closes the connection: vLLM aborts the request
        except httpx.HTTPError as e:  # timeouts, refused / reset connections, broken streams
            raise from_exception(e) from e
        return False
