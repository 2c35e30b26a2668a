"""The HTTP service over real HTTP (uvicorn in a thread), its engine a ScriptedServer: the API
contract, OpenAI-shaped errors (401/404/413/422/429), batch, metrics and the client's retries.
No model here; the same service over a real vLLM server is tested in tests/integration.
"""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from proofcheck.http_retry import RetryPolicy
from proofcheck.parsing import format_verdict
from proofcheck.serve.app import create_app
from proofcheck.serve.client import AsyncVerifyClient, VerifyAPIError, VerifyClient, result_from_response
from proofcheck.serve.engines import RemoteEngine
from proofcheck.serve.scripted import Reply, ScriptedServer
from proofcheck.serve.server import ServerThread
from proofcheck.serve.service import VerificationService
from proofcheck.serve.verifier import Verifier, detect_endpoint, make_verifier

OK = format_verdict("fine", [], -1)
BAD = format_verdict("step 0 is wrong", [(0, "wrong sum")], 0)
KEY = "s3cret-key"
GATE = threading.Event()  # while cleared, the scripted engine answers slowly (keeps requests in flight)


def responder(req: dict, i: int) -> Reply:
    text = req["messages"][1]["content"]
    content = [BAD] * req["n"] if "FLAWED" in text else [OK] * req["n"]
    return Reply(content, delay_s=0.0 if GATE.is_set() else 1.0)


@pytest.fixture(scope="module")
def service_url():
    GATE.set()
    with ScriptedServer(responder) as engine_srv:
        engine = RemoteEngine(engine_srv.url, "scripted", retry=RetryPolicy(max_retries=1, base_delay_s=0.01))
        service = VerificationService(Verifier(engine, max_tokens=64, model="scripted"), engine_kind="remote",
                                      model_names=["scripted"], max_queue=1, max_proof_chars=500)
        with ServerThread(create_app(service, api_key=KEY)) as srv:
            yield srv.url


def post(url: str, body: object, key: str | None = KEY, raw: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if raw is not None:
        return httpx.post(url + "/v1/verify", content=raw, headers={**headers, "content-type": "application/json"})
    return httpx.post(url + "/v1/verify", json=body, headers=headers, timeout=30)


def assert_openai_error(r: httpx.Response, status: int, type_: str) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "code"} and err["type"] == type_ and err["message"]
    return err


def test_health_identifies_the_service(service_url: str) -> None:
    h = httpx.get(service_url + "/health").json()
    assert h["service"] == "proofcheck-verify" and h["status"] == "ok" and h["passes"] == 8
    assert h["rule"] == "unanimous" and h["model"] == "scripted" and h["max_queue"] == 1
    assert detect_endpoint(service_url + "/v1") == "service"


@pytest.mark.parametrize("body, decision, votes", [
    ({"problem": "p", "proof": "a\n\nb"}, "accept", {"accept": 8, "reject": 0, "invalid": 0, "cancelled": 0, "error": 0}),
    ({"problem": "p", "steps": ["FLAWED", "b"]}, "reject", {"accept": 0, "reject": 1, "invalid": 0, "cancelled": 7, "error": 0}),
    ({"problem": "p", "steps": ["FLAWED"], "all_passes": True, "passes": 3},
     "reject", {"accept": 0, "reject": 3, "invalid": 0, "cancelled": 0, "error": 0}),
    ({"problem": "p", "steps": ["FLAWED"], "rule": "majority", "passes": 4},
     "reject", {"accept": 0, "reject": 2, "invalid": 0, "cancelled": 2, "error": 0}),
])
def test_verify(service_url: str, body: dict, decision: str, votes: dict) -> None:
    r = post(service_url, body)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["decision"] == decision and d["votes"] == votes
    assert len(d["passes"]) == body.get("passes", 8) and d["rule"] == body.get("rule", "unanimous")
    assert d["usage"]["total_tokens"] == d["usage"]["prompt_tokens"] + d["usage"]["completion_tokens"]
    assert result_from_response(d).decision == decision


@pytest.mark.parametrize("key", [None, "wrong", KEY + "x"])
def test_401_without_the_key(service_url: str, key: str | None) -> None:
    assert_openai_error(post(service_url, {"problem": "p", "proof": "a"}, key=key), 401, "authentication_error")


@pytest.mark.parametrize("body, field", [
    ({"problem": "p", "proof": "x" * 501}, "proof"),
    ({"problem": "p", "steps": ["x" * 300, "y" * 300]}, "steps"),
    ({"problem": "p" * 501, "proof": "a"}, "problem"),
    ({"problem": "p", "proof": "a", "reference_solution": "r" * 501}, "reference_solution"),
])
def test_413_oversized(service_url: str, body: dict, field: str) -> None:
    err = assert_openai_error(post(service_url, body), 413, "invalid_request_error")
    assert field in err["message"] and "500" in err["message"]


def test_413_body_before_reading(service_url: str) -> None:
    assert_openai_error(post(service_url, None, raw="{" + " " * 10_000_000 + "}"), 413, "invalid_request_error")


