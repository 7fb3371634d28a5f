"""What every request passes before a route sees it: a ``Host`` this server answers to (DNS
rebinding), a body sent as JSON (a browser then asks before it sends one across sites), and,
on routes that change state and WebSocket handshakes, a request from this server's own pages or
an allowed origin.

A browser on this machine reaches a loopback server as any other program does; these checks
keep a page elsewhere from running workflows or reading threads through it.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

__all__ = ["LOOPBACK_HOSTS", "RequestGuard", "host_name"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
"""The host names a server answers to by default (with any port)."""

_CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def host_name(host: str) -> str:
    """A ``Host`` header's name without its port, lower case (``[::1]`` keeps brackets)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class RequestGuard:
    """ASGI middleware: refuses a request with a JSON ``{"code", "message"}`` 400, 403 or 415
    before the app sees it."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: Iterable[str] = (), cors_origins: Iterable[str] = ()
    ) -> None:
        self.app = app
        names = {host_name(h) for h in allowed_hosts}
        self.any_host = "*" in names
        self.hosts = LOOPBACK_HOSTS | names
        self.origins = frozenset(o.rstrip("/").lower() for o in cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refused = self.refusal(scope)
            if refused is not None and scope["type"] == "websocket":
                # a browser opens a WebSocket across sites without asking first: the
                # handshake is refused (a 403) as a request that changes state would be
                await WebSocketClose(1008)(scope, receive, send)
                return
            if refused is not None:
                status, code, message = refused
                await JSONResponse({"code": code, "message": message}, status)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """``(status, code, message)`` when the request is refused, else ``None``."""
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self.any_host and host_name(host) not in self.hosts:
            return (
                400,
                "host_not_allowed",
                f"Host {host[:100]!r} is not served here (a page may have rebound its DNS name "
                "to this machine); reach the server as 127.0.0.1 or localhost, or start it "
                "with --allowed-host NAME",
            )
        # a WebSocket (its handshake a GET) carries commands that change state
        if scope.get("method") in _CHANGES or scope["type"] == "websocket":
            scheme = scope.get("scheme", "http")
            scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)  # the page's origin
            refused = self._cross_site(headers, f"{scheme}://{host}")
            if refused is not None:
                return refused
        if _has_body(headers) and not _is_json(headers.get("content-type", "")):
            given = headers.get("content-type")
            return (
                415,
                "json_required",
                f"the request body must be JSON sent with Content-Type: application/json (got "
                f"{'no Content-Type' if given is None else repr(given[:100])})",
            )
        return None

    def _cross_site(self, headers: Headers, own: str) -> tuple[int, str, str] | None:
        origin = headers.get("origin")
        if origin is not None:
            name = origin.rstrip("/").lower()
            if name == own.lower() or name in self.origins:
                return None
            return (
                403,
                "cross_origin",
                f"a request from Origin {origin[:100]!r} may not change anything here: only "
                "this server's own page may, and origins allowed with --cors-origin",
            )
        if headers.get("sec-fetch-site", "").lower() == "cross-site":
            return (
                403,
                "cross_site",
                "a cross-site browser request (Sec-Fetch-Site: cross-site) may not change "
                "anything here; allow its origin with --cors-origin",
            )
        return None


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() != "0")


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
