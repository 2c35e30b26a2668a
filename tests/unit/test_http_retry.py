"""The one HTTP layer (`proofcheck.http_retry` on `proofcheck.http_errors`), tested once for every caller:
backoff and Retry-After, what is retried, and the sync and async loops over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import email.utils
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from proofcheck.http_errors import EndpointError
from proofcheck.http_retry import (
    RetryPolicy,
    acall_with_retries,
    call_with_retries,
    check,
    from_exception,
    retry_after_s,
)
from proofcheck.serve.scripted import SLOW_S, TIMEOUT_S, Reply, ScriptedServer

# ---- the policy ------------------------------------------------------------------------------------

NO_JITTER = RetryPolicy(max_retries=3, base_delay_s=0.5, max_delay_s=8.0, jitter=0.0)


@pytest.mark.parametrize(("attempt", "retry_after", "delay"), [
    (0, None, 0.5), (1, None, 1.0), (3, None, 4.0), (4, None, 8.0), (10, None, 8.0),  # doubling, capped
    (0, 2.0, 2.0),       # the server's minimum wait
    (3, 1.0, 4.0),       # ... never shortens our backoff
    (0, 3600.0, 8.0),    # ... and cannot park a run for an hour
    (0, 0.0, 0.5),
])
def test_delay(attempt: int, retry_after: float | None, delay: float) -> None:
    assert NO_JITTER.delay(attempt, retry_after) == delay


def test_jitter_stays_within_its_band() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=100.0, jitter=0.5)
    delays = [policy.delay(2) for _ in range(500)]
    assert all(2.0 <= d <= 4.0 for d in delays) and max(delays) - min(delays) > 1.0


@pytest.mark.parametrize("bad", [dict(max_retries=-1), dict(jitter=1.5), dict(base_delay_s=-1)])
def test_bad_policy(bad: dict) -> None:
    with pytest.raises(ValueError, match="retry policy"):
        RetryPolicy(**bad)


def http_date(offset_s: float) -> str:
    return email.utils.formatdate(time.time() + offset_s, usegmt=True)


@pytest.mark.parametrize(("headers", "low", "high"), [
    ({}, None, None),
    ({"retry-after": "2"}, 2.0, 2.0),
    ({"retry-after": "0.25"}, 0.25, 0.25),
    ({"retry-after": "soon"}, None, None),
    ({"retry-after": "-3"}, 0.0, 0.0),
    ({"retry-after-ms": "1500"}, 1.5, 1.5),
    ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5, 1.5),   # the finer header wins (as OpenAI's client)
    ({"retry-after-ms": "x", "retry-after": "9"}, 9.0, 9.0),
])
def test_retry_after(headers: dict, low: float | None, high: float | None) -> None:
    got = retry_after_s(httpx.Headers(headers))
    assert got == low if low is None else low <= got <= high


@pytest.mark.parametrize(("offset_s", "low", "high"), [(30, 28.0, 30.0), (-30, 0.0, 0.0)])
def test_retry_after_as_an_http_date(offset_s: float, low: float, high: float) -> None:
    """An HTTP date (whole seconds) `offset_s` from now: the wait is the time until then, never negative."""
    got = retry_after_s(httpx.Headers({"retry-after": http_date(offset_s)}))
    assert low <= got <= high


@pytest.mark.parametrize(("status", "message", "attempt", "retried"), [
    (None, "timeout: ReadTimeout", 0, True),
    (None, "connection error: ConnectError", 2, True),
    (408, "request timeout", 0, True),
    (429, "slow down", 0, True),
    (500, "boom", 0, True),
    (503, "unavailable", 0, True),
    (529, "overloaded", 0, True),
    (500, "boom", 3, False),          # out of retries
    (400, "bad request", 0, False),
    (400, "maximum context length is 2048 tokens", 0, False),
    (401, "bad key", 0, False),
    (404, "no such model", 0, False),
    (422, "unprocessable", 0, False),
])
def test_what_is_retried(status: int | None, message: str, attempt: int, retried: bool) -> None:
    assert NO_JITTER.retries(EndpointError(message, status), attempt) is retried


@pytest.mark.parametrize(("exc", "prefix"), [
    (httpx.ReadTimeout("slow"), "timeout: ReadTimeout"),
    (TimeoutError(), "timeout: TimeoutError"),
    (httpx.ConnectError("refused"), "connection error: ConnectError: refused"),
    (ValueError("Expecting value"), "malformed response: ValueError: Expecting value"),
])
def test_failures_without_an_answer_are_retryable(exc: Exception, prefix: str) -> None:
    e = from_exception(exc)
    assert e.message.startswith(prefix) and e.status is None and e.kind == "retryable"


# ---- the loops over real HTTP -----------------------------------------------------------------------

FAST = RetryPolicy(max_retries=4, base_delay_s=0.01, max_delay_s=0.05)
OK = Reply("fine")
SCRIPTS = [  # (case, replies in order, attempts made, outcome: "ok" or the error's status)
    ("408, 429, 503, garbage, then ok", [Reply(status=408), Reply(status=429, headers={"Retry-After": "0"}),
                                         Reply(status=503), Reply(body="{not json"), OK], 5, "ok"),
    ("500 until retries run out", [Reply(status=500)] * 5, 5, 500),
    ("400 is not retried", [Reply(status=400), OK], 1, 400),
    ("401 is not retried", [Reply(status=401), OK], 1, 401),
    ("slow answer times out, then ok", [Reply("late", delay_s=SLOW_S), OK], 2, "ok"),
]


class Script:
    def __init__(self, replies: list[Reply]):
        self.replies, self.n = replies, 0

    def __call__(self, req: dict[str, Any], i: int) -> Reply:
        reply = self.replies[min(self.n, len(self.replies) - 1)]
        self.n += 1
        return reply


def sync_call(url: str) -> Callable[[], Any]:
    def run() -> Any:
        with httpx.Client(timeout=TIMEOUT_S) as http:
            def attempt() -> Any:
                try:
                    return check(http.post(url + "/chat/completions", json={"model": "m"})).json()
                except (httpx.HTTPError, ValueError) as e:
                    raise from_exception(e) from e

            return call_with_retries(attempt, FAST)
    return run


def async_call(url: str) -> Callable[[], Any]:
    def run() -> Any:
        async def go() -> Any:
            async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
                async def attempt() -> Any:
                    try:
                        return check(await http.post(url + "/chat/completions", json={"model": "m"})).json()
                    except (httpx.HTTPError, ValueError) as e:
                        raise from_exception(e) from e

                return await acall_with_retries(attempt, FAST)
        return asyncio.run(go())
    return run


@pytest.mark.parametrize("flavour", [sync_call, async_call], ids=["sync", "async"])
@pytest.mark.parametrize(("case", "replies", "attempts", "outcome"), SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_loop_over_http(flavour: Callable, case: str, replies: list[Reply], attempts: int, outcome: Any) -> None:
    script = Script(replies)
    with ScriptedServer(script) as srv:
        if outcome == "ok":
            body = flavour(srv.url)()
            assert body["choices"][0]["message"]["content"] == "fine"
        else:
            with pytest.raises(EndpointError) as e:
                flavour(srv.url)()
            assert e.value.status == outcome and e.value.attempts == attempts
            assert e.value.message.startswith(f"HTTP {outcome}: scripted {outcome}")
            assert e.value.detail["type"] == "server_error"  # parsed from the OpenAI-shaped body
        assert script.n == attempts


@pytest.mark.parametrize("flavour", [sync_call, async_call], ids=["sync", "async"])
def test_connection_refused_is_retried_then_raised(flavour: Callable) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(EndpointError) as e:
        flavour(f"http://127.0.0.1:{port}/v1")()
    assert e.value.status is None and e.value.attempts == FAST.max_retries + 1
    assert e.value.message.startswith("connection error: ConnectError")
