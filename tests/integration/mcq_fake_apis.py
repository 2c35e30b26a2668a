"""Local stand-ins for paid APIs (Azure OpenAI, OpenAI Responses, Anthropic Messages) for the MCQ tests.

`FakeAPI` reuses the in-thread uvicorn lifecycle of `ScriptedServer` (proofcheck.serve.scripted) but answers
every POST path with whatever the test's responder returns, and records each call (path, query,
headers, JSON body). The `*_reply` helpers build bodies in each provider's wire format.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from proofcheck.serve.scripted import ScriptedServer


@dataclass
class Call:
    """One request as the server saw it."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Answer:
    """What the server sends back for one call."""

    json: Any = None
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None  # a raw body instead of `json` (garbage, truncation)
    release: threading.Event | None = None  # with delay_s: answer early once this is set


FakeResponder = Callable[[Call, int], Answer]


class FakeAPI(ScriptedServer):
    """A catch-all POST server on 127.0.0.1; use as a context manager. `calls` lists every `Call`."""

    def __init__(self, responder: FakeResponder):
        super().__init__(lambda req, i: None)  # type: ignore[arg-type,return-value]
        self.fake_responder = responder
        self.fake_calls: list[Call] = []

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _app(self) -> Any:
        app = FastAPI()

        @app.post("/{path:path}")
        async def any_post(path: str, request: Request) -> Response:
            call = Call("/" + path, dict(request.query_params), {k.lower(): v for k, v in request.headers.items()},
                        await request.json())
            with self._lock:
                index = len(self.fake_calls)
                self.fake_calls.append(call)
            answer = self.fake_responder(call, index)
            deadline = time.monotonic() + answer.delay_s
            while time.monotonic() < deadline and not (answer.release and answer.release.is_set()):
                await asyncio.sleep(0.02)
            if answer.raw is not None:
                return Response(answer.raw, status_code=answer.status, media_type="application/json",
                                headers=answer.headers)
            return JSONResponse(answer.json, status_code=answer.status, headers=answer.headers)

        return app


def user_text(body: dict[str, Any]) -> str:
    """The user prompt of a chat, Responses or Messages request body."""
    if "input" in body:
        return body["input"]
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def letter_for(text: str) -> str:
    """A deterministic 'model choice' for a prompt, so separate runs give the same answers."""
    return "ABCDE"[int(hashlib.sha256(text.encode()).hexdigest(), 16) % 5]


def chat_reply(content: str, reasoning: str | None = None, prompt: int = 50, completion: int = 20,
               reasoning_tokens: int | None = None, finish: str = "stop") -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}


def responses_reply(text: str, summary: str | None = None, input_tokens: int = 40, output_tokens: int = 30,
                    reasoning_tokens: int = 25) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if summary is not None:
        output.append({"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": summary}]})
    output.append({"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]})
    return {"id": "resp_fake", "object": "response", "status": "completed", "model": "fake", "output": output,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": reasoning_tokens}}}


def anthropic_reply(text: str, thinking: str | None = None, input_tokens: int = 60, output_tokens: int = 90,
                    stop_reason: str = "end_turn") -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig-fake"})
    content.append({"type": "text", "text": text})
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": content,
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def openai_error(status: int, message: str) -> Answer:
    return Answer({"error": {"message": message, "type": "server_error", "code": status}}, status=status)


def anthropic_error(status: int, kind: str, message: str) -> Answer:
    return Answer({"type": "error", "error": {"type": kind, "message": message}}, status=status)


def read_results(path: Any) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
