"""The synthetic benchmark's models behind an OpenAI-compatible HTTP server on 127.0.0.1.

``aworld-graph optimize`` reaches its models through ``LLM_BASE_URL``; this server answers
with :mod:`aworld_graph.meta.synthetic`'s student (any model name) or teacher (the model
named ``synthetic-teacher``), so a CLI optimization is the synthetic one. Each request
records which process sent it: the client's end of the TCP connection, looked up among the
machine's sockets (``psutil``), so a test can tell the driver's calls from the workers'.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psutil

from aworld_graph.meta import synthetic
from aworld_graph.model import ToolCall

TEACHER = "synthetic-teacher"
"""The model name the optimizer agent is given (``--optimizer-model``)."""


def _sender(client: tuple[str, int]) -> int | None:
    """The process holding the client's end of a connection to this server."""
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and (conn.laddr.ip, conn.laddr.port) == tuple(client[:2]) and conn.pid:
            return int(conn.pid)
    return None


class SyntheticEndpoint:
    """``with SyntheticEndpoint() as server:``; ``server.url`` is the ``/v1`` base URL and
    ``server.calls`` the ``(model, pid)`` of every request, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            pid: int | None = None  # of this connection's client, looked up once

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                if self.pid is None:
                    self.pid = _sender(self.client_address)
                model = str(body.get("model"))
                outer.calls.append((model, self.pid))
                fn = (synthetic.teacher_model() if model == TEACHER else synthetic.student_model()).fn
                reply = fn(body["messages"], body.get("tools") or [])
                asked = [reply] if isinstance(reply, ToolCall) else []
                message: dict[str, Any] = {"role": "assistant", "content": None}
                if asked:
                    message["tool_calls"] = [
                        {
                            "id": f"call_{uuid.uuid4().hex[:8]}",
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                        for call in asked
                    ]
                else:
                    message["content"] = str(reply)
                finish = "tool_calls" if asked else "stop"
                data = json.dumps(
                    {
                        "id": "chatcmpl-" + uuid.uuid4().hex,
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": finish,
                            }
                        ],
                        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SyntheticEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
