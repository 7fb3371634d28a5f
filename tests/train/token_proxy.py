"""A loopback OpenAI-compatible proxy that records the token ids of every call, as AReaL's
does in front of its inference engine: it asks the upstream for them (``logprobs`` and
``return_token_ids``), keeps ``prompt_token_ids``, ``token_ids`` and the logprobs per call,
and passes the reply on. ``with TokenProxy(upstream) as proxy:`` serves it on 127.0.0.1
(a real uvicorn server, stopped on exit); ``proxy.url`` is its ``/v1`` base URL."""

from __future__ import annotations

from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.server.conftest import LiveServer


class TokenProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.calls: list[dict[str, Any]] = []
        """Per call: ``id``, ``prompt_ids``, ``completion_ids``, ``logprobs``."""
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        self._live = LiveServer(app)
        self.url = ""

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        body.update(model="smollm2-135m-instruct", logprobs=True, return_token_ids=True)
        async with httpx.AsyncClient(timeout=300) as client:
            reply = await client.post(f"{self.upstream}/chat/completions", json=body)
        data = reply.json()
        choice = data["choices"][0]
        content = (choice.get("logprobs") or {}).get("content") or []
        self.calls.append(
            {
                "id": data["id"],
                "prompt_ids": data.get("prompt_token_ids"),
                "completion_ids": choice.get("token_ids"),
                "logprobs": [c["logprob"] for c in content],
            }
        )
        return JSONResponse(data, status_code=reply.status_code)

    def __enter__(self) -> TokenProxy:
        self._live.__enter__()
        self.url = f"{self._live.url}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(*exc)
