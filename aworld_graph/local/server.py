"""The embedded model's server process: ``python -m aworld_graph.local.server --model PATH``.

llama-cpp-python's OpenAI-compatible app (``/v1/chat/completions``, ``/v1/models``…) on
``127.0.0.1``, with two changes:

* chats go through the project's handler (:mod:`.handler`, chat format
  ``aworld-smollm2``);
* a request whose client goes away (a client timeout, a cancelled task, a closed connection)
  stops its generation within a token, so the next request is served at once. llama-cpp-python
  itself keeps generating a non-streamed reply to the end, holding the model lock, so a
  runaway reply would hold every retry queued behind it.

An assistant message whose ``content`` is ``null`` (allowed by the OpenAI API next to
``tool_calls``; llama-cpp-python's request model refuses it with a 500) is read as ``""``.

A non-streamed reply asked for with ``logprobs`` keeps the token fields the handler adds
(vLLM's ``prompt_token_ids`` and the choice's ``token_ids``, ``logprobs`` and
``aworld_tokens``), which llama-cpp-python's response model would drop: they are merged into
the JSON body on the way out.

A new request also no longer cuts a streaming one short (llama-cpp-python's
``interrupt_requests``, on by default, ends a stream when another request waits); requests
are served one at a time, in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from .handler import CANCEL, CHAT_FORMAT, SAMPLED, register

__all__ = ["StopOnDisconnect", "build_app", "main"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class StopOnDisconnect:
    """ASGI middleware: a POST's generation is cancelled when its client disconnects.

    The request body is read first and replayed to the app; then a watcher waits for the
    client's ``http.disconnect`` and sets the request's cancel event (:data:`CANCEL`, read
    by the chat handler in its worker thread), and the app's own ``receive`` reports the
    disconnect too (for streamed replies)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body: list[Message] = []
        while True:
            message = await receive()
            body.append(message)
            if message.get("type") != "http.request" or not message.get("more_body"):
                break
        if str(scope.get("path", "")).endswith("/chat/completions"):
            body = _null_content_as_text(scope, body)
        cancel = threading.Event()
        gone = asyncio.Event()
        if body[-1].get("type") == "http.disconnect":
            cancel.set()
            gone.set()

        async def replay() -> Message:
            if body:
                return body.pop(0)
            await gone.wait()
            return {"type": "http.disconnect"}

        async def watch() -> None:
            while not gone.is_set():
                message = await receive()
                if message.get("type") == "http.disconnect":
                    cancel.set()
                    gone.set()

        token = CANCEL.set(cancel)
        sampled: dict[str, Any] = {}
        held = SAMPLED.set(sampled)
        watcher = asyncio.ensure_future(watch()) if not gone.is_set() else None
        start: list[Message] = []
        parts: list[bytes] = []

        async def send_with_tokens(message: Message) -> None:
            """Hold a JSON reply back until its end, then add the sampled token fields."""
            kind = message.get("type")
            if kind == "http.response.start" and _is_json(message):
                start.append(message)
                return
            if kind == "http.response.body" and start:
                parts.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                data = _with_tokens(b"".join(parts), sampled)
                head = dict(start[0])
                head["headers"] = [
                    (k, str(len(data)).encode() if k.lower() == b"content-length" else v)
                    for k, v in head.get("headers", [])
                ]
                await send(head)
                await send({"type": "http.response.body", "body": data})
                return
            await send(message)

        try:
            await self.app(scope, replay, send_with_tokens)
        finally:
            SAMPLED.reset(held)
            CANCEL.reset(token)
            if watcher is not None:
                watcher.cancel()


def _is_json(start: Message) -> bool:
    headers = dict(start.get("headers", []))
    return bytes(headers.get(b"content-type", b"")).startswith(b"application/json")


def _with_tokens(data: bytes, sampled: dict[str, Any]) -> bytes:
    """A chat completion body with the handler's token fields merged in (as it was if none)."""
    if not sampled:
        return data
    try:
        reply = json.loads(data)
        reply["prompt_token_ids"] = sampled["prompt_token_ids"]
        reply["choices"][0].update(sampled["choice"])
    except (ValueError, KeyError, IndexError, TypeError):
        return data
    return json.dumps(reply).encode("utf-8")


def _null_content_as_text(scope: Scope, body: list[Message]) -> list[Message]:
    """The request body with ``"content": null`` messages given ``""`` (headers fixed up)."""
    if body[-1].get("type") != "http.request":
        return body
    raw = b"".join(m.get("body", b"") for m in body)
    try:
        request = json.loads(raw)
    except ValueError:
        return body
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and "content" in m and m["content"] is None for m in messages
    ):
        return body
    for message in messages:
        if isinstance(message, dict) and message.get("content", "") is None:
            message["content"] = ""
    data = json.dumps(request).encode("utf-8")
    scope["headers"] = [
        (k, str(len(data)).encode() if k.lower() == b"content-length" else v)
        for k, v in scope.get("headers", [])
    ]
    return [{"type": "http.request", "body": data, "more_body": False}]


def build_app(
    *, model: str, alias: str, n_ctx: int = 4096, n_threads: int | None = None
) -> StopOnDisconnect:
    """The server app for the GGUF file ``model``, served under the name ``alias``."""
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    register()
    model_settings: dict[str, Any] = {
        "model": model,
        "model_alias": alias,
        "chat_format": CHAT_FORMAT,
        "n_ctx": n_ctx,
        "verbose": False,
    }
    if n_threads:
        model_settings["n_threads"] = n_threads
    app = create_app(
        server_settings=ServerSettings(host="127.0.0.1", interrupt_requests=False),
        model_settings=[ModelSettings(**model_settings)],
    )
    return StopOnDisconnect(app)


def _stop_at_end_of_stdin() -> None:
    """Block on stdin until its end, then stop this server as SIGTERM would."""
    while sys.stdin.buffer.read(65536):
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: Sequence[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m aworld_graph.local.server")
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--model_alias", required=True, help="the model name clients use")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n_ctx", type=int, default=4096)
    parser.add_argument("--n_threads", type=int, default=None)
    parser.add_argument(
        "--exit-with-stdin",
        action="store_true",
        help="stop when stdin reaches its end (the parent's pipe: the parent has gone)",
    )
    args = parser.parse_args(argv)
    if args.exit_with_stdin:
        threading.Thread(target=_stop_at_end_of_stdin, name="parent-watch", daemon=True).start()
    app = build_app(
        model=args.model, alias=args.model_alias, n_ctx=args.n_ctx, n_threads=args.n_threads
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
