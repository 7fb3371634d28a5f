"""A deadline for a connection's request headers: uvicorn waits for them without one (its
keep-alive timeout starts only after a response), so a client that opens connections and
sends their headers a byte at a time would hold them open for good.

Each connection must start a request within ``header_timeout`` seconds of opening, and again
of each response it got; else it is closed. A request's body has its own deadline
(:meth:`~._http.ServerApp.body`); a response, such as a run's stream, has none.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["http_protocol"]


def http_protocol(header_timeout: float = 10.0) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (``uvicorn.run(app, http=...)``) with a header deadline."""
    if header_timeout <= 0:
        raise ValueError("header_timeout must be more than 0 seconds")

    class HeaderDeadline(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(header_timeout, self._expire, self.cycle)

        def _expire(self, cycle: Any) -> None:
            idle = cycle is None or cycle.response_complete  # not answering a request now
            if self.cycle is cycle and idle and not self.transport.is_closing():
                self.transport.close()  # no request started since it was armed

    return HeaderDeadline
