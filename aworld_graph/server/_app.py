"""What the route handlers (:mod:`._run_routes`, :mod:`._page`) use of the server app.

:class:`~._http.ServerApp` has all of it; the handlers name this protocol rather than the app
class, which imports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from ._assistants import Assistants
from ._runs import RunManager
from ._threads import Threads

__all__ = ["App", "Handler", "Rows"]

Handler = Callable[[Request], Awaitable[Response]]
Rows = list[tuple[str, Handler, list[str]]]
"""A group of routes: ``(path, handler, methods)`` rows, each guarded by the app."""


class App(Protocol):
    assistants: Assistants
    saver: Any
    runs: RunManager
    threads: Threads

    def json(
        self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        """``data`` as a JSON response."""
        ...

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object."""
        ...

    async def json_body(self, request: Request) -> Any:
        """The request's JSON value (an object or a list)."""
        ...

    async def raw_body(self, request: Request) -> bytes:
        """The request's body, within the server's size and time limits."""
        ...

    async def checked(self, request: Request, model: Any) -> dict[str, Any]:
        """The request's JSON object, validated against the pydantic ``model``."""
        ...
