"""The langgraph-sdk's thread stream protocol (``client.threads.stream``): commands and a
filtered event stream over one thread, as LangGraph's server serves them.

- ``POST /threads/{thread_id}/commands``: one command ``{"id", "method", "params"}``,
  answered ``{"type": "success", "id", "result", "meta"}``. ``run.start`` starts a run of
  ``params.assistant_id`` on the thread (made if it is not there yet) with ``input``,
  ``config``, ``metadata`` and ``multitaskStrategy`` (default ``enqueue``); its result is
  ``{"run_id"}``. ``input.respond`` answers the interrupts the thread waits on
  (``interrupt_id`` and ``response``, or ``responses``, a list of them) with a run of the
  thread's assistant that resumes it (``update`` and ``goto`` go with the resume).
- ``POST /threads/{thread_id}/stream/events``: server-sent events of the thread's runs, those
  going when the client comes (the last one when none is going) and each later one, until
  the client goes. The body picks ``channels`` (``values``, ``updates``, ``messages``,
  ``checkpoints``, ``tasks``, ``custom``, ``lifecycle``, ``input``, ``tools``),
  ``namespaces`` (the subgraph prefixes wanted), ``depth`` (how far below
  them) and ``since`` (the last ``seq`` the client has). Each event is ``{"type": "event",
  "event_id", "seq", "method", "params": {"namespace", "timestamp", "data"}}``: a run starts
  with ``lifecycle`` ``running`` and ends with ``completed``, ``failed`` (with its ``error``)
  or ``interrupted``, after an ``input.requested`` ``{"interrupt_id", "payload"}`` per
  interrupt it stops at. A model's message streams its text and its tool calls as content
  blocks; each tool call is a ``tool-started``, then a ``tool-finished`` (its result, also a
  ``tool`` message on ``messages``) or a ``tool-error`` on ``tools``. ``event_id`` names the
  run and its place in the run's stream, so the SDK drops what a second connection repeats.

The runs are the server's own (:class:`~._run_routes.RunRoutes` starts them, with every
check a run of ``POST /threads/{id}/runs`` has); a malformed command or body is a 422 naming
the field. The WebSocket at ``…/stream/events`` (:mod:`._thread_socket`) serves the same
commands (:meth:`ThreadCommands.run`) and events (:meth:`ThreadCommands.thread_events`), and
its own subscription commands, which HTTP refuses.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..run import LangGraphApp
from ._app import App, Rows
from ._assistants import Assistant
from ._input import check_id
from ._run_routes import RunRoutes
from ._runs import Run
from ._wire import ApiError, sse

__all__ = ["COMMANDS", "Filter", "ThreadCommands", "parse_command"]

CHANNELS = (
    *("values", "updates", "checkpoints", "tasks", "custom", "lifecycle", "input"),
    *("messages", "tools"),
)
"""The channels a client may ask for (and ``custom:NAME``)."""

_FEED_MODES = ["values", "updates", "messages-tuple", "custom", "checkpoints", "tasks"]
"""The stream modes a protocol run's feed holds: those the channels carry (and ``tools``
where :func:`_streams_tools`)."""


def _streams_tools(assistant: Assistant) -> bool:
    """Whether a run of ``assistant`` sends its tool calls on the ``tools`` channel: a
    workflow's always; a LangGraph application's when its graph was compiled with a stream
    transformer that asks for LangGraph's ``tools`` stream mode (``transformers=
    [ToolCallTransformer]``), as LangGraph's server streams them only then (an application
    made by a factory is not known before it runs: it sends none)."""
    source = assistant.source
    if not isinstance(source, LangGraphApp):
        return True
    graph = None if source.factory else source.graph
    transformers = getattr(graph, "stream_transformers", None) or ()
    return any("tools" in getattr(t, "required_stream_modes", ()) for t in transformers)


_START_PARAMS = frozenset({"assistant_id", "input", "config", "metadata", "multitaskStrategy"})
_RESPOND_PARAMS = frozenset(
    {"interrupt_id", "namespace", "response", "responses", "update", "goto", "config"}
) | {"metadata"}
_STREAM_FIELDS = frozenset({"channels", "namespaces", "depth", "since"})


def _bad(field: str, fix: str) -> ApiError:
    return ApiError(422, "invalid_command", f"{field}: {fix}")


def _unknown(given: dict[str, Any], known: frozenset[str], where: str) -> None:
    extra = sorted(set(given) - known)
    if extra:
        raise _bad(
            f"{where}.{extra[0]}", f"not a field here; use any of {', '.join(sorted(known))}"
        )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _namespace(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise _bad(field, "must be a list of strings (a subgraph's namespace; [] is the root)")
    return list(value)


class Filter:
    """What one event stream, or one subscription of a WebSocket, asks for."""

    def __init__(
        self, body: dict[str, Any], where: str = "body", known: frozenset[str] = _STREAM_FIELDS
    ) -> None:
        """``body`` checked: a stream request's body (its fields named as they are) or a
        command's ``params`` (``where="params"``: named ``params.FIELD``), with the fields
        ``known``."""
        _unknown(body, known, where)
        at = "" if where == "body" else f"{where}."
        channels = body.get("channels")
        if not isinstance(channels, list) or not channels:
            raise _bad(f"{at}channels", f"must be a non-empty list of {', '.join(CHANNELS)}")
        for channel in channels:
            if not isinstance(channel, str) or not (
                channel in CHANNELS or channel.startswith("custom:")
            ):
                raise _bad(
                    f"{at}channels", f"{ascii(channel)[:60]} is not one of {', '.join(CHANNELS)}"
                )
        self.channels = {c.partition(":")[0] for c in channels}
        namespaces = body.get("namespaces")
        if namespaces is not None and not isinstance(namespaces, list):
            raise _bad(f"{at}namespaces", "must be a list of namespaces (lists of strings)")
        self.namespaces = (
            None
            if namespaces is None
            else [_namespace(ns, f"{at}namespaces[{i}]") for i, ns in enumerate(namespaces)]
        )
        depth, since = body.get("depth"), body.get("since")
        if depth is not None and not (_whole(depth) and depth >= 0):
            raise _bad(f"{at}depth", "must be a whole number >= 0 (how far below the namespaces)")
        if since is not None and not (_whole(since) and since >= 0):
            raise _bad(f"{at}since", "must be a whole number >= 0 (the last seq the client has)")
        self.depth: int | None = depth
        self.since: int = since or 0

    def wants(self, method: str, namespace: list[str]) -> bool:
        if method.partition(".")[0] not in self.channels:
            return False
        prefixes = self.namespaces if self.namespaces is not None else [[]]
        return any(
            namespace[: len(p)] == p
            and (self.depth is None or len(namespace) - len(p) <= self.depth)
            for p in prefixes
        )


def _asked(interrupts: Any) -> Iterator[dict[str, Any]]:
    """``input.requested`` data of LangGraph's interrupt items (``{"id", "value"}``)."""
    for item in interrupts if isinstance(interrupts, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            yield {"interrupt_id": item["id"], "payload": item.get("value")}


def _protocol(mode: str, data: Any) -> Iterator[tuple[str, Any]]:
    """The ``(method, data)`` protocol events of one feed part of ``mode`` (its namespace
    taken off)."""
    if mode == "values" and isinstance(data, dict):
        for asked in _asked(data.get("__interrupt__")):
            yield "input.requested", asked
        values = {k: v for k, v in data.items() if k != "__interrupt__"}
        if values:
            yield "values", values
    elif mode == "updates" and isinstance(data, dict):
        for node, values in data.items():
            if node == "__interrupt__":
                yield from (("input.requested", asked) for asked in _asked(values))
            else:
                yield "updates", {"node": node, "values": values}
    elif mode == "custom":
        yield "custom", {"payload": data}
    elif mode in ("checkpoints", "tasks"):
        yield mode, data


_ROLES = {"ai": "ai", "human": "human", "tool": "tool", "system": "system"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))


