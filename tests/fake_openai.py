"""A small OpenAI-compatible HTTP server on 127.0.0.1 for tests (real sockets, real ``openai``).

Replies are scripted in order; each is one of:

* ``text("…")`` / ``calls(("name", {...}), …)`` – a chat completion,
* ``status(429)`` / ``status(500)`` – an error response,
* ``raw_args("name", "{not json")`` – a tool call with malformed arguments,
* ``body(200, b"<html>…", "text/html")`` – any status, body and content type, as written,
* any of the above with ``delay=`` seconds before answering, or held until ``gate=`` (a
  ``threading.Event``) is set (60 s at most).

Requests with ``"stream": true`` are answered as server-sent events, chunked like OpenAI.
Every request body is recorded in ``server.requests``. ``FakeOpenAI(reject_unknown_fields=True)``
answers a request with a field OpenAI's API does not know (vLLM's ``return_token_ids``…) as
OpenAI does: HTTP 400 "Unrecognized request argument supplied: <field>", scripted reply kept.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def text(
    content: str, *, delay: float = 0.0, gate: threading.Event | None = None
) -> dict[str, Any]:
    return {"kind": "ok", "content": content, "calls": [], "delay": delay, "gate": gate}


def calls(*items: tuple[str, dict[str, Any]], delay: float = 0.0) -> dict[str, Any]:
    return {"kind": "ok", "content": None, "delay": delay,
            "calls": [(name, json.dumps(args)) for name, args in items]}


def raw_args(name: str, arguments: str) -> dict[str, Any]:
    return {"kind": "ok", "content": None, "calls": [(name, arguments)], "delay": 0.0}


def status(code: int, *, delay: float = 0.0, message: str | None = None) -> dict[str, Any]:
    return {"kind": "status", "code": code, "delay": delay, "message": message}


def body(code: int, data: bytes, content_type: str = "application/json") -> dict[str, Any]:
    return {"kind": "body", "code": code, "data": data, "type": content_type, "delay": 0.0}


OPENAI_FIELDS = frozenset({
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p",
    "n", "stream", "stream_options", "stop", "max_tokens", "max_completion_tokens",
    "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user",
    "seed", "response_format", "service_tier", "store", "metadata", "modalities", "audio",
    "prediction", "reasoning_effort", "verbosity", "web_search_options", "prompt_cache_key",
    "safety_identifier", "functions", "function_call",
})
"""The request fields of OpenAI's chat completions API."""


class FakeOpenAI:
    """Start with ``with FakeOpenAI() as server:``; ``server.url`` is the ``/v1`` base URL."""

    def __init__(self, *, reject_unknown_fields: bool = False) -> None:
        self.script: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.default: dict[str, Any] | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # head and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                outer.requests.append({"body": body, "headers": dict(self.headers)})
                unknown = sorted(set(body) - OPENAI_FIELDS) if reject_unknown_fields else []
                if unknown:
                    self._json(400, {"error": {
                        "message": f"Unrecognized request argument supplied: {', '.join(unknown)}",
                        "type": "invalid_request_error", "param": None, "code": None}})
                    return
                plan = outer.script.popleft() if outer.script else outer.default
                if plan is None:
                    self._json(500, {"error": {"message": "fake server: no scripted reply left"}})
                    return
                if plan.get("delay"):
                    time.sleep(plan["delay"])
                if plan.get("gate") is not None:
                    plan["gate"].wait(60)
                if plan["kind"] == "status":
                    message = plan.get("message") or f"scripted {plan['code']}"
                    self._json(plan["code"], {"error": {"message": message, "type": "test"}})
                elif plan["kind"] == "body":
                    self.send_response(plan["code"])
                    self.send_header("content-type", plan["type"])
                    self.send_header("content-length", str(len(plan["data"])))
                    self.end_headers()
                    self.wfile.write(plan["data"])
                elif body.get("stream"):
                    self._stream(body, plan)
                else:
                    self._json(200, _completion(body, plan))

            def _json(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                if code == 429:
                    self.send_header("retry-after-ms", "10")
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], plan: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                base = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion.chunk",
                        "created": int(time.time()), "model": body.get("model", "fake-model")}

                def send(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> None:
                    chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                    if usage is not None:
                        chunk = {**base, "choices": [], "usage": usage}
                    data = f"data: {json.dumps(chunk)}\n\n".encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

                content = plan.get("content") or ""
                for i in range(0, len(content), 3):
                    send({"content": content[i:i + 3]})
                for n, (name, args) in enumerate(plan["calls"]):
                    send({"tool_calls": [{"index": n, "id": f"call_{n}", "type": "function",
                                          "function": {"name": name, "arguments": ""}}]})
                    half = len(args) // 2
                    for part in (args[:half], args[half:]):
                        send({"tool_calls": [{"index": n, "function": {"arguments": part}}]})
                send({}, "tool_calls" if plan["calls"] else "stop")
                send({}, usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
                end = b"data: [DONE]\n\n"
                self.wfile.write(f"{len(end):x}\r\n".encode() + end + b"\r\n0\r\n\r\n")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def add(self, *plans: dict[str, Any]) -> FakeOpenAI:
        self.script.extend(plans)
        return self

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _completion(body: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    tool_calls = [
        {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function", "function": {"name": n, "arguments": a}}
        for n, a in plan["calls"]
    ]
    message: dict[str, Any] = {"role": "assistant", "content": plan.get("content")}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
