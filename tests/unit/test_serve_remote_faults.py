"""The remote engine over real HTTP against ScriptedServer: exact decisions, early reject, faults.

ScriptedServer speaks the OpenAI wire format (streaming included) and answers with chosen
verdict texts, 500s, 429s, slow answers and garbage, so each fault path runs for real.
"""

from __future__ import annotations

import asyncio

import pytest

from proofcheck.http_retry import RetryPolicy
from proofcheck.parsing import format_verdict
from proofcheck.serve.scripted import SLOW_S, TIMEOUT_S, Reply, ScriptedServer
from proofcheck.serve.verifier import ServiceVerifier, make_verifier

STEPS = ["x_1 = 2 + 2 = 4.", "x_2 = 4 * 2 = 8.", "Hence x_2 = 8."]
OK = format_verdict("every step checks out", [], -1)
BAD = format_verdict("step 1 is wrong", [(1, "4 * 2 is 8, not 9")], 1)
FAST = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.05)


def verify(url: str, *, timeout_s: float = 10.0, **kwargs: object):
    v = make_verifier(endpoint=url, model="scripted", kind="vllm", retry=FAST, timeout_s=timeout_s)

    async def run():
        try:
            return await v.verify("Prove x_2 = 8.", STEPS, **kwargs)
        finally:
            await v.aclose()
    return asyncio.run(run())


@pytest.mark.parametrize("contents, rule, all_passes, decision, votes", [
    ([OK] * 8, "unanimous", False, "accept", (8, 0, 0, 0, 0)),
    ([OK] * 2 + [BAD] + [OK] * 5, "unanimous", False, "reject", (2, 1, 0, 5, 0)),  # early reject at the 3rd
    ([OK] * 2 + [BAD] + [OK] * 5, "unanimous", True, "reject", (7, 1, 0, 0, 0)),
    (["not a verdict"] + [OK] * 7, "unanimous", False, "reject", (0, 0, 1, 7, 0)),
    ([OK] * 5 + [BAD] * 3, "majority", True, "accept", (5, 3, 0, 0, 0)),
    ([BAD] * 4 + [OK] * 4, "majority", False, "reject", (0, 4, 0, 4, 0)),
    ([BAD] * 7 + [OK], "any", False, "accept", (1, 7, 0, 0, 0)),
])
def test_exact_decisions(contents: list[str], rule: str, all_passes: bool, decision: str, votes: tuple) -> None:
    with ScriptedServer(lambda req, i: Reply(contents)) as srv:
        r = verify(srv.url, rule=rule, all_passes=all_passes, seed=7)
        call = srv.calls[0]
    assert (r.decision, tuple(r.votes.values())) == (decision, votes)
    assert len(srv.calls) == 1 and call["n"] == 8 and call["stream"] is True and call["seed"] == 7
    assert call["temperature"] == 1.0 and call["messages"][0]["role"] == "system"


def test_truncated_generation_is_invalid() -> None:
    with ScriptedServer(lambda req, i: Reply(OK, finish_reason="length")) as srv:
        r = verify(srv.url, passes=4)
    assert r.decision == "reject" and r.passes[0].invalid_reason == "non_stop_finish"


@pytest.mark.parametrize("first, name", [
    (Reply(status=500), "500"),
    (Reply(status=429, headers={"Retry-After": "0"}), "429"),
    (Reply(status=503), "503"),
    (Reply(body='{"choices": [', status=200), "truncated body"),
    (Reply(body="<html>bad gateway</html>", status=200), "garbage"),
    (Reply(OK, delay_s=SLOW_S), "timeout"),
])
def test_transient_fault_then_success(first: Reply, name: str) -> None:
    with ScriptedServer(lambda req, i: first if i == 0 else Reply(OK)) as srv:
        r = verify(srv.url, timeout_s=TIMEOUT_S)
    assert r.decision == "accept", name
    assert r.votes["accept"] == 8 and len(srv.calls) == 2


TOO_LONG = ('{"error": {"message": "This model\'s maximum context length is 2048 tokens. However, you requested '
            '4096 tokens.", "type": "BadRequestError", "code": 400}}')


@pytest.mark.parametrize("reply, calls, message, status", [
    (Reply(status=500), 3, "HTTP 500", 500),
    (Reply(status=429), 3, "HTTP 429", 429),
    (Reply(OK, delay_s=SLOW_S), 3, "timeout", None),
    (Reply(body="garbage", status=200), 3, "malformed", None),
    (Reply(status=400), 1, "HTTP 400", 400),  # our request is wrong: retrying cannot help
    (Reply(status=400, body=TOO_LONG), 1, "maximum context length", 400),
])
def test_persistent_fault_gives_error_passes(reply: Reply, calls: int, message: str, status: int | None) -> None:
    """An endpoint failure is an "error" pass with its status and message: never a verdict, never invalid."""
    with ScriptedServer(lambda req, i: reply) as srv:
        r = verify(srv.url, timeout_s=TIMEOUT_S, rule="any")
    assert r.decision == "reject"  # never an accept, whatever the rule
    assert r.votes == {"accept": 0, "reject": 0, "invalid": 0, "cancelled": 0, "error": 8}
    assert all(p.status == "error" and message in (p.error or "") and p.error_status == status for p in r.passes)
    assert len(srv.calls) == calls


@pytest.mark.parametrize("status, fix", [(401, "--endpoint-api-key-env"), (403, "--endpoint-api-key-env"), (404, "served model name")])
def test_wrong_key_or_model_stops_at_once_with_the_fix(status: int, fix: str) -> None:
    from proofcheck.http_errors import EndpointStop

    with ScriptedServer(lambda req, i: Reply(status=status)) as srv:
        with pytest.raises(EndpointStop, match=fix) as info:
            verify(srv.url, timeout_s=TIMEOUT_S)
        assert len(srv.calls) == 1  # not retried
    assert info.value.error.status == status


def test_retry_uses_fresh_reproducible_seed() -> None:
    def responder(req: dict, i: int) -> Reply:
        return Reply(status=502) if i == 0 else Reply([OK] * 8)
    with ScriptedServer(responder) as srv:
        r = verify(srv.url, seed=1)
    assert r.decision == "accept" and [c["n"] for c in srv.calls] == [8, 8]
    assert srv.calls[1]["seed"] != srv.calls[0]["seed"]  # fresh, reproducible samples on retry


def test_service_verifier_down_is_error_not_verdict() -> None:
    v = ServiceVerifier("http://127.0.0.1:9", retry=FAST, timeout_s=0.5)

    async def run():
        try:
            return await v.verify("p", STEPS, passes=3)
        finally:
            await v.aclose()
    r = asyncio.run(run())
    assert r.decision == "reject" and r.votes["error"] == 3 and r.votes["invalid"] == 0
    assert all(p.status == "error" and p.error and p.error_status is None for p in r.passes)
