"""Async judge client for any OpenAI-compatible endpoint, with retries and an on-disk cache.

- bounded concurrency (one semaphore per `session()`), a per-request timeout;
- the one HTTP layer (`proofcheck.http_retry`): bounded backoff with jitter, honouring
  `Retry-After`, on 408, 429, 5xx, timeouts, connection errors, malformed bodies and, particular
  to the judge, unparsable answers (`proofcheck.reward.judge.parse_judge_answer`); other 4xx
  answers are not retried (the request itself is wrong), 401/403/404 stop the run
  (`EndpointStop`, with the fix);
- a sqlite cache keyed by sha256 of (judge model, messages, sampling settings): re-grading
  the same outputs costs no judge call; its reads and writes run in a worker thread
  (`asyncio.to_thread`), never on the event loop;
- `JudgeStats` counts calls, retries, cache hits and failures. A judgement that fails after
  the retries returns `JudgeOutcome(level=None, error=...)`, never a made-up level.

The object is picklable (TRL may pickle reward functions): HTTP clients, semaphores and the
sqlite connection are created where they are used and never pickled.

Example:
    >>> client = JudgeClient(JudgeConfig(endpoint="http://127.0.0.1:8000/v1", model="judge"))  # doctest: +SKIP
    >>> async with client.session() as s:  # doctest: +SKIP
    ...     outcome = await s.judge(messages)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import sqlite3
import ssl
import threading
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from proofcheck.http_errors import EndpointError, EndpointStop
from proofcheck.http_retry import RetryPolicy, acall_with_retries, check, from_exception
from proofcheck.reward.judge import JudgeParseError, parse_judge_answer
from proofcheck.reward.levels import Level


@dataclass(frozen=True)
class JudgeConfig:
    """Where the judge is and how to call it.

    `api_key_env` names an environment variable holding the key (the key itself is never stored).
    `cache_dir=None` disables the cache.
    """

    endpoint: str
    model: str
    api_key_env: str | None = None
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    temperature: float = 0.0
    max_tokens: int = 1024
    extra_body: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        if not self.endpoint.startswith(("http://", "https://")):
            raise ValueError(f"judge endpoint {self.endpoint!r} must be an http(s) URL ending in /v1")
        if not self.model:
            raise ValueError("judge model name is empty: pass the name the endpoint serves")
        if self.concurrency < 1:
            raise ValueError(f"judge concurrency must be >= 1, got {self.concurrency}")
        if self.max_retries < 0 or self.timeout_s <= 0:
            raise ValueError("judge max_retries must be >= 0 and timeout_s > 0")

    def sampling(self) -> dict[str, Any]:
        """The sampling settings sent with every request (part of the cache key)."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, **self.extra_body}


@dataclass
class JudgeStats:
    """Counters: HTTP calls sent (every attempt), retries, cache hits, failed judgements."""

    calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    failures: int = 0
    failure_reasons: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "retries": self.retries, "cache_hits": self.cache_hits,
                "failures": self.failures, "failure_reasons": dict(self.failure_reasons)}


@dataclass(frozen=True)
class JudgeOutcome:
    """A judgement: `level` set, or `level=None` and `error` saying why (after retries)."""

    level: Level | None
    error: str | None = None
    cached: bool = False
    text: str = ""
    endpoint_error: bool = False  # the last attempt got no usable answer from the endpoint (vs. an unparsable one)
    error_status: int | None = None  # its HTTP status (None: timeout, connection, malformed body)


class JudgeCache:
    """sqlite key -> (level, text); safe across threads and processes (WAL, busy timeout)."""

    def __init__(self, cache_dir: str | Path):
        self.path = Path(cache_dir) / "judge_cache.sqlite"
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS judge (key TEXT PRIMARY KEY, level TEXT, text TEXT)")
            self._conn = conn
        return self._conn

    def get(self, key: str) -> tuple[Level, str] | None:
        with self._lock:
            row = self._db().execute("SELECT level, text FROM judge WHERE key = ?", (key,)).fetchone()
        return (Level.parse(row[0]), row[1]) if row else None

    def put(self, key: str, level: Level, text: str) -> None:
        with self._lock:
            self._db().execute("INSERT OR REPLACE INTO judge VALUES (?, ?, ?)", (key, level.name, text))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._conn = None
        self._lock = threading.Lock()


