"""The HTTP router: `create_app(service)` maps routes onto a `VerificationService`.

Routes: `POST /v1/verify`, `POST /v1/verify/batch`, `GET /health`, `GET /metrics` (Prometheus).
The service is built once, before the app, and kept on `app.state.service`; the handlers are
module-level functions that find it there. Every error is OpenAI-shaped
(`{"error": {"message", "type", "code"}}`): 401 without the API key (when one is set), 413 for
oversized input, 422 for malformed requests, 429 when the queue is full, 503 while draining.
On shutdown the lifespan drains the service (in-flight requests are answered) and closes the engine.
"""

from __future__ import annotations

import hmac
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from proofcheck.serve.schemas import (
    BatchRequest,
    BatchResponse,
    ErrorResponse,
    Health,
    VerifyRequest,
    VerifyResponse,
    error_body,
)
from proofcheck.serve.service import ServiceError, VerificationService

ROUTES = ("/v1/verify", "/v1/verify/batch", "/health", "/metrics")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                405: "invalid_request_error", 413: "invalid_request_error", 422: "invalid_request_error",
                429: "rate_limit_error", 503: "service_unavailable"}


def _service(request: Request) -> VerificationService:
    return request.app.state.service


def _check_key(request: Request) -> None:
    """401 unless `Authorization: Bearer <key>` matches (constant-time) when a key is set."""
    key: str | None = request.app.state.api_key
    if not key:
        return
    auth = request.headers.get("authorization", "")
    given = auth[7:] if auth[:7].lower() == "bearer " else ""
    if not hmac.compare_digest(given.encode(), key.encode()):
        raise ServiceError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                           "authentication_error", "invalid_api_key", {"WWW-Authenticate": "Bearer"})


def _check_body_size(request: Request) -> None:
    """413 before reading a body larger than the service could ever accept."""
    limit: int = request.app.state.max_body_bytes
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise ServiceError(413, f"request body has {size} bytes; the limit is {limit}", "invalid_request_error",
                           "body_too_large")


async def guard_and_count(request: Request, call_next: Any) -> Response:
    """HTTP middleware: API key and body size on /v1/ before the body is read; request metrics."""
    service: VerificationService = request.app.state.service
    path = request.url.path
    try:
        if path.startswith("/v1/"):
            _check_key(request)
            _check_body_size(request)
        response = await call_next(request)
    except ServiceError as e:
        response = await _service_error(request, e)
    service.metrics.requests.labels(path if path in ROUTES else "other", str(response.status_code)).inc()
    return response


async def verify(req: VerifyRequest, request: Request) -> VerifyResponse:
    """Verify one proof with k passes and decide by the rule."""
    return await _service(request).verify(req)


async def verify_batch(batch: BatchRequest, request: Request) -> BatchResponse:
    """Verify several proofs concurrently; results in input order."""
    return await _service(request).verify_batch(batch)


async def health(request: Request) -> Health:
    """Liveness plus what is served (clients detect our service by `service`)."""
    return _service(request).health()


async def metrics(request: Request) -> Response:
    body, content_type = _service(request).metrics.render()
    return Response(body, media_type=content_type)


async def _service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    return JSONResponse(error_body(exc.message, exc.type, exc.code), status_code=exc.status, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
    return JSONResponse(error_body("; ".join(parts) or "malformed request", "invalid_request_error",
                                   "validation_error"), status_code=422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return JSONResponse(error_body(str(exc.detail), _ERROR_TYPES.get(exc.status_code, "server_error"),
                                   exc.status_code), status_code=exc.status_code, headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(error_body(f"internal error: {type(exc).__name__}: {exc}", "server_error", 500),
                        status_code=500)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> Any:
    yield
    service: VerificationService = app.state.service
    drained = await service.drain(app.state.drain_timeout_s)
    await service.aclose()
    print(f"proofcheck serve: {'drained' if drained else 'drain timed out'}; engine closed", flush=True)


def create_app(service: VerificationService, *, api_key: str | None = None, drain_timeout_s: float = 600.0,
               max_body_bytes: int | None = None) -> FastAPI:
    """The FastAPI app for a ready service (see module docstring)."""
    app = FastAPI(title="proofcheck verification service", lifespan=_lifespan,
                  responses={code: {"model": ErrorResponse} for code in (401, 413, 422, 429, 503)})
    app.state.service = service
    app.state.api_key = api_key
    app.state.drain_timeout_s = drain_timeout_s
    # a batch may hold up to max_queue items of problem + proof + reference, UTF-8 (<= 4 bytes a char)
    app.state.max_body_bytes = max_body_bytes or (65536 + 12 * service.max_proof_chars * service.max_queue)
    app.add_api_route("/v1/verify", verify, methods=["POST"], response_model=VerifyResponse)
    app.add_api_route("/v1/verify/batch", verify_batch, methods=["POST"], response_model=BatchResponse)
    app.add_api_route("/health", health, methods=["GET"], response_model=Health)
    app.add_api_route("/metrics", metrics, methods=["GET"])
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
    app.middleware("http")(guard_and_count)
    return app
