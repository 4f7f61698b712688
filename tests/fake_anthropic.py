"""A fake Anthropic Messages API on 127.0.0.1: real HTTP, so the real SDK talks to it.

    with FakeAnthropic() as api:
        api.reply_error(529, "overloaded_error", "Overloaded")
        api.reply_tool_use("send_message", {"to": "human"})
        provider = AnthropicProvider(api_key="test-key", base_url=api.base_url, ...)

Replies are served from a script in order; when it is empty the answer is an
`end_turn` "ok". Every request is recorded (path, headers, parsed JSON body).
A real service also misbehaves: `reply_error` (any status, with or without a
`retry-after`), `hang` (no answer at all), `outage` (every request fails for a
while: a burst of 529s), `reset_connection`.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest

MAX_BODY = 32 * 1024 * 1024
MAX_RECORDED = 1000
RETRY_AFTER_MS = "10"


@dataclass
class RecordedRequest:
    """One request as the server saw it; header names are lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    """One scripted answer. `reset` drops the connection instead of answering."""

    status: int = 200
    body: Any = None  # dict → JSON (a message dict gets the request's model); bytes → raw
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    reset: bool = False
    hang: bool = False  # never answer (until the client gives up or the server closes)


def message_body(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    usage: dict[str, int | None] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """A Messages API response body; `model` None = echo the request's model."""
    figures: dict[str, int | None] = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    figures.update(usage or {})
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": figures,
    }


