"""The thread stream protocol over a WebSocket (``client.threads.stream(...,
transport="websocket")``), as LangGraph's server serves it at ``/threads/{thread_id}/stream/events``.

One connection carries commands and events. Each text (or binary) frame the client sends is a
command ``{"id", "method", "params"}``, answered with ``{"type": "success", "id", "result",
"meta": {"applied_through_seq"}}`` or ``{"type": "error", "id", "error", "message"}`` (the
message names the field and the fix; a frame that is not a command gets ``"id": null``):

- ``run.start`` and ``input.respond``: as over HTTP (:class:`~._thread_commands.ThreadCommands`).
- ``subscription.subscribe``: ``channels``, ``namespaces``, ``depth`` and ``since`` as a
  ``stream/events`` body; its result is ``{"subscription_id", "replayed_events"}``: the events
  of the current run that it matches (after ``since``) are sent first. Events reach the client only once a subscription wants them,
  each event once however many want it.
- ``subscription.reconnect``: a subscribe that must say ``since`` (and may name its
  ``subscription_id``).
- ``subscription.unsubscribe``: ``subscription_id``; its subscription sends nothing more.
- ``agent.getTree``: the current run's tree of namespaces, ``{"tree": {"namespace", "status",
  "graph_name", "children"?}}``: the root's status is its last lifecycle event; a subgraph's is
  ``started`` until its parent's ``updates`` names its node, or the run ends (``no_such_run``
  before the connection has seen a run).

The events are those of ``POST …/stream/events`` (one producer,
:meth:`~._thread_commands.ThreadCommands.thread_events`): the runs going when the client comes
(the last one when none is) and each later one, numbered alike. The thread need not exist yet:
its events start with its first run. The handshake is refused (a 403, nothing said) without the
API key, as every route is (:class:`~._http.ServerApp`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from ._input import check_depth
from ._thread_commands import COMMANDS, Filter, ThreadCommands, parse_command
from ._wire import ApiError, dumps

__all__ = ["ThreadSocket"]

log = logging.getLogger("aworld_graph.server")

_SUBSCRIBE = frozenset({"channels", "namespaces", "depth", "since"})
_RECONNECT = _SUBSCRIBE | {"subscription_id"}

_CODES = frozenset(
    {"invalid_argument", "unknown_command", "no_such_run", "no_such_subscription"}
    | {"no_such_interrupt", "permission_denied", "not_supported"}
)
"""The protocol's error codes an :class:`ApiError`'s own code may pass as."""


def _error(ident: int | None, exc: ApiError) -> dict[str, Any]:
    """``exc`` as the protocol's error frame."""
    if exc.code in _CODES:
        code = exc.code
    elif exc.status in (400, 404, 413, 422):
        code = "invalid_argument"
    else:
        code = "unknown_error"
    return {"type": "error", "id": ident, "error": code, "message": exc.message}


def _segment_name(segment: str) -> str:
    """A namespace segment's graph or node name (``node:TASK`` → ``node``)."""
    return segment.partition(":")[0]


class _Tree:
    """The namespaces one run's events have shown, for ``agent.getTree``."""

    def __init__(self, graph: str) -> None:
        self.graph = graph
        self.status = "started"
        self.nodes: dict[tuple[str, ...], str] = {}
        """Each subgraph namespace seen, with its status."""

    def see(self, event: dict[str, Any]) -> None:
        params = event["params"]
        namespace, data = tuple(params["namespace"]), params["data"]
        for length in range(1, len(namespace) + 1):
            self.nodes.setdefault(namespace[:length], "started")
        if event["method"] == "lifecycle" and not namespace:
            self.status = str(data.get("event"))
            if self.status in ("completed", "failed", "interrupted"):
                for where, status in self.nodes.items():
                    if status == "started":
                        self.nodes[where] = "completed"
        elif event["method"] == "updates" and isinstance(data, dict):
            node = data.get("node")
            for where, status in self.nodes.items():
                if (
                    status == "started"
                    and where[:-1] == namespace
                    and _segment_name(where[-1]) == node
                ):
                    self.nodes[where] = "completed"
                    break

    def tree(self, namespace: tuple[str, ...] = ()) -> dict[str, Any]:
        status = self.status if not namespace else self.nodes[namespace]
        name = self.graph if not namespace else _segment_name(namespace[-1])
        node: dict[str, Any] = {"namespace": list(namespace), "status": status}
        node["graph_name"] = name
        children = sorted(
            n for n in self.nodes if len(n) == len(namespace) + 1 and n[:-1] == namespace
        )
        if children:
            node["children"] = [self.tree(child) for child in children]
        return node


