"""The one retry policy for every remote call (judge, MCQ backends, remote engine, service clients).

With `proofcheck.http_errors` (the classifier and the error-body parser) this is the whole HTTP
layer: a failed attempt becomes an `EndpointError` (`from_response`, `from_exception`); its
`kind` says whether to retry (`retryable`: no response - timeouts, refused or reset connections,
a malformed body - and HTTP 408, 429, 5xx); `RetryPolicy.delay` says how long to wait:

    delay(attempt) = max(min(base * 2**attempt, max) * U(1 - jitter, 1), Retry-After), capped at max

(`Retry-After` in seconds or as an HTTP date, or `retry-after-ms`, as OpenAI's client reads
them: the server's minimum wait, still capped so a server cannot park a run for an hour).
`call_with_retries` / `acall_with_retries` run one attempt function under the policy; both
delegate every decision to `Attempts` and differ only in how they sleep.

Example:
    >>> policy = RetryPolicy(max_retries=2, base_delay_s=0.5, max_delay_s=8.0)
    >>> policy.delay(0, retry_after=3.0)
    3.0
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from proofcheck.http_errors import EndpointError, error_message, parse_error_body

T = TypeVar("T")


@dataclass
class RetryPolicy:
    """Bounded exponential backoff with jitter that honours Retry-After (see module docstring)."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.5  # the backoff is scaled by a uniform factor in [1 - jitter, 1]
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_delay_s < 0 or self.max_delay_s < 0 or not 0 <= self.jitter <= 1:
            raise ValueError(f"retry policy {self}: max_retries, base_delay_s and max_delay_s must be >= 0 "
                             "and jitter in [0, 1]")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        backoff = min(self.base_delay_s * 2 ** attempt, self.max_delay_s)
        backoff *= 1 - self.jitter * self.rng.random()
        if retry_after is not None:
            backoff = max(backoff, retry_after)
        return min(backoff, self.max_delay_s)

    def retries(self, error: EndpointError, attempt: int) -> bool:
        """True if `error` on attempt `attempt` (0-based) is worth another attempt."""
        return error.kind == "retryable" and attempt < self.max_retries


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The server's wait in seconds: `retry-after-ms`, else `Retry-After` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def from_response(status: int, body: bytes | str, headers: Mapping[str, str]) -> EndpointError:
    """The `EndpointError` of a non-2xx answer: message from the body, kind, Retry-After."""
    return EndpointError(error_message(status, body), status, retry_after=retry_after_s(headers),
                         detail=parse_error_body(body))


def from_exception(exc: Exception) -> EndpointError:
    """The `EndpointError` of an attempt that got no (usable) answer: always retryable."""
    import httpx

    if isinstance(exc, httpx.TimeoutException | asyncio.TimeoutError):
        return EndpointError(f"timeout: {type(exc).__name__}", None)
    if isinstance(exc, httpx.TransportError):
        return EndpointError(f"connection error: {type(exc).__name__}: {exc}", None)
    return EndpointError(f"malformed response: {type(exc).__name__}: {str(exc)[:200]}", None)


def check(resp: Any) -> Any:
    """`resp` (an httpx response) if it is 2xx, else raise its `EndpointError`."""
    if 200 <= resp.status_code < 300:
        return resp
    raise from_response(resp.status_code, resp.content, resp.headers)


class Attempts:
    """The retry bookkeeping of one call, shared by the sync and the async loop.

    `wait_after(error)` returns the seconds to wait before the next attempt, or re-raises
    `error` (with `.attempts` set) when the policy says to stop.
    """

    def __init__(self, policy: RetryPolicy, on_retry: Callable[[EndpointError], None] | None = None):
        self.policy, self.on_retry, self.n = policy, on_retry, 0

    def wait_after(self, error: EndpointError) -> float:
        error.attempts = self.n + 1
        if not self.policy.retries(error, self.n):
            raise error
        if self.on_retry is not None:
            self.on_retry(error)
        delay = self.policy.delay(self.n, error.retry_after)
        self.n += 1
        return delay


def call_with_retries(attempt: Callable[[], T], policy: RetryPolicy,
                      on_retry: Callable[[EndpointError], None] | None = None) -> T:
    """`attempt()` until it returns, retrying the `EndpointError`s the policy allows.

    The last error is raised with `.attempts` set. `on_retry(error)` runs before each wait.
    """
    state = Attempts(policy, on_retry)
    while True:
        try:
            return attempt()
        except EndpointError as e:
            time.sleep(state.wait_after(e))


async def acall_with_retries(attempt: Callable[[], Awaitable[T]], policy: RetryPolicy,
                             on_retry: Callable[[EndpointError], None] | None = None) -> T:
    """`call_with_retries` for a coroutine function (waits with `asyncio.sleep`)."""
    state = Attempts(policy, on_retry)
    while True:
        try:
            return await attempt()
        except EndpointError as e:
            await asyncio.sleep(state.wait_after(e))
