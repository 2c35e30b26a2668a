"""The FastAPI application of `proofcheck annotate`: router, static files, errors in OpenAI's shape.

Example:
    >>> from fastapi.testclient import TestClient  # doctest: +SKIP
    >>> app = create_app(AnnotationService.open("in.jsonl", "out.jsonl"), Authenticator(None))  # doctest: +SKIP
    >>> TestClient(app).get("/api/config").json()["total"]  # doctest: +SKIP
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

from proofcheck.data.annotate.auth import Authenticator, AuthError
from proofcheck.data.annotate.routes import STATIC_DIR, router
from proofcheck.data.annotate.service import AnnotationService, ServiceError


def error_response(status: int, message: str, type_: str, param: str | None = None) -> JSONResponse:
    """An error body shaped like OpenAI's: {"error": {"message", "type", "param", "code"}}."""
    return JSONResponse(status_code=status,
                        content={"error": {"message": message, "type": type_, "param": param, "code": status}})


async def _service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
    return error_response(exc.status, exc.message, kind, exc.param)


async def _auth_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(401, str(exc), "authentication_error")


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts = []
    for d in exc.errors():
        loc = [str(p) for p in d.get("loc", ()) if p != "body"]
        parts.append(f"{'.'.join(loc) or 'body'}: {str(d.get('msg', '')).removeprefix('Value error, ')}")
    return error_response(422, "; ".join(parts), "invalid_request_error")


def create_app(service: AnnotationService, auth: Authenticator) -> FastAPI:
    """Build the app around an opened service; the caller closes the service after serving."""
    app = FastAPI(title="proofcheck annotate", docs_url=None, redoc_url=None)
    app.state.service = service
    app.state.auth = auth
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(AuthError, _auth_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    return app
