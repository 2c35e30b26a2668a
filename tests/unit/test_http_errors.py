"""The one endpoint-error classifier: status + message -> kind (table from the HTTP semantics)."""

from __future__ import annotations

import pytest

from proofcheck.http_errors import EndpointError, EndpointStop, classify, error_message

TOO_LONG_VLLM = "This model's maximum context length is 2048 tokens. However, you requested 4096 tokens."


@pytest.mark.parametrize(("status", "message", "kind"), [
    (None, "timeout: ReadTimeout", "retryable"),
    (None, "malformed response body", "retryable"),
    (408, "", "retryable"), (429, "slow down", "retryable"), (500, "", "retryable"), (503, "", "retryable"),
    (401, "invalid key", "auth"), (403, "forbidden", "auth"),
    (404, "The model `x` does not exist.", "not_found"),
    (400, TOO_LONG_VLLM, "too_long"), (413, "request too long", "too_long"),
    (400, "temperature must be >= 0", "fatal"), (422, "field required", "fatal"),
])
def test_classify(status, message, kind):
    assert classify(status, message) == kind


def test_stop_message_names_the_fix():
    e = EndpointError("HTTP 404: no such model", 404)
    assert e.stops_run and "GET /v1/models" in str(EndpointStop(e, "http://h/v1", "m"))
    assert not EndpointError("HTTP 400: bad", 400).stops_run


@pytest.mark.parametrize(("body", "expected"), [
    (b'{"error": {"message": "boom", "type": "x"}}', "HTTP 500: boom"),
    (b'{"message": "flat"}', "HTTP 500: flat"),
    (b'{"detail": "fastapi"}', "HTTP 500: fastapi"),
    (b"<html>bad gateway</html>", "HTTP 500: <html>bad gateway</html>"),
])
def test_error_message(body, expected):
    assert error_message(500, body) == expected