class _Connection:
    """One WebSocket of one thread: its subscriptions and the current run's events."""

    def __init__(self, socket: WebSocket, commands: ThreadCommands, thread_id: str) -> None:
        self.socket = socket
        self.commands = commands
        self.thread_id = thread_id
        self.subscriptions: dict[str, Filter] = {}
        self.run_id: str | None = None
        self.events: list[dict[str, Any]] = []
        """The current run's events so far, for a subscription's replay."""
        self.tree: _Tree | None = None
        self.seq = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self.socket.send_text(dumps(message).decode())

    async def pump(self) -> None:
        """Send the thread's events to the subscriptions that want them, until the server
        closes; then close the socket."""
        told = self.commands.runs_told(self.thread_id)
        try:
            async for run, event in self.commands.thread_events(self.thread_id, told):
                if run.run_id != self.run_id:
                    self.run_id, self.events = run.run_id, []
                    self.tree = _Tree(run.assistant.graph_id)
                assert self.tree is not None
                self.events.append(event)
                self.tree.see(event)
                self.seq = event["seq"]
                if any(self._wants(f, event) for f in self.subscriptions.values()):
                    await self.send(event)
        except Exception:  # the traceback to the log; the client sees the socket close
            log.exception("the WebSocket of thread %s failed", self.thread_id)
            code, reason = 1011, "the thread's events failed; reconnect"
        else:
            code, reason = 1001, "the server is shutting down"
        with contextlib.suppress(Exception):  # the client may have gone first
            await self.socket.close(code, reason)

    @staticmethod
    def _wants(wanted: Filter, event: dict[str, Any]) -> bool:
        method, params = event["method"], event["params"]
        return wanted.wants(method, params["namespace"]) and event["seq"] > wanted.since

    async def answer(self, frame: str | bytes) -> dict[str, Any]:
        """The answer to one frame."""
        try:
            body = orjson.loads(frame)
        except orjson.JSONDecodeError as exc:
            return _error(None, ApiError(400, "invalid_json", f"frame: not JSON ({exc})"))
        ident = body.get("id") if isinstance(body, dict) else None
        ident = ident if isinstance(ident, int) and not isinstance(ident, bool) else None
        try:
            if isinstance(body, dict):
                check_depth(body)
            ident, method, params = parse_command(body)
            result = await self._run(method, params)
        except ApiError as exc:
            return _error(ident, exc)
        meta = {"applied_through_seq": self.seq}
        return {"type": "success", "id": ident, "result": result, "meta": meta}

    async def _run(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method in COMMANDS:
            return await self.commands.run(self.thread_id, method, params)
        if method == "subscription.subscribe":
            return await self._subscribe(Filter(params, "params", _SUBSCRIBE), None)
        if method == "subscription.reconnect":
            wanted = Filter(params, "params", _RECONNECT)
            if "since" not in params:
                raise ApiError(422, "invalid_argument", "params.since: required (the last seq)")
            name = params.get("subscription_id")
            if name is not None and not (isinstance(name, str) and name):
                raise ApiError(
                    422, "invalid_argument", "params.subscription_id: must be a non-empty string"
                )
            return await self._subscribe(wanted, name)
        if method == "subscription.unsubscribe":
            name = params.get("subscription_id")
            if not isinstance(name, str):
                raise ApiError(
                    422,
                    "invalid_argument",
                    "params.subscription_id: required: the id subscription.subscribe gave",
                )
            if self.subscriptions.pop(name, None) is None:
                raise ApiError(
                    404,
                    "no_such_subscription",
                    f"params.subscription_id: no subscription {ascii(name)[:80]} on this socket",
                )
            return {}
        if method == "agent.getTree":
            if self.tree is None:
                raise ApiError(
                    404,
                    "no_such_run",
                    f"thread {self.thread_id} has had no run since this socket opened; start "
                    "one with run.start",
                )
            return {"tree": self.tree.tree()}
        raise ApiError(
            422,
            "unknown_command",
            f"method: {ascii(method)[:60]} is not a command; send one of run.start, "
            "input.respond, subscription.subscribe, subscription.unsubscribe, "
            "subscription.reconnect, agent.getTree",
        )

    async def _subscribe(self, wanted: Filter, name: str | None) -> dict[str, Any]:
        """Send the current run's events ``wanted`` matches, then add it. No event is left
        out between: the pump sends each event it adds at once, and nothing waits between the
        last replayed event and the subscription being added."""
        replayed = sent = 0
        events = self.events
        while sent < len(events) or events is not self.events:
            if events is not self.events:  # a new run began meanwhile: its events from the start
                events, sent = self.events, 0
                continue
            batch, sent = events[sent:], len(events)
            for event in batch:
                if self._wants(wanted, event):
                    await self.send(event)
                    replayed += 1
        name = name or str(uuid.uuid4())
        self.subscriptions[name] = wanted
        return {"subscription_id": name, "replayed_events": replayed}


class ThreadSocket:
    """The WebSocket route's handler; a frame is at most ``max_frame`` bytes."""

    def __init__(self, commands: ThreadCommands, max_frame: int) -> None:
        self.commands = commands
        self.max_frame = max_frame

    async def serve(self, socket: WebSocket) -> None:
        """Accept ``socket`` (its API key checked before) and serve it until either side
        closes."""
        await socket.accept()
        connection = _Connection(socket, self.commands, socket.path_params["thread_id"])
        pump = asyncio.create_task(connection.pump())
        try:
            while True:
                message = await socket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text, data = message.get("text"), message.get("bytes")
                frame = text.encode() if text is not None else data or b""
                if len(frame) > self.max_frame:
                    too_large = f"frame: over {self.max_frame} bytes; send a smaller command"
                    answer = _error(None, ApiError(413, "too_large", too_large))
                else:
                    answer = await connection.answer(frame)
                await connection.send(answer)
        except WebSocketDisconnect:
            return
        finally:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