def cache_key(model: str, messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of (judge model, prompt messages, sampling settings)."""
    blob = json.dumps({"model": model, "messages": messages, "sampling": sampling},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_REASONS = {"timeout": "timeout", "connection error": "connection", "malformed response": "bad_body",
            "unparsable": "unparsable"}


def failure_reason(error: EndpointError) -> str:
    """A short code for `JudgeStats.failure_reasons`: `http_<status>`, `timeout`, `connection`,
    `bad_body` or `unparsable`."""
    if error.status is not None:
        return f"http_{error.status}"
    return _REASONS.get(error.message.split(":")[0], "other")


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One verifying SSL context per process: building it costs tens of ms, a session each step."""
    return httpx.create_ssl_context()


class JudgeClient:
    """Judges chat prompts through an OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.stats = JudgeStats()
        self.retry = RetryPolicy(max_retries=config.max_retries, base_delay_s=config.backoff_base_s,
                                 max_delay_s=config.backoff_max_s)
        self.cache = JudgeCache(config.cache_dir) if config.cache_dir else None

    def _headers(self) -> dict[str, str]:
        env = self.config.api_key_env
        if env is None:
            return {}
        key = os.environ.get(env)
        if not key:
            raise ValueError(f"judge API key variable ${env} is not set")
        return {"Authorization": f"Bearer {key}"}

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[JudgeSession]:
        """An HTTP client and a semaphore bound to the running event loop, closed on exit."""
        timeout = httpx.Timeout(self.config.timeout_s)
        limits = httpx.Limits(max_connections=self.config.concurrency)
        async with httpx.AsyncClient(base_url=self.config.endpoint.rstrip("/"), timeout=timeout,
                                     headers=self._headers(), limits=limits, verify=_ssl_context()) as http:
            yield JudgeSession(self, http, asyncio.Semaphore(self.config.concurrency))

    async def judge_many(self, prompts: list[list[dict[str, str]]]) -> list[JudgeOutcome]:
        """Judge several prompts concurrently (bounded) in one session."""
        async with self.session() as s:
            return list(await asyncio.gather(*(s.judge(m) for m in prompts)))


class JudgeSession:
    """One event loop's view of a `JudgeClient`: use `judge(messages)`."""

    def __init__(self, client: JudgeClient, http: httpx.AsyncClient, semaphore: asyncio.Semaphore):
        self.client = client
        self.http = http
        self.semaphore = semaphore

    async def judge(self, messages: list[dict[str, str]]) -> JudgeOutcome:
        """The judge's level for one prompt: from the cache, else with bounded retries."""
        cfg, stats, cache = self.client.config, self.client.stats, self.client.cache
        key = cache_key(cfg.model, messages, cfg.sampling())
        if cache is not None:  # sqlite I/O off the event loop: a busy cache must not stall other judgements
            hit = await asyncio.to_thread(cache.get, key)
            if hit is not None:
                stats.cache_hits += 1
                return JudgeOutcome(hit[0], cached=True, text=hit[1])
        try:
            level, text = await acall_with_retries(lambda: self._attempt(messages), self.client.retry,
                                                   on_retry=self._count_retry)
        except EndpointError as e:
            if e.stops_run:  # a wrong key / URL / model: every judgement would fail the same way
                raise EndpointStop(e, cfg.endpoint, cfg.model) from e
            reason = failure_reason(e)
            stats.failures += 1
            stats.failure_reasons[reason] += 1
            return JudgeOutcome(None, error=f"judge failed after {e.attempts} attempt(s): {reason}: {e.message}",
                                endpoint_error=reason != "unparsable", error_status=e.status)
        if cache is not None:
            await asyncio.to_thread(cache.put, key, level, text)
        return JudgeOutcome(level, text=text)

    def _count_retry(self, error: EndpointError) -> None:
        self.client.stats.retries += 1

    async def _attempt(self, messages: list[dict[str, str]]) -> tuple[Level, str]:
        cfg = self.client.config
        body = {"model": cfg.model, "messages": messages, **cfg.sampling()}
        async with self.semaphore:
            self.client.stats.calls += 1
            try:
                resp = check(await self.http.post("/chat/completions", json=body))
            except httpx.HTTPError as e:
                raise from_exception(e) from e
        try:
            choice = resp.json()["choices"][0]
            msg = choice["message"]
            content, finish = msg.get("content"), choice.get("finish_reason")
            reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise from_exception(e) from e
        try:
            return parse_judge_answer(content, finish, reasoning), content or ""
        except JudgeParseError as e:  # the endpoint answered; the judge may answer properly next time
            raise EndpointError(f"unparsable: {e.reason}", None, "retryable") from e
