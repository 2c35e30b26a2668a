"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests, benchmarks and offline runs.

It speaks the real wire format (`POST /v1/chat/completions`, streaming or not, and
`GET /v1/models`) and answers each call with a `Reply` chosen by a responder function, so
clients can be driven through 500s, 429s, slow answers, truncation and chosen contents
over real HTTP. Use it only where the real peer is a remote API or where a test must
control the answers exactly; everything else tests against a real vLLM server. It lives in the
package (not under tests/) because the benchmarks use it too (the ablations' deterministic
repairer, the grading and MCQ benchmarks' judges) and they import only the installed package.

Example:
    >>> with ScriptedServer(lambda req, i: Reply("<level>EXACT_MATCH</level>")) as srv:  # doctest: +SKIP
    ...     httpx.post(srv.url + "/chat/completions", json={...})
"""

# no `from __future__ import annotations`: FastAPI reads the routes' `Request` annotation, imported
# inside `_app`, at definition time

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """What the server answers to one call."""

    content: str | list[str] | None = ""  # a list gives one choice per item (n > 1); None: JSON null
    finish_reason: str = "stop"
    status: int = 200
    delay_s: float = 0.0
    reasoning_content: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # raw body override (garbage / truncated JSON)


Responder = Callable[[dict[str, Any], int], Reply]

# Client timeout for fault tests, and the delay of a reply meant to exceed it: a slow reply
# outlasts the timeout threefold; a prompt one meets it even on a loaded machine.
TIMEOUT_S, SLOW_S = 1.0, 3.0


def _completion(req: dict[str, Any], reply: Reply) -> dict[str, Any]:
    contents = reply.content if isinstance(reply.content, list) else [reply.content] * int(req.get("n") or 1)
    choices = []
    for i, c in enumerate(contents):
        msg: dict[str, Any] = {"role": "assistant", "content": c}
        if reply.reasoning_content is not None:
            msg["reasoning_content"] = reply.reasoning_content
        choices.append({"index": i, "message": msg, "finish_reason": reply.finish_reason})
    toks = sum(len((c or "").split()) for c in contents)
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
            "model": req.get("model", "scripted"), "choices": choices,
            "usage": {"prompt_tokens": 10, "completion_tokens": toks, "total_tokens": 10 + toks}}


class ScriptedServer:
    """Run the scripted server in a background thread; use as a context manager.

    `calls` records every request body received, in order (thread-safe append); `peers` the
    client's (host, port) of each, so a test can count the TCP connections a client opened.
    """

    def __init__(self, responder: Responder, host: str = "127.0.0.1"):
        self.responder = responder
        self.host = host
        self.calls: list[dict[str, Any]] = []
        self.peers: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """Base URL including `/v1`, as OpenAI clients expect."""
        return f"http://{self.host}:{self.port}/v1"

    def _app(self) -> Any:
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, Response, StreamingResponse

        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> dict:
            return {"object": "list", "data": [{"id": "scripted", "object": "model"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            req = await request.json()
            with self._lock:
                index = len(self.calls)
                self.calls.append(req)
                self.peers.append((request.client.host, request.client.port))
            reply = self.responder(req, index)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            if reply.body is not None:
                return Response(reply.body, status_code=reply.status, media_type="application/json",
                                headers=reply.headers)
            if reply.status != 200:
                err = {"error": {"message": f"scripted {reply.status}", "type": "server_error", "code": reply.status}}
                return JSONResponse(err, status_code=reply.status, headers=reply.headers)
            body = _completion(req, reply)
            if not req.get("stream"):
                return JSONResponse(body, headers=reply.headers)

            async def events():
                for ch in body["choices"]:
                    chunk = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"],
                             "model": body["model"], "choices": [{"index": ch["index"], "delta":
                             {"role": "assistant", "content": ch["message"]["content"]}, "finish_reason": None}]}
                    yield f"data: {json.dumps(chunk)}\n\n"
                    chunk["choices"] = [{"index": ch["index"], "delta": {}, "finish_reason": ch["finish_reason"]}]
                    yield f"data: {json.dumps(chunk)}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")

        return app

    def __enter__(self) -> "ScriptedServer":
        import uvicorn

        config = uvicorn.Config(self._app(), host=self.host, port=0, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("scripted server did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
