"""A scripted OpenAI-compatible HTTP server on loopback, for tests and benchmarks.

Tests use it to drive litellm's real HTTP path without network or keys:

    with FakeLLMServer() as server:
        server.responder = lambda request: FakeReply("hi", status=200)
        target = ModelTarget(model="openai/fake-model", api_base=server.base_url)

Benchmarks run it as its own process:

    python -m om_mcp.testing.fake_server --port 8999 --delay 2 [--reply-file F]

Endpoints: POST /v1/chat/completions (plain JSON, or SSE chunks when the
request says stream=true), POST /v1/responses (the Responses API's SSE events:
`response.created`, one `response.output_item.done` per output item,
`response.completed` with usage; what the Codex CLI speaks, `wire_api =
"responses"`, checked against codex-rs/codex-api/src/sse/responses.rs) and GET
/v1/models. The default reply is a small valid Observer answer with one
observation per `[id:...]` found in the request.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLMServer", "FakeReply", "default_responder", "request_text", "main"]


@dataclass
class FakeReply:
    """A scripted answer: text (status 200) or an error status, after an optional delay."""

    text: str = ""
    delay_seconds: float = 0.0
    status: int = 200
    usage: dict[str, int] | None = None  # overrides the rough usage numbers
    # [{"name": ..., "arguments": {...}, "namespace": ...}]: the model calls tools (a namespace: Responses API only)
    tool_calls: list[dict[str, Any]] | None = None


Responder = Callable[[dict[str, Any]], Any]  # -> str | (status, body) | FakeReply

_ID_PATTERN = re.compile(r"\[id:([^\]\s]+)\]")
_THREAD_PATTERN = re.compile(r'<thread id="([^"]+)">\n(.*?)\n</thread>', re.S)


def request_text(request: dict[str, Any]) -> str:
    """All text of a chat request's messages (or a Responses request's input items), joined by newlines."""
    parts: list[str] = []
    for message in request.get("messages") or request.get("input") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(item.get("text", "")) for item in content if isinstance(item, dict))
    return "\n".join(parts)


def default_responder(request: dict[str, Any]) -> str:
    """A valid Observer answer: one observation line per `[id:X]` in the request; for a request
    holding several conversations (resource scope), one `<thread id>` section for each."""
    text = request_text(request)
    last = request_text({"messages": (request.get("messages") or [])[-1:]})  # the transcript, not the prompt
    threads = _THREAD_PATTERN.findall(last)
    if threads:
        sections = [f'<thread id="{label}">\n{_observed(body)}\n</thread>' for label, body in threads]
        return "<observations>\n" + "\n".join(sections) + "\n</observations>"
    return "<observations>\n" + _observed(text) + "\n</observations>"


def _observed(text: str) -> str:
    ids = list(dict.fromkeys(_ID_PATTERN.findall(text)))
    lines = [f"* 🔴 (10:00) observed message {i}" for i in ids] or ["* 🔴 (10:00) placeholder observation"]
    return "Date: Jan 1, 2026\n" + "\n".join(lines)


def rough_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class FakeLLMServer:
    """Context manager running the fake server in a daemon thread on a free loopback port."""

    def __init__(
        self, responder: Responder | None = None, *, delay: float = 0.0, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.responder: Responder = responder or default_responder
        self.delay = delay  # seconds before every reply, on top of FakeReply.delay_seconds
        self.requests: list[dict[str, Any]] = []  # received JSON bodies, in arrival order
        self.request_headers: list[dict[str, str]] = []
        self._host = host
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()  # wakes handlers sleeping through a delay
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    def start(self) -> FakeLLMServer:
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = ThreadingHTTPServer((self._host, self._port), handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps close() fast (shutdown waits for one poll).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._closing.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeLLMServer
    server_version = "FakeLLM/1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(
                200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "om-mcp"}]}
            )
        else:
            self._send_error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        responses = self.path.rstrip("/").endswith("/responses")
        if not responses and not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_error(404, f"no route for POST {self.path}")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
        except (ValueError, json.JSONDecodeError) as exc:
            self._send_error(400, f"invalid JSON body: {exc}")
            return
        self.owner._record(request, {k.lower(): v for k, v in self.headers.items()})
        try:
            reply = _as_reply(self.owner.responder(request))
        except Exception as exc:  # a broken responder shows up as a 500, not a hang
            reply = FakeReply(text=f"responder failed: {exc!r}", status=500)
        self.owner._wait(self.owner.delay + reply.delay_seconds)
        if self.owner._closing.is_set():
            return
        try:
            if reply.status != 200:
                self._send_error(reply.status, reply.text or f"scripted status {reply.status}")
            elif responses:
                self._send_response_events(request, reply)
            elif request.get("stream"):
                self._send_stream(request, reply)
            else:
                self._send_json(200, _completion_body(request, reply))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to do

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str) -> None:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})

    def _send_stream(self, request: dict[str, Any], reply: FakeReply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()  # HTTP/1.0: the body ends when the connection closes
        ident, created, model = _ident(), int(time.time()), request.get("model", "fake-model")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": reply.text[i : i + 24]}) for i in range(0, len(reply.text), 24)]
        events.append(chunk({}, "stop"))
        if (request.get("stream_options") or {}).get("include_usage"):
            events.append(
                {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": _usage(request, reply),
                }
            )
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _send_response_events(self, request: dict[str, Any], reply: FakeReply) -> None:
        """A Responses API stream: the reply's text as one assistant message, its tool calls as
        function_call items, then `response.completed` with the usage."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        ident = f"resp_{uuid.uuid4().hex[:24]}"
        items: list[dict[str, Any]] = []
        if reply.text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        for call in reply.tool_calls or []:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{uuid.uuid4().hex[:24]}",
                    "call_id": f"call_{uuid.uuid4().hex[:12]}",
                    "name": call["name"],
                    "arguments": json.dumps(call.get("arguments", {})),
                    # A tool of a namespace (Codex groups each MCP server's tools under `mcp__<server>`).
                    **({"namespace": call["namespace"]} if call.get("namespace") else {}),
                }
            )
        usage = _usage({"messages": request.get("input") or []}, reply)
        events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": ident}}]
        events += [{"type": "response.output_item.done", "output_index": n, "item": i} for n, i in enumerate(items)]
        events.append(
            {
                "type": "response.completed",
                "response": {
                    "id": ident,
                    "usage": {
                        "input_tokens": usage["prompt_tokens"],
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": usage["completion_tokens"],
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": usage["total_tokens"],
                    },
                },
            }
        )
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()


