"""``aworld-graph serve``: the LangGraph Platform / Agent Protocol HTTP API over the library,
which ``langgraph_sdk.get_client(url=...)`` and ``langgraph.pregel.remote.RemoteGraph`` talk
to, and a live run page at ``/``.

A run the server starts is an ordinary thread of the store (``Runners``, ``aworld-graph
resume``, ``viz --run`` and ``export`` see it) and the server sees the runs the CLI made.

>>> app = create_app([Assistant.of(swarm, target="workflows/math.yaml")], store="runs.db")  # doctest: +SKIP
>>> uvicorn.run(app, host="127.0.0.1", port=2024, http=http_protocol())  # doctest: +SKIP
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError
from ._assistants import Assistant, Assistants
from ._connections import http_protocol
from ._guard import LOOPBACK_HOSTS
from ._http import ServerApp
from ._input import ID_RULE, MAX_DEPTH, MAX_METADATA
from ._langgraph_app import CONFIG_FILE, Project, load_graph, read_project, source_of
from ._mcp import serve_stdio as serve_mcp_stdio
from ._runs import KEEP_FINISHED

__all__ = [
    "API_KEY_ENV",
    "Assistant",
    "Assistants",
    "ServerApp",
    "check_bind",
    "create_app",
    "host_names",
]
__all__ += ["http_protocol", "LOOPBACK_HOSTS", "ID_RULE", "MAX_DEPTH", "MAX_METADATA"]
__all__ += ["CONFIG_FILE", "Project", "load_graph", "read_project", "source_of"]
__all__ += ["KEEP_FINISHED", "serve_mcp_stdio"]

API_KEY_ENV = "AWORLD_GRAPH_API_KEY"
"""With this set, every route but ``/ok``, ``/health`` and the A2A agent cards needs the
key."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _every_address(host: str) -> bool:
    """Whether binding ``host`` listens on every address of the machine."""
    if not host:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_names(host: str, allowed_hosts: Iterable[str] = ()) -> list[str]:
    """The ``Host`` names, beyond the loopback ones, that a server bound to ``host`` answers
    to: ``allowed_hosts`` and ``host`` itself. Bound to every address, the names clients use
    cannot be known, so ``allowed_hosts`` must name them (``*``: any)."""
    allowed = list(allowed_hosts)
    if not _every_address(host):
        return [*allowed, host]
    if not allowed:
        raise ConfigError(
            f"serving on every address ({host or 'all'}) answers only requests for loopback "
            "names; name the host names clients use: --allowed-host NAME (or '*' for any)"
        )
    return allowed


def check_bind(host: str, api_key: str | None, *, insecure: bool = False) -> None:
    """Refuse to serve beyond this machine without an API key, unless ``insecure``."""
    if not is_loopback(host) and not api_key and not insecure:
        raise ConfigError(
            f"refusing to serve on {host} without an API key: anyone who can reach it could "
            f"run workflows; set {API_KEY_ENV}, bind 127.0.0.1, or pass --insecure"
        )


def create_app(
    assistants: Iterable[Assistant] | Assistants,
    *,
    store: Any = None,
    api_key: str | None = None,
    cors_origins: list[str] | None = None,
    allowed_hosts: list[str] | None = None,
    max_body: int = 1 << 20,
    body_timeout: float = 30.0,
) -> Any:
    """The ASGI app serving ``assistants`` over ``store`` (a ``TrajectorySaver``, a SQLite
    path or a ``postgresql://`` URL; default: the library's default store). ``api_key``
    defaults to ``$AWORLD_GRAPH_API_KEY``; CORS is off unless ``cors_origins`` are given,
    and then those origins may also change state. Requests must name a ``Host`` of
    :data:`LOOPBACK_HOSTS` or ``allowed_hosts`` (``["*"]``: any). A request body is at most
    ``max_body`` bytes and must arrive within ``body_timeout`` seconds. Serve it with
    ``http=http_protocol()`` to bound how long a connection may take over its headers."""
    from ..checkpoint import TrajectorySaver, open_store

    saver = store if isinstance(store, TrajectorySaver) else open_store(store)
    registry = assistants if isinstance(assistants, Assistants) else Assistants(assistants)
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
    server = ServerApp(
        registry,
        saver,
        api_key=key,
        cors_origins=cors_origins,
        allowed_hosts=allowed_hosts,
        max_body=max_body,
        body_timeout=body_timeout,
    )
    app = server.app
    app.state.server = server
    return app
