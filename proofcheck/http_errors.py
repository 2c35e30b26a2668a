"""One classifier for endpoint failures: what an HTTP status + message means for a run.

Every remote caller (the remote pass engine, the service clients, the judge, curation and
generation) turns a failed request into an `EndpointError` through `classify`, so "is this
worth retrying", "must the run stop" and "what should the user do" are answered once:

| kind        | when                                                        | retried | run       |
|-------------|-------------------------------------------------------------|---------|-----------|
| `retryable` | no status (timeout, connection, malformed body), 408, 429, 5xx | yes  | continues; the pass is recorded as an error if retries run out |
| `too_long`  | 400/413/422 whose message speaks of context / length / tokens | no   | continues; that pass is an error |
| `auth`      | 401, 403                                                    | no      | stops at once (the fix is in the message) |
| `not_found` | 404 (wrong URL or model name)                               | no      | stops at once |
| `fatal`     | any other 4xx                                               | no      | continues; that pass is an error |

An endpoint error is never a verdict: callers record it as an error (status and message),
count it, mark the run incomplete, and `--resume` retries exactly those passes.

Example:
    >>> classify(404, "The model `x` does not exist.")
    'not_found'
    >>> classify(400, "This model's maximum context length is 2048 tokens")
    'too_long'
    >>> classify(None, "timeout: ReadTimeout")
    'retryable'
"""

from __future__ import annotations

import json
import re
from typing import Any

KINDS = ("retryable", "too_long", "auth", "not_found", "fatal")
STOP_KINDS = frozenset({"auth", "not_found"})
_RETRY_STATUSES = frozenset({408, 429})
_TOO_LONG = re.compile(r"context|too long|too many tokens|max(imum)?[_ ](model[_ ])?len|maximum.*tokens|prompt.*tokens",
                       re.IGNORECASE)


def classify(status: int | None, message: str = "") -> str:
    """The kind (one of `KINDS`) of a failed request with HTTP `status` (None: no response)."""
    if status is None or status in _RETRY_STATUSES or status >= 500:
        return "retryable"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status in (400, 413, 422) and _TOO_LONG.search(message or ""):
        return "too_long"
    return "fatal"


def is_retryable(status: int | None, message: str = "") -> bool:
    """True when trying the same request again may succeed."""
    return classify(status, message) == "retryable"


def fix_hint(kind: str, url: str = "", model: str | None = None) -> str:
    """What the user should do about an error of `kind` (empty when nothing specific helps)."""
    where = f" at {url}" if url else ""
    if kind == "auth":
        return (f"the endpoint{where} refused the API key: export the right key in the variable named by "
                "--endpoint-api-key-env (--judge-api-key-env for a judge), or drop it for an endpoint without a key")
    if kind == "not_found":
        name = f" {model!r}" if model else ""
        return (f"the endpoint{where} does not know this path or model{name}: check the URL (base URL ending in /v1) "
                "and the served model name (GET /v1/models lists them)")
    if kind == "too_long":
        return "the prompt plus --max-tokens exceed the model's context: lower --max-tokens or serve a longer context"
    return ""


def parse_error_body(body: bytes | str) -> dict[str, Any]:
    """`{message, type, code}` from an error body: OpenAI's `{"error": {"message", "type", "code"}}`,
    `{"error": "..."}`, `{"message"}`, FastAPI's `{"detail"}`, or the text itself (first 200 chars)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        err = json.loads(text)
    except ValueError:
        err = None
    msg, kind, code = None, None, None
    if isinstance(err, dict):
        inner = err.get("error")
        if isinstance(inner, dict):
            msg, kind, code = inner.get("message"), inner.get("type"), inner.get("code")
        elif isinstance(inner, str):
            msg = inner
        msg = msg or err.get("message") or err.get("detail")
    return {"message": str(msg) if msg else text[:200], "type": kind, "code": code}


def error_message(status: int | None, body: bytes | str) -> str:
    """A short message from an error body (see `parse_error_body`), prefixed with the status."""
    msg = parse_error_body(body)["message"]
    return f"HTTP {status}: {msg}" if status is not None else msg


class EndpointError(Exception):
    """A request failed: `status` (None without a response), `message`, and its `kind`.

    `retry_after` (seconds) is the server's `Retry-After`, `detail` the parsed error body
    (`parse_error_body`), `attempts` how many attempts were made (set by `proofcheck.http_retry`).
    """

    def __init__(self, message: str, status: int | None = None, kind: str | None = None, *,
                 retry_after: float | None = None, detail: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind or classify(status, message)
        self.retry_after = retry_after
        self.detail = detail or {}
        self.attempts = 1

    @property
    def stops_run(self) -> bool:
        """True for errors that every later request would repeat (wrong key, wrong URL/model)."""
        return self.kind in STOP_KINDS


class EndpointStop(RuntimeError):
    """Raised to stop a run at once on an `auth` / `not_found` error; the message holds the fix."""

    def __init__(self, error: EndpointError, url: str = "", model: str | None = None):
        hint = fix_hint(error.kind, url, model)
        super().__init__(f"{error.message}; {hint}" if hint else error.message)
        self.error = error
