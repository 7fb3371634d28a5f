"""A loopback OpenAI-compatible proxy that records the token ids of every call, as AReaL's
does in front of its inference engine: it asks the upstream for them (``logprobs`` and
``return_token_ids``), keeps ``prompt_token_ids``, ``token_ids`` and the logprobs per call,
and passes the reply on. Start with ``with TokenProxy(upstream) as proxy:``."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class TokenProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.calls: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["model"] = "smollm2-135m-instruct"
                body["logprobs"] = True
                body["return_token_ids"] = True
                path = self.path.removeprefix("/v1")
                reply = httpx.post(f"{outer.upstream}{path}", json=body, timeout=300)
                data = reply.json()
                choice = data["choices"][0]
                outer.calls.append(
                    {
                        "id": data["id"],
                        "prompt_ids": data.get("prompt_token_ids"),
                        "completion_ids": choice.get("token_ids"),
                        "logprobs": [
                            c["logprob"]
                            for c in (choice.get("logprobs") or {}).get("content") or []
                        ],
                    }
                )
                raw = json.dumps(data).encode()
                self.send_response(reply.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> TokenProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