def error_body(error_type: str, message: str) -> dict[str, Any]:
    """The API's error envelope."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


def error_reply(
    status: int, error_type: str, message: str, retry_after: float | None = None
) -> Reply:
    """An error answer; with `retry_after` (seconds), a `retry-after` header says it."""
    wait = ({"retry-after": f"{retry_after:g}"} if retry_after is not None
            else {"retry-after-ms": RETRY_AFTER_MS})
    return Reply(status=status, body=error_body(error_type, message),
                 headers={**wait, "request-id": "req_fake"})


def models_page(ids: list[str], query: dict[str, list[str]]) -> dict[str, Any]:
    """One page of GET /v1/models: `limit` ids after `after_id`."""
    limit = int(query.get("limit", ["20"])[0])
    after = query.get("after_id", [None])[0]
    start = ids.index(after) + 1 if after in ids else 0
    page = ids[start:start + limit]
    data = [{"type": "model", "id": i, "display_name": i, "created_at": "2026-01-01T00:00:00Z"}
            for i in page]
    return {"data": data, "has_more": start + limit < len(ids),
            "first_id": page[0] if page else None, "last_id": page[-1] if page else None}


class FakeAnthropic:
    """The server; a context manager. Thread-safe: handlers run in their own threads."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        # Answers requests when the script is empty: a "model" written as a function.
        self.responder: Callable[[Any], Reply] | None = None
        self._script: deque[Reply] = deque()
        self._outage: tuple[float, Reply] | None = None  # (until when, the error)
        # GET /v1/models lists these, a page of `limit` at a time; `models_reply`, when
        # set, answers it instead (an error, a delay).
        self.models: list[str] = ["claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"]
        self.models_reply: Reply | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The POST /v1/messages requests only (retries included)."""
        with self._lock:
            return [r for r in self.requests if r.path == "/v1/messages"]

    @property
    def last_body(self) -> dict[str, Any]:
        """The body of the last /v1/messages request."""
        body: dict[str, Any] = self.message_requests[-1].body
        return body

    # -- scripting -------------------------------------------------------------

    def reply(self, reply: Reply, times: int = 1) -> FakeAnthropic:
        with self._lock:
            self._script.extend(reply for _ in range(times))
        return self

    def reply_text(
        self,
        text: str,
        *,
        stop_reason: str = "end_turn",
        usage: dict[str, int | None] | None = None,
    ) -> FakeAnthropic:
        return self.reply(
            Reply(
                body=message_body(
                    [{"type": "text", "text": text}], stop_reason=stop_reason, usage=usage
                )
            )
        )

    def reply_tool_use(
        self,
        name: str,
        input: dict[str, Any],
        *,
        id: str = "toolu_fake_1",
        text: str | None = None,
        usage: dict[str, int | None] | None = None,
    ) -> FakeAnthropic:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content.append({"type": "tool_use", "id": id, "name": name, "input": input})
        return self.reply(Reply(body=message_body(content, stop_reason="tool_use", usage=usage)))

    def reply_error(
        self, status: int, type: str, message: str, *, times: int = 1,
        retry_after: float | None = None,
    ) -> FakeAnthropic:
        """An error reply; `retry_after` (seconds) sends a `retry-after` header, else a
        short `retry-after-ms` keeps the SDK's own retries fast."""
        return self.reply(error_reply(status, type, message, retry_after), times=times)

    def hang(self, *, times: int = 1) -> FakeAnthropic:
        """Requests that get no answer at all: only the client's timeout ends them."""
        return self.reply(Reply(hang=True), times=times)

    def outage(
        self, seconds: float, status: int = 529, type: str = "overloaded_error",
        message: str = "Overloaded", *, retry_after: float | None = None,
    ) -> FakeAnthropic:
        """Every /v1/messages request fails with `status` for the next `seconds` (before
        the script): a burst, as a real outage comes."""
        with self._lock:
            until = time.monotonic() + seconds
            self._outage = (until, error_reply(status, type, message, retry_after))
        return self

    def reply_slow(self, seconds: float, text: str = "ok") -> FakeAnthropic:
        return self.reply(Reply(body=message_body([{"type": "text", "text": text}]), delay=seconds))

    def reply_raw(
        self, status: int, body: bytes | str | dict[str, Any], headers: dict[str, str] | None = None
    ) -> FakeAnthropic:
        raw = body.encode() if isinstance(body, str) else body
        return self.reply(Reply(status=status, body=raw, headers=dict(headers or {})))

    def reset_connection(self, *, times: int = 1) -> FakeAnthropic:
        return self.reply(Reply(reset=True), times=times)

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Stop serving; wakes slow replies so no handler outlives the server for long."""
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- used by the handler ---------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            del self.requests[:-MAX_RECORDED]

    def _next_reply(self, request_body: Any = None) -> Reply:
        with self._lock:
            if self._outage is not None and time.monotonic() < self._outage[0]:
                return self._outage[1]
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(request_body)
        return Reply(body=message_body([{"type": "text", "text": "ok"}]))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeAnthropic


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # a stuck client cannot hold a handler thread for ever
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            self._send(413, error_body("request_too_large", "request body too large"))
            return
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake._record(RecordedRequest("POST", path, headers, body))
        if path == "/v1/messages/count_tokens":
            self._send(200, {"input_tokens": max(1, len(raw) // 4)})
        elif path == "/v1/messages":
            self._answer(fake._next_reply(body), body)
        else:
            self._send(404, error_body("not_found_error", f"no route {path}"))

    def do_GET(self) -> None:
        fake = self.server.fake
        path, _, query = self.path.partition("?")
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake._record(RecordedRequest("GET", path, headers, None))
        if path != "/v1/models":
            self._send(404, error_body("not_found_error", f"no route {path}"))
        elif fake.models_reply is not None:
            self._answer(fake.models_reply, None)
        else:
            self._send(200, models_page(fake.models, parse_qs(query)))

    def _answer(self, reply: Reply, request_body: Any) -> None:
        if reply.hang:
            self.server.fake._closing.wait()
            self.close_connection = True
            return
        if reply.delay and self.server.fake._closing.wait(reply.delay):
            return  # the server is closing; the client has long given up
        if reply.reset:
            # SO_LINGER 0 makes close() send RST: the client sees a reset, not a clean EOF.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        body = reply.body
        if isinstance(body, dict) and body.get("type") == "message" and body.get("model") is None:
            model = request_body.get("model") if isinstance(request_body, dict) else None
            body = {**body, "model": model or "claude-fake"}
        self._send(reply.status, body, reply.headers)

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client went away (e.g. it timed out)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A running fake API, closed after the test."""
    with FakeAnthropic() as api:
        yield api
