"""The Starlette app: LangGraph Platform / Agent Protocol routes, API-key auth, request limits
and JSON errors.

Errors are ``{"code", "message"}`` JSON with a 4xx status; an unexpected failure is a 500
with a one-line message (the traceback goes to the server's log, never to the client).
Every request first passes :class:`~._guard.RequestGuard`; path ids, bodies and queries are
checked by :mod:`._input`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..secrets import register_secret
from ._a2a import A2ARoutes, is_card
from ._app import Handler, Rows
from ._assistant_routes import AssistantRoutes
from ._assistants import Assistants
from ._cron_routes import CronRoutes
from ._crons import CronScheduler, CronTable
from ._guard import RequestGuard
from ._input import check_depth, check_id, validate
from ._item_store import ItemStore
from ._mcp import McpTools
from ._page import PageRoutes
from ._run_routes import RunRoutes
from ._runs import RunManager
from ._store_routes import StoreRoutes
from ._thread_commands import ThreadCommands
from ._thread_routes import ThreadRoutes
from ._thread_socket import ThreadSocket
from ._threads import Threads
from ._wire import ApiError, dumps

__all__ = ["ServerApp"]

log = logging.getLogger("aworld_graph.server")

OPEN_PATHS = frozenset({"/ok", "/health"})
"""Routes that answer without the API key."""


def _open(path: str) -> bool:
    """Whether ``path`` answers without the API key: the health checks and the A2A agent
    cards (public, as the A2A spec allows; a card names the key's scheme, never the key)."""
    return path in OPEN_PATHS or is_card(path)


def _key_of(request: HTTPConnection) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    if request.url.path == "/":  # the page itself: opened as /?key=... (never logged)
        return request.query_params.get("key")
    return None


class ServerApp:
    """Routes and shared state of one server."""

    def __init__(
        self,
        assistants: Assistants,
        saver: Any,
        *,
        api_key: str | None = None,
        cors_origins: list[str] | None = None,
        allowed_hosts: list[str] | None = None,
        max_body: int = 1 << 20,
        body_timeout: float = 30.0,
    ) -> None:
        self.assistants = assistants
        self.saver = saver
        self.api_key = api_key or None
        register_secret(self.api_key)  # scrubbed from every log line and answer, as any key
        self.max_body = max_body
        self.body_timeout = body_timeout
        assistants.keep_in(saver)  # created assistants live in the store
        self.runs = RunManager(saver)
        self.threads = Threads(saver, assistants, self.runs)
        self.store = ItemStore(saver.database)
        assistants.give_store(saver, self.store)  # a graph's nodes read and write these items
        crons = CronTable(saver.database)
        self.crons = CronScheduler(crons, self)
        run = self.run_routes = RunRoutes(self)
        page = PageRoutes(self)
        self.mcp = McpTools(self, run)
        commands = ThreadCommands(self, run)
        get = ["GET"]
        table: Rows = [
            ("/ok", self.ok, get),
            ("/health", self.ok, get),
            ("/info", self.info, get),
            *page.rows(),
            *AssistantRoutes(self).rows(),
            *ThreadRoutes(self).rows(),
            *run.rows(),
            *commands.rows(),
            *A2ARoutes(self, run.check, api_key=bool(self.api_key)).rows(),
            *self.mcp.rows(),
            *StoreRoutes(self, self.store).rows(),
            *CronRoutes(self, crons, self.crons).rows(),
        ]
        routes: list[BaseRoute] = [Route(path, self._guard(fn), methods=m) for path, fn, m in table]
        socket = ThreadSocket(commands, max_frame=max_body)
        routes.append(
            WebSocketRoute("/threads/{thread_id:str}/stream/events", self._guard_socket(socket))
        )
        middleware = [
            Middleware(
                RequestGuard, allowed_hosts=allowed_hosts or (), cors_origins=cors_origins or ()
            )
        ]
        if cors_origins:
            middleware.append(
                Middleware(
                    CORSMiddleware,
                    allow_origins=cors_origins,
                    allow_methods=["GET", "POST", "PATCH", "DELETE"],
                    allow_headers=["content-type", "x-api-key", "authorization", "last-event-id"],
                    expose_headers=["content-location", "location"],  # where a cut run goes on
                )
            )
        self.app = Starlette(
            routes=routes,
            middleware=middleware,
            exception_handlers={404: self._not_found, 405: self._not_allowed},
        )
        self.app.router.lifespan_context = self._lifespan

    # -- plumbing --------------------------------------------------------------------------

    def _lifespan(self, app: Starlette) -> Any:
        import contextlib

        @contextlib.asynccontextmanager
        async def span() -> Any:
            routes = self.run_routes
            await self.runs.recover(self.assistants.get, routes.check, self.threads.exists)
            async with self.mcp.running(), self.crons.running():
                yield
            await self.runs.close()

        return span()

    def _guard(self, fn: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                self._check_key(request)
                for name, value in request.path_params.items():
                    check_id(name, value)
                return await fn(request)
            except ApiError as exc:
                return self.error(exc.status, exc.code, exc.message)
            except Exception:
                log.exception("%s %s failed", request.method, request.url.path)
                return self.error(500, "internal", "the server failed on this request; see its log")

        return guarded

    def _guard_socket(self, socket: ThreadSocket) -> Callable[[WebSocket], Awaitable[None]]:
        """``socket``'s handler behind the checks every route has: without the API key (or
        with a malformed thread id) the handshake is refused, a 403 that says nothing more."""

        async def guarded(websocket: WebSocket) -> None:
            try:
                self._check_key(websocket)
                for name, value in websocket.path_params.items():
                    check_id(name, value)
            except ApiError:
                await websocket.close(1008)
                return
            try:
                await socket.serve(websocket)
            except Exception:  # the traceback to the log; the client sees the socket close
                log.exception("WebSocket %s failed", websocket.url.path)
                with contextlib.suppress(RuntimeError, OSError):
                    await websocket.close(1011)

        return guarded

    def _check_key(self, request: HTTPConnection) -> None:
        """A 401 unless the request may pass: it has the API key, none is set, or its path
        answers without one."""
        if self.api_key and not _open(request.url.path):
            given = _key_of(request) or ""
            if not hmac.compare_digest(given.encode(), self.api_key.encode()):
                raise ApiError(
                    401,
                    "unauthorized",
                    "missing or wrong API key: send it in the x-api-key header "
                    "(langgraph_sdk.get_client(url=..., api_key=...))",
                )

    @staticmethod
    def json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
        return Response(
            dumps(data), status, headers=dict(headers or {}), media_type="application/json"
        )

    @staticmethod
    def error(status: int, code: str, message: str) -> Response:
        return JSONResponse({"code": code, "message": message}, status)

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        return self._unserved(
            request, 404, "not_found", f"no route {request.method} {request.url.path}"
        )

    async def _not_allowed(self, request: Request, exc: Exception) -> Response:
        message = f"{request.method} is not served on {request.url.path}"
        return self._unserved(request, 405, "method_not_allowed", message)

    def _unserved(self, request: Request, status: int, code: str, message: str) -> Response:
        """The error of a path or method not served, or the 401 a served one would answer
        without the key (so a caller without it cannot tell which paths are served)."""
        try:
            self._check_key(request)
        except ApiError as refused:
            return self.error(refused.status, refused.code, refused.message)
        return self.error(status, code, message)

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object (at most ``max_body`` bytes, read within
        ``body_timeout`` seconds, nested at most :data:`~._input.MAX_DEPTH` deep); ``{}`` when
        empty."""
        data = await self.json_body(request)
        if not isinstance(data, dict):
            raise ApiError(422, "invalid_body", "the request body must be a JSON object")
        return data

    async def json_body(self, request: Request) -> Any:
        """The request's JSON value (an object or, for ``/runs/batch``, a list), read and
        checked as :meth:`body` says; ``{}`` when empty."""
        raw = await self.raw_body(request)
        if not raw.strip():
            return {}
        try:  # orjson: JSON only (no NaN), valid UTF-8 (no lone surrogate), at most 1024 deep
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, "invalid_json", f"the request body is not JSON: {exc}") from None
        check_depth(data if isinstance(data, dict) else {"body": data})
        return data

    async def raw_body(self, request: Request) -> bytes:
        """The request's body: at most ``max_body`` bytes (else a 413), arriving within
        ``body_timeout`` seconds (else a 408)."""
        declared = request.headers.get("content-length")
        if declared and declared.isascii() and declared.isdigit() and int(declared) > self.max_body:
            raise ApiError(413, "too_large", f"request body over {self.max_body} bytes")
        raw = bytearray()
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.stream():
                    raw += chunk
                    if len(raw) > self.max_body:
                        raise ApiError(413, "too_large", f"request body over {self.max_body} bytes")
        except TimeoutError:
            raise ApiError(
                408, "body_timeout", f"the request body did not arrive within {self.body_timeout} s"
            ) from None
        return bytes(raw)

    # -- misc ------------------------------------------------------------------------------

    async def ok(self, request: Request) -> Response:
        return self.json({"ok": True})

    async def info(self, request: Request) -> Response:
        from importlib.metadata import version

        return self.json(
            {"version": version("aworld-graph"), "flags": {"assistants": True, "crons": True}}
        )

    async def checked(self, request: Request, model: Any) -> dict[str, Any]:
        """The request's JSON object, validated against the pydantic ``model``."""
        body = await self.body(request)
        validate(model, body)
        return body