def _blocks(chunk: dict[str, Any], streamed: bool) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The content blocks of one message part, each with its key (the same block's key in
    every chunk of a message): its text, then its tool calls (a chunk's ``tool_call_chunks``
    by their ``index``; a whole message's ``tool_calls`` and ``invalid_tool_calls``)."""
    text = _text(chunk.get("content"))
    if text:
        yield "text", {"type": "text", "text": text}
    if streamed:
        for i, piece in enumerate(_records(chunk.get("tool_call_chunks"))):
            index = piece.get("index")
            block = {"type": "tool_call_chunk", "id": piece.get("id"), "name": piece.get("name")}
            block |= {"args": str(piece.get("args") or "")}
            yield (
                ("call", i if index is None else index),
                block | ({} if index is None else {"index": index}),
            )
        return
    for i, call in enumerate(_records(chunk.get("tool_calls"))):
        block = {"type": "tool_call", "id": call.get("id") or "", "name": call.get("name") or ""}
        yield ("call", i), block | {"args": call.get("args") or {}}
    for i, bad in enumerate(_records(chunk.get("invalid_tool_calls"))):
        block = {"type": "invalid_tool_call"} | {
            k: bad[k] for k in ("id", "name", "args", "error") if bad.get(k) is not None
        }
        yield ("invalid", i), block


def _records(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _skeleton(block: dict[str, Any]) -> dict[str, Any]:
    """A block as its ``content-block-start`` carries it: no text or arguments yet."""
    if block["type"] == "text":
        return {"type": "text", "text": ""}
    if block["type"] == "tool_call_chunk":
        return block | {"args": ""}
    if block["type"] == "tool_call":
        return block | {"args": {}}
    return {k: v for k, v in block.items() if k != "args"}


def _delta(block: dict[str, Any]) -> dict[str, Any] | None:
    """A chunk's new part of a block (``None``: it adds nothing to stream)."""
    if block["type"] == "text":
        return {"type": "text-delta", "text": block["text"]}
    if block["type"] == "tool_call_chunk" and block["args"]:
        return {"type": "tool-call-delta", "args": block["args"]}
    return None


def _finished(block: dict[str, Any]) -> dict[str, Any]:
    """A block whole, as ``content-block-finish`` carries it: a tool call chunk's arguments
    parsed from their JSON text (an ``invalid_tool_call`` when they are not JSON)."""
    if block["type"] != "tool_call_chunk":
        return block
    ident, name, raw = block.get("id"), block.get("name"), block["args"] or "{}"
    try:
        args = json.loads(raw)
    except ValueError:
        error = "Failed to parse tool call arguments as JSON"
        return {"type": "invalid_tool_call", "id": ident, "name": name, "args": raw} | {
            "error": error
        }
    return {"type": "tool_call", "id": ident or "", "name": name or "", "args": args}


def _grown(block: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """``block`` with a later chunk's part of it added."""
    if block["type"] == "text":
        return block | {"text": block["text"] + more["text"]}
    if block["type"] == "tool_call_chunk":
        named = {k: more[k] for k in ("id", "name") if more.get(k) is not None}
        return block | named | {"args": block["args"] + more["args"]}
    return more


class _Message:
    """A message being streamed: its namespace and its blocks by key, each with its index."""

    def __init__(self, namespace: list[str]) -> None:
        self.namespace = namespace
        self.blocks: dict[Any, tuple[int, dict[str, Any]]] = {}


class _Messages:
    """The ``messages`` channel of one run, as LangGraph's server streams a chat model's
    messages: each message as ``message-start``, its content blocks (``content-block-start``,
    a ``content-block-delta`` per chunk that adds to it, ``content-block-finish`` with the
    block whole) and ``message-finish``. A block is the message's text (``text-delta``) or a
    tool call (``tool-call-delta`` with its arguments' JSON text as the model writes it; whole,
    a ``tool_call`` with the arguments parsed). A message ends with its last chunk
    (``chunk_position: "last"``), at once when it comes whole (not a chunk: each block then
    starts and finishes in turn), or at the next step of its namespace or the run's end. A tool
    message is not sent here: its result is on the ``tools`` channel (:func:`_tool_message`)."""

    def __init__(self) -> None:
        self.open: dict[str, _Message] = {}
        """The messages not ended, by id."""

    def part(self, namespace: list[str], data: Any) -> Iterator[tuple[list[str], Any]]:
        """The ``(namespace, data)`` events of one ``messages-tuple`` part."""
        chunk = data[0] if isinstance(data, list) and data else None
        if not isinstance(chunk, dict) or not isinstance(chunk.get("id"), str):
            return
        ident, kind = chunk["id"], str(chunk.get("type", "ai"))
        role = _ROLES.get(kind.removesuffix("MessageChunk").lower(), "ai")
        streamed = kind.endswith("Chunk")
        if role == "tool":
            return
        if ident in self.open and not streamed:  # the whole of a message its chunks streamed
            yield from self._end(ident)
            return
        if ident not in self.open:
            yield namespace, {"event": "message-start", "role": role, "id": ident}
            self.open[ident] = _Message(namespace)
        message = self.open[ident]
        for key, block in _blocks(chunk, streamed):
            if key in message.blocks:
                index, before = message.blocks[key]
                message.blocks[key] = (index, _grown(before, block))
            else:
                index = len(message.blocks)
                message.blocks[key] = (index, block)
                start = {"event": "content-block-start", "index": index}
                yield namespace, start | {"content": _skeleton(block)}
            delta = _delta(block)
            if delta is not None:
                yield namespace, {"event": "content-block-delta", "index": index, "delta": delta}
            if not streamed:
                yield namespace, self._finish(index, block)
        if not streamed:
            message.blocks.clear()
            yield from self._end(ident)
        elif chunk.get("chunk_position") == "last":
            yield from self._end(ident)

    def close(self, namespace: list[str] | None = None) -> Iterator[tuple[list[str], Any]]:
        """End the messages of ``namespace`` (``None``: every one) not ended yet."""
        for ident, message in list(self.open.items()):
            if namespace is None or message.namespace == namespace:
                yield from self._end(ident)

    @staticmethod
    def _finish(index: int, block: dict[str, Any]) -> dict[str, Any]:
        return {"event": "content-block-finish", "index": index, "content": _finished(block)}

    def _end(self, ident: str) -> Iterator[tuple[list[str], Any]]:
        message = self.open.pop(ident)
        for index, block in message.blocks.values():
            yield message.namespace, self._finish(index, block)
        yield message.namespace, {"event": "message-finish"}


def _tool_message(namespace: list[str], data: dict[str, Any]) -> Iterator[tuple[list[str], Any]]:
    """A finished tool call's result as a ``tool`` message on the ``messages`` channel, in
    the namespace ``[*namespace, "tools:CALL_ID"]``, as LangGraph's server mirrors it (its
    text whole in one delta, carried as ``content``)."""
    output = data.get("output")
    if data.get("event") != "tool-finished" or not isinstance(output, dict):
        return
    call = data.get("tool_call_id")
    call = call if isinstance(call, str) else output.get("tool_call_id")
    call = call if isinstance(call, str) else None
    ident = output.get("id") if isinstance(output.get("id"), str) and output["id"] else None
    ident = ident or (f"tool-{call}" if call else None)
    if ident is None:
        return
    content = output.get("content")
    text = content if isinstance(content, str) else "" if content is None else None
    text = json.dumps(content, separators=(",", ":"), default=str) if text is None else text
    where = [*namespace, f"tools:{call}"] if call else namespace
    start = {"event": "message-start", "role": "tool", "id": ident}
    yield where, start | ({"tool_call_id": call} if call else {})
    block = {"type": "text", "text": text}
    yield (
        where,
        {"event": "content-block-start", "index": 0, "content": {"type": "text", "text": ""}},
    )
    yield where, {"event": "content-block-delta", "index": 0, "content": block}
    yield where, {"event": "content-block-finish", "index": 0, "content": block}
    yield where, {"event": "message-finish", "metadata": {}}


COMMANDS = ("run.start", "input.respond")
"""The commands both transports serve (a WebSocket also serves its subscriptions')."""


def parse_command(body: Any) -> tuple[int, str, dict[str, Any]]:
    """A command's ``(id, method, params)``, checked (a 422 naming the field)."""
    if not isinstance(body, dict):
        raise _bad("body", "a command is a JSON object {id, method, params}")
    _unknown(body, frozenset({"id", "method", "params"}), "body")
    ident, method, params = body.get("id"), body.get("method"), body.get("params", {})
    if not isinstance(ident, int) or isinstance(ident, bool):
        raise _bad("id", "must be a whole number (the command's id, echoed in its answer)")
    if not isinstance(method, str) or not method:
        raise _bad("method", "required: the command's name, such as run.start")
    if not isinstance(params, dict):
        raise _bad("params", "must be an object")
    return ident, method, params


class ThreadCommands:
    """Handlers for ``/threads/{thread_id}/commands`` and ``…/stream/events``, and what the
    WebSocket of :mod:`._thread_socket` shares with them: the commands (:meth:`run`) and the
    thread's events (:meth:`thread_events`)."""

    def __init__(self, app: App, run_routes: RunRoutes) -> None:
        self.app = app
        self.run_routes = run_routes

    def rows(self) -> Rows:
        thread = "/threads/{thread_id:str}"
        return [
            (f"{thread}/commands", self.command, ["POST"]),
            (f"{thread}/stream/events", self.events, ["POST"]),
        ]

    # -- commands --------------------------------------------------------------------------

    async def command(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        ident, method, params = parse_command(await self.app.body(request))
        if method not in COMMANDS:
            raise _bad(
                "method",
                f"{ascii(method)[:60]} is not served over HTTP; send run.start or input.respond "
                "(subscription.subscribe, subscription.unsubscribe, subscription.reconnect and "
                "agent.getTree are served on the thread's WebSocket, GET "
                f"/threads/{thread_id}/stream/events: transport='websocket')",
            )
        result = await self.run(thread_id, method, params)
        answer = {"type": "success", "id": ident, "result": result}
        return self.app.json(answer | {"meta": {"applied_through_seq": 0}})

    async def run(self, thread_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of the command ``method`` (one of :data:`COMMANDS`) on the thread."""
        if method == "run.start":
            return await self._run_start(thread_id, params)
        return await self._respond(thread_id, params)

    async def _start(self, thread_id: str, body: dict[str, Any]) -> Run:
        assistant = self.app.assistants.get(str(body["assistant_id"]))
        modes = [*_FEED_MODES, "tools"] if _streams_tools(assistant) else list(_FEED_MODES)
        body |= {"stream_mode": modes, "stream_subgraphs": True}
        body |= {"if_not_exists": "create"}
        run, _ = await self.run_routes.start_run(body, thread_id, tools="tools" in modes)
        return run

    async def _run_start(self, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
        _unknown(params, _START_PARAMS, "params")
        assistant_id = params.get("assistant_id")
        if not isinstance(assistant_id, str) or not assistant_id:
            raise _bad("params.assistant_id", "required: the assistant (or graph id) to run")
        body: dict[str, Any] = {
            k: params[k] for k in ("input", "config", "metadata") if k in params
        }
        strategy = params.get("multitaskStrategy")
        if strategy is not None:
            body["multitask_strategy"] = strategy
        run = await self._start(thread_id, body | {"assistant_id": assistant_id})
        return {"run_id": run.run_id}

    async def _respond(self, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
        _unknown(params, _RESPOND_PARAMS, "params")
        entries = params.get("responses")
        if entries is None:
            entries = [{k: v for k, v in params.items() if k in _RESPOND_PARAMS - {"responses"}}]
        elif not isinstance(entries, list) or not entries:
            raise _bad("params.responses", "must be a non-empty list of {interrupt_id, response}")
        answers: dict[str, Any] = {}
        for i, entry in enumerate(entries):
            where = "params" if "responses" not in params else f"params.responses[{i}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("interrupt_id"), str):
                raise _bad(f"{where}.interrupt_id", "required: the id of the interrupt answered")
            _namespace(entry.get("namespace", []), f"{where}.namespace")
            answers[entry["interrupt_id"]] = entry.get("response")
        if not await self.app.threads.exists(thread_id):
            raise self.app.threads.not_found(thread_id)
        state = await self.app.threads.state(thread_id)
        waiting = {i.get("id") for i in state["interrupts"] if isinstance(i, dict)}
        for interrupt_id in answers:
            if interrupt_id not in waiting:
                raise ApiError(
                    409,
                    "no_such_interrupt",
                    f"params.interrupt_id: thread {thread_id} does not wait on {interrupt_id!r}"
                    "; its pending interrupts are in GET /threads/THREAD/state",
                )
        assistant = await self.app.threads.assistant_of(thread_id)
        if assistant is None:
            raise ApiError(409, "no_such_run", f"thread {thread_id} has no run to resume")
        # one answer resumes the one interrupt as LangGraph's Command(resume=value); several
        # answer theirs by id
        resume = next(iter(answers.values())) if len(answers) == 1 else answers
        command = {"resume": resume} | {
            k: params[k] for k in ("update", "goto") if params.get(k) is not None
        }
        body: dict[str, Any] = {"assistant_id": assistant.assistant_id, "command": command}
        body |= {k: params[k] for k in ("config", "metadata") if k in params}
        await self._start(thread_id, body)
        return {}

    # -- events ----------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        wanted = Filter(await self.app.body(request))
        # a thread not made yet is awaited, as LangGraph's server does: its first run starts
        # its events
        check_id("thread_id", thread_id)
        told = self.runs_told(thread_id)

        async def stream() -> AsyncIterator[bytes]:
            async for _, event in self.thread_events(thread_id, told):
                seq = event["seq"]
                method, namespace = event["method"], event["params"]["namespace"]
                if wanted.wants(method, namespace) and seq > wanted.since:
                    yield sse(method, event, str(seq))

        headers = {"Cache-Control": "no-store"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    def runs_told(self, thread_id: str) -> set[str]:
        """The runs of the thread a stream opened now leaves out: those before the runs
        going (before the last one when none is going)."""
        held = self.app.runs.of(thread_id)
        going = [r for r in held if not r.done.is_set()]
        first = going[0] if going else (held[-1] if held else None)
        return {r.run_id for r in held[: held.index(first)]} if first else set()

    async def thread_events(
        self, thread_id: str, told: set[str]
    ) -> AsyncIterator[tuple[Run, dict[str, Any]]]:
        """Every protocol event of the thread's runs not in ``told`` (each run once it
        starts, in order), with the run it comes from, until the server closes. Every event
        is numbered (``seq``) from the first run the server holds for the thread, those in
        ``told`` counted though not sent, before any connection's filter applies: a client
        that widens its filter, or opens another connection after a run began, reconnects
        with ``since=`` the same numbers mean."""
        runs = self.app.runs
        seq = 0
        for run in runs.of(thread_id):
            if run.run_id in told:  # ended (the runs before the first one sent)
                seq += sum([1 async for _ in self._run_events(run)])
        while True:
            launched = runs.launched
            fresh = [r for r in runs.of(thread_id) if r.run_id not in told]
            if not fresh:
                if runs.closing:
                    return
                await launched.wait()
                continue
            for run in fresh:
                told.add(run.run_id)
                async for event in self._run_events(run):
                    seq += 1
                    yield run, {**event, "seq": seq}

    @staticmethod
    async def _run_events(run: Run) -> AsyncIterator[dict[str, Any]]:
        """Every protocol event of ``run``, from its start to its end."""
        graph = run.assistant.graph_id

        def event(ident: str, method: str, namespace: list[str], data: Any) -> dict[str, Any]:
            params = {"namespace": namespace, "timestamp": int(time.time() * 1000), "data": data}
            return {"type": "event", "event_id": f"{run.run_id}:{ident}", "method": method} | {
                "params": params
            }

        def lifecycle(status: str, error: str | None = None) -> dict[str, Any]:
            data = {"event": status, "graph_name": graph} | ({"error": error} if error else {})
            return event(status, "lifecycle", [], data)

        yield lifecycle("running")
        asked: set[str] = set()
        ended = False
        messages = _Messages()
        async for ready in run.feed.follow():
            for index, part, data in ready:
                mode, _, rest = part.partition("|")
                namespace = rest.split("|") if rest else []
                told: list[tuple[str, list[str], Any]] = []
                if mode == "messages-tuple":
                    told += [("messages", ns, d) for ns, d in messages.part(namespace, data)]
                elif mode == "tools" and isinstance(data, dict):
                    told.append(("tools", namespace, data))
                    told += [("messages", ns, d) for ns, d in _tool_message(namespace, data)]
                elif mode in ("values", "updates", "error"):  # a step ended
                    closed = messages.close(None if mode == "error" else namespace)
                    told += [("messages", ns, d) for ns, d in closed]
                for method, found in _protocol(mode, data):
                    if method == "input.requested":
                        if found["interrupt_id"] in asked:
                            continue
                        asked.add(found["interrupt_id"])
                    told.append((method, namespace, found))
                for k, (method, where, found) in enumerate(told):
                    yield event(f"{index}.{k}", method, where, found)
                if mode == "error" and not ended:
                    ended = True
                    message = data.get("message") if isinstance(data, dict) else None
                    yield lifecycle("failed", str(message or data))
        for k, (where, found) in enumerate(messages.close()):
            yield event(f"end.{k}", "messages", where, found)
        if ended:
            return
        if run.status == "success" and (asked or run.interrupts):
            yield lifecycle("interrupted")
        elif run.status == "success":
            yield lifecycle("completed")
        else:
            message = (run.error or {}).get("message")
            yield lifecycle("failed" if run.status == "error" else "interrupted", message)
