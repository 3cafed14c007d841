"""A local HTTP server that speaks the chat-completions API of Mistral and of OpenAI.

Tests point the real provider clients (``llama-index-llms-mistralai``,
``llama-index-llms-openai-like``) at it, so a fault goes through the same SDK code
as in production: HTTP status, headers, SSE framing, a socket that goes silent.

Each request pops the next ``Reply`` of the script (``default`` once it is empty):

- ``answer(text)``: a normal answer, streamed as SSE chunks (or one JSON body when
  the request has ``"stream": false``);
- ``status(code, retry_after=...)``: an HTTP error (401, 429, 503...) with a JSON body;
- ``stall(text, seconds)``: stream ``text``, then send nothing for ``seconds``;
- ``empty()``: a 200 stream with a role chunk, a finish chunk and ``[DONE]``, no content.

Both APIs share one path shape (``/v1/chat/completions``; the Mistral SDK adds
``/v1`` to its endpoint, the OpenAI client takes a base URL ending in ``/v1``) and
one chunk format, so one server serves both. Every request is recorded with the
time it arrived.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

ReplyKind = Literal["answer", "status", "stall", "empty"]


@dataclass(frozen=True)
class Reply:
    """One scripted response; build it with ``answer``, ``status``, ``stall`` or ``empty``."""

    kind: ReplyKind
    text: str = ""
    code: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    chunk_size: int = 8


def answer(text: str, chunk_size: int = 8) -> Reply:
    return Reply("answer", text=text, chunk_size=chunk_size)


def status(code: int, *, retry_after: float | None = None, message: str = "") -> Reply:
    headers = (("Retry-After", f"{retry_after:g}"),) if retry_after is not None else ()
    return Reply("status", code=code, headers=headers, text=message or f"scripted error {code}")


def stall(text: str = "", seconds: float = 60.0) -> Reply:
    return Reply("stall", text=text, seconds=seconds)


EmptyShape = Literal["role_only", "nothing", "no_choices"]


def empty(shape: EmptyShape = "role_only") -> Reply:
    """A 200 stream without any content: ``role_only`` (a role chunk, a finish chunk,
    ``[DONE]``), ``nothing`` (the connection closes before any event) or ``no_choices``
    (chunks whose ``choices`` list is empty, as a usage-only chunk, then ``[DONE]``)."""
    return Reply("empty", text=shape)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float  # time.monotonic() when it arrived

    @property
    def streamed(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def prompt_text(self) -> str:
        return "\n".join(str(m.get("content") or "") for m in self.body.get("messages", []))


@dataclass
class FakeLLMServer:
    """The scripted server; use ``serve()`` to run it for the length of a ``with``."""

    script: list[Reply] = field(default_factory=list)
    default: Reply | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)

    @property
    def mistral_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.script:
                return self.script.pop(0)
        if self.default is None:
            return status(500, message="the test scripted no more replies")
        return self.default

    def wait(self, seconds: float) -> None:
        """Sleep in a handler; cut short when the server closes (no thread outlives a test)."""
        self._closing.wait(seconds)


@contextmanager
def serve(script: Sequence[Reply] = (), default: Reply | None = None) -> Iterator[FakeLLMServer]:
    """Run a ``FakeLLMServer`` on a free loopback port for the length of the block."""
    server = FakeLLMServer(script=list(script), default=default)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(server))
    httpd.daemon_threads = True
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server._closing.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _handler_for(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            request = RecordedRequest(
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body if isinstance(body, dict) else {},
                at=time.monotonic(),
            )
            reply = server.next_reply(request)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            model = str(request.body.get("model") or "fake-model")
            try:
                if reply.kind == "status":
                    self._error(reply)
                elif not request.streamed:
                    self._whole(reply, model)
                else:
                    self._stream(reply, model)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout): nothing more to send

        def _json(self, code: int, payload: dict[str, Any], headers: Sequence[Any] = ()) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, reply: Reply) -> None:
            # Both SDKs read their message from these fields.
            payload = {
                "object": "error",
                "message": reply.text,
                "type": "scripted_error",
                "code": str(reply.code),
                "error": {"message": reply.text, "type": "scripted_error", "code": reply.code},
            }
            self._json(reply.code, payload, reply.headers)

        def _whole(self, reply: Reply, model: str) -> None:
            if reply.kind == "stall":
                server.wait(reply.seconds)
            content = reply.text if reply.kind in ("answer", "stall") else ""
            self._json(
                200,
                {
                    "id": "cmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                },
            )

        def _stream(self, reply: Reply, model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            if reply.kind == "empty" and reply.text != "role_only":
                if reply.text == "no_choices":
                    self._send(json.dumps({**self._frame(model), "choices": []}))
                    self._send("[DONE]")
                return
            self._chunk(model, {"role": "assistant", "content": ""}, None)
            text = reply.text if reply.kind in ("answer", "stall") else ""
            size = max(1, reply.chunk_size)
            for start in range(0, len(text), size):
                self._chunk(model, {"content": text[start : start + size]}, None)
            if reply.kind == "stall":
                server.wait(reply.seconds)
                return  # the connection closes without a finish chunk nor [DONE]
            self._chunk(model, {}, "stop")
            self._send("[DONE]")

        def _frame(self, model: str) -> dict[str, Any]:
            return {
                "id": "cmpl-fake",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
            }

        def _chunk(self, model: str, delta: dict[str, Any], finish: str | None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            self._send(json.dumps({**self._frame(model), "choices": [choice]}))

        def _send(self, data: str) -> None:
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

    return Handler