@pytest.mark.parametrize("body, raw, mentions", [
    (None, "{not json", "json"),
    ({"problem": "p"}, None, "exactly one"),
    ({"problem": "p", "proof": "a", "steps": ["a"]}, None, "exactly one"),
    ({"problem": "p", "proof": "a", "passes": 0}, None, "passes"),
    ({"problem": "p", "proof": "a", "rule": "vibes"}, None, "rule"),
    ({"problem": "p", "proof": "   "}, None, "proof"),
    ({"problem": "p", "proof": "a", "max_tokens": 10_000}, None, "max_tokens"),
])
def test_422_malformed(service_url: str, body: dict | None, raw: str | None, mentions: str) -> None:
    err = assert_openai_error(post(service_url, body, raw=raw), 422, "invalid_request_error")
    assert mentions in err["message"].lower()


def test_404_unknown_model_and_route(service_url: str) -> None:
    assert_openai_error(post(service_url, {"problem": "p", "proof": "a", "model": "nope"}), 404, "invalid_request_error")
    assert_openai_error(httpx.get(service_url + "/v2/nothing"), 404, "not_found_error")


def test_batch_in_order(service_url: str) -> None:
    with VerifyClient(service_url, api_key=KEY) as c:
        with pytest.raises(VerifyAPIError) as e:  # two items never fit a queue of one
            c.verify_batch([{"problem": "p", "proof": "a"}] * 2)
        assert e.value.status == 413
        res = c.verify_batch([{"problem": "p", "steps": ["FLAWED"]}])
    assert [r["decision"] for r in res] == ["reject"]


def test_429_when_full_and_client_retries(service_url: str) -> None:
    GATE.clear()  # the engine now takes ~1 s per call: the first request holds the only slot
    try:
        async def burst() -> tuple[list[int], dict]:
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
                first = asyncio.create_task(http.post(service_url + "/v1/verify", json={"problem": "p", "proof": "a"}))
                await asyncio.sleep(0.3)
                rest = await asyncio.gather(*(http.post(service_url + "/v1/verify", json={"problem": "p", "proof": "a"})
                                              for _ in range(4)))
                first_r = await first
            codes = [first_r.status_code] + [r.status_code for r in rest]
            return codes, rest[0].json()
        codes, body = asyncio.run(burst())
        assert codes[0] == 200 and codes.count(429) == 4
        assert body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == "queue_full"

        async def retried() -> list[dict]:  # retries on 429 with backoff: both finally get an answer
            retry = RetryPolicy(max_retries=8, base_delay_s=0.2, max_delay_s=1.0)
            async with AsyncVerifyClient(service_url, api_key=KEY, retry=retry) as c:
                return await asyncio.gather(c.verify("p", proof="a"), c.verify("p", steps=["FLAWED"]))
        a, b = asyncio.run(retried())
        assert (a["decision"], b["decision"]) == ("accept", "reject")
    finally:
        GATE.set()


def test_client_raises_on_4xx_without_retry(service_url: str) -> None:
    with VerifyClient(service_url, api_key="bad", retry=RetryPolicy(max_retries=5)) as c:
        with pytest.raises(VerifyAPIError) as e:
            c.verify("p", proof="a")
    assert e.value.status == 401 and e.value.type == "authentication_error"


def test_make_verifier_over_the_service(service_url: str) -> None:
    v = make_verifier(endpoint=service_url, api_key=KEY)

    async def run():
        try:
            return await v.verify("p", ["FLAWED", "b"], passes=4, all_passes=True)
        finally:
            await v.aclose()
    r = asyncio.run(run())
    assert r.decision == "reject" and r.votes["reject"] == 4 and r.passes[0].first_error_step == 0


def test_metrics(service_url: str) -> None:
    post(service_url, {"problem": "p", "proof": "a"})
    text = httpx.get(service_url + "/metrics").text
    for name in ("proofcheck_requests_total", "proofcheck_passes_total", "proofcheck_decisions_total",
                 "proofcheck_queue_depth", "proofcheck_verify_latency_seconds_bucket"):
        assert name in text
    assert 'proofcheck_decisions_total{decision="accept",rule="unanimous"}' in text
    assert 'route="/v1/verify"' in text


@pytest.mark.parametrize("asked, sent", [(None, 64), (32, 32), (64, 64)])
def test_make_verifier_over_the_service_sends_the_token_limit(asked: int | None, sent: int) -> None:
    """`score --max-tokens` against a service reaches the engine; without it the service's own limit is used."""
    GATE.set()
    with ScriptedServer(responder) as engine_srv:
        engine = RemoteEngine(engine_srv.url, "scripted", retry=RetryPolicy(max_retries=1, base_delay_s=0.01))
        service = VerificationService(Verifier(engine, max_tokens=64, model="scripted"), engine_kind="remote",
                                      model_names=["scripted"])
        with ServerThread(create_app(service)) as srv:
            v = make_verifier(endpoint=srv.url, max_tokens=asked)

            async def run():
                try:
                    return await v.verify("p", ["a"], passes=2, all_passes=True)
                finally:
                    await v.aclose()
            r = asyncio.run(run())
        assert r.decision == "accept" and v.max_tokens == sent
        assert [c["max_tokens"] for c in engine_srv.calls] == [sent] * len(engine_srv.calls) and engine_srv.calls


def test_make_verifier_refuses_more_tokens_than_the_service_allows(service_url: str) -> None:
    with pytest.raises(ValueError, match=r"--max-tokens 100: .* at most 64 tokens per pass; pass --max-tokens 64"):
        make_verifier(endpoint=service_url, api_key=KEY, max_tokens=100)