def _as_reply(value: Any) -> FakeReply:
    if isinstance(value, FakeReply):
        return value
    if isinstance(value, str):
        return FakeReply(text=value)
    if isinstance(value, tuple) and len(value) == 2:
        status, body = value
        if isinstance(body, dict):
            body = (body.get("error") or {}).get("message") or json.dumps(body)
        return FakeReply(text=str(body), status=int(status))
    raise TypeError(f"responder returned {type(value)!r}; want str, (status, body) or FakeReply")


def _ident() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def _usage(request: dict[str, Any], reply: FakeReply) -> dict[str, int]:
    if reply.usage:
        usage = dict(reply.usage)
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        return usage
    prompt = rough_tokens(request_text(request)) + 4 * len(request.get("messages") or [])
    completion = rough_tokens(reply.text)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _completion_body(request: dict[str, Any], reply: FakeReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    finish = "stop"
    if reply.tool_calls:
        message["content"] = reply.text or None
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))},
            }
            for call in reply.tool_calls
        ]
        finish = "tool_calls"
    return {
        "id": _ident(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(request, reply),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server for tests and benchmarks")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--reply-file", help="file whose text is every reply (default: echo [id:...] observations)")
    args = parser.parse_args(argv)

    responder: Responder = default_responder
    if args.reply_file:
        with open(args.reply_file, encoding="utf-8") as f:
            fixed = f.read()
        responder = lambda request: fixed  # noqa: E731

    server = FakeLLMServer(responder, delay=args.delay, host=args.host, port=args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        # Benchmarks read this line to learn the port.
        print(f"fake LLM server listening on {server.base_url}", flush=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
