"""Python clients (sync and async, httpx) for our verification service (`POST /v1/verify`).

Both go through the one HTTP layer (`proofcheck.http_retry`): 408, 429, 5xx, timeouts and
connection errors are retried with bounded backoff (`RetryPolicy`, honouring `Retry-After`);
anything else raises `VerifyAPIError` with the service's OpenAI-shaped error. `result_from_response` turns a response into the core's
`VerificationResult`.

Example:
    >>> with VerifyClient("http://127.0.0.1:8000") as c:  # doctest: +SKIP
    ...     r = c.verify("Prove that 2 + 2 = 4.", proof="2 + 2 = 4 by arithmetic.")
    ...     r["decision"], r["votes"]
"""

from __future__ import annotations

from typing import Any

from proofcheck.http_errors import EndpointError
from proofcheck.http_retry import RetryPolicy, acall_with_retries, call_with_retries, check, from_exception
from proofcheck.serve.engines import endpoint_root
from proofcheck.verification import PassResult, VerificationResult


class VerifyAPIError(Exception):
    """The service answered with an error (or never answered: `status` None)."""

    def __init__(self, message: str, status: int | None = None, type: str | None = None, code: Any = None):
        super().__init__(message)
        self.status, self.type, self.code = status, type, code


def verify_body(problem: str, proof: str | None = None, steps: list[str] | None = None,
                reference_solution: str | None = None, passes: int | None = None, rule: str | None = None,
                all_passes: bool = False, seed: int | None = None, model: str | None = None,
                max_tokens: int | None = None) -> dict[str, Any]:
    """The JSON body of one verify request (fields left as None are omitted: server defaults)."""
    body: dict[str, Any] = {"problem": problem, "proof": proof, "steps": steps,
                            "reference_solution": reference_solution, "passes": passes, "rule": rule,
                            "all_passes": all_passes, "seed": seed, "model": model, "max_tokens": max_tokens}
    return {k: v for k, v in body.items() if v is not None}


def _api_error(e: EndpointError) -> VerifyAPIError:
    suffix = f" (after {e.attempts} attempt(s))" if e.status is None else ""
    return VerifyAPIError(e.message + suffix, e.status, e.detail.get("type"), e.detail.get("code"))


def result_from_response(body: dict[str, Any]) -> VerificationResult:
    """The core `VerificationResult` for one `/v1/verify` response."""
    fields = set(PassResult.__dataclass_fields__)
    passes = [PassResult(**{k: v for k, v in p.items() if k in fields}) for p in body["passes"]]
    usage = body.get("usage") or {}
    return VerificationResult(decision=body["decision"], rule=body["rule"], passes=passes, votes=body["votes"],
                              first_error_step_votes=body.get("first_error_step_votes", {}),
                              completion_tokens=int(usage.get("completion_tokens", 0)),
                              prompt_tokens=int(usage.get("prompt_tokens", 0)),
                              latency_s=float(body.get("latency_s", 0.0)))


class VerifyClient:
    """Synchronous client; use as a context manager or call `close()`."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 retry: RetryPolicy | None = None):
        import httpx

        self.url = endpoint_root(url)
        self.retry = retry or RetryPolicy()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0))

    def _request(self, method: str, path: str, json: Any = None) -> dict[str, Any]:
        import httpx

        def attempt() -> dict[str, Any]:
            try:
                return check(self._http.request(method, self.url + path, json=json)).json()
            except (httpx.HTTPError, ValueError) as e:  # timeouts, refused connections, broken bodies
                raise from_exception(e) from e

        try:
            return call_with_retries(attempt, self.retry)
        except EndpointError as e:
            raise _api_error(e) from e

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    def verify(self, problem: str, proof: str | None = None, steps: list[str] | None = None,
               **kwargs: Any) -> dict[str, Any]:
        """One verification (exactly one of `proof` / `steps`); the response JSON."""
        return self._request("POST", "/v1/verify", verify_body(problem, proof, steps, **kwargs))

    def verify_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Several verifications in one call; `items` are request bodies (see `verify_body`)."""
        return self._request("POST", "/v1/verify/batch", {"items": items})["results"]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> VerifyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncVerifyClient:
    """Asynchronous client (one connection pool; share it across tasks)."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 retry: RetryPolicy | None = None, max_connections: int = 256):
        import httpx

        self.url = endpoint_root(url)
        self.retry = retry or RetryPolicy()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0),
                                       limits=httpx.Limits(max_connections=max_connections))

    async def _request(self, method: str, path: str, json: Any = None) -> dict[str, Any]:
        import httpx

        async def attempt() -> dict[str, Any]:
            try:
                return check(await self._http.request(method, self.url + path, json=json)).json()
            except (httpx.HTTPError, ValueError) as e:
                raise from_exception(e) from e

        try:
            return await acall_with_retries(attempt, self.retry)
        except EndpointError as e:
            raise _api_error(e) from e

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/health")

    async def verify(self, problem: str, proof: str | None = None, steps: list[str] | None = None,
                     **kwargs: Any) -> dict[str, Any]:
        return await self._request("POST", "/v1/verify", verify_body(problem, proof, steps, **kwargs))

    async def verify_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return (await self._request("POST", "/v1/verify/batch", {"items": items}))["results"]

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncVerifyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
