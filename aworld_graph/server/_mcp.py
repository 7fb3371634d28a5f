"""MCP served by the server: each assistant is a tool, over streamable HTTP at ``/mcp`` (behind
the API key) or over stdio (``aworld-graph serve --mcp-stdio WORKFLOW``). The served workflows
are tools from the server's start; the assistants created over the API (``POST /assistants``)
are tools from the moment they are made until they are deleted: each list and call reads them
from the store.

A tool call is a run of the assistant on the server's store, started and awaited through the
same :class:`~._runs.RunManager` as ``POST /threads/{id}/runs/wait``: the thread it ran on is
an ordinary thread of the LangGraph API. A call answers with structured content naming the
thread; a run that stops at a human step answers ``status: "needs_input"`` with its prompt,
and a second call with that ``thread_id`` and ``resume`` (the person's answer) resumes it from
the checkpoint. A call with only ``thread_id`` continues a run that stopped mid-way (a server
killed under it); a caller that names its own new ``thread_id`` with ``input`` can so continue
a call that was cut off before it answered. Bad arguments are a JSON-RPC ``invalid params`` error naming the argument.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ._assistants import INPUT_SCHEMA, Assistant
from ._input import ID_RULE, check_id
from ._wire import ApiError, clean

if TYPE_CHECKING:
    from ._app import App, Rows
    from ._run_routes import RunRoutes

__all__ = ["McpTools", "serve_stdio"]

log = logging.getLogger("aworld_graph.server")

SERVER_NAME = "aworld-graph"
"""The name the server reports in its MCP handshake."""

_ARGUMENTS = ("input", "thread_id", "resume")
_NONE: Any = object()
"""No ``resume`` given (``None`` is an answer a caller may send)."""

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thread_id": {"type": "string", "description": "The thread the run is stored on."},
        "run_id": {"type": "string"},
        "status": {
            "type": "string",
            "enum": ["success", "needs_input", "interrupted", "error"],
            "description": "needs_input: call again with this thread_id and resume (the "
            "answer); interrupted: call again with this thread_id to continue it.",
        },
        "answer": {"type": ["string", "null"]},
        "prompt": {"type": ["string", "null"], "description": "What the human step asks."},
        "error": {"type": ["string", "null"]},
    },
    "required": ["thread_id", "status"],
}
"""What every call's structured content holds."""


def tool_name(assistant_id: str) -> str:
    """An MCP tool name (letters, digits, ``_ - .``) for an assistant id (``math@v2``:
    ``math_v2``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", assistant_id)[:128]


def tool_names(assistant_ids: Iterable[str]) -> dict[str, str]:
    """Each assistant id's tool name, unique: :func:`tool_name` where no other id gives the same
    name; where several do (``math@v2`` and ``math_v2``), the id that is the name itself keeps
    it and each other one gets ``_`` and 8 hex digits of its id's SHA-256. A name so depends on
    the ids that share it, never on their order."""
    names, clashes = _named(assistant_ids, {})
    if clashes:
        raise ValueError(clashes[0])
    return names


def _named(
    assistant_ids: Iterable[str], given: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """:func:`tool_names` of ``assistant_ids`` beside the tools ``given`` already (name: id),
    whose names they yield (an id whose name is given gets the suffix); and a line for each id
    left out because its suffixed name is taken too."""
    ids = sorted(set(assistant_ids) - set(given.values()))
    plain = {i: tool_name(i) for i in ids}
    shared = Counter([*plain.values(), *given])
    names = {
        i: name if shared[name] == 1 or (name == i and name not in given) else _suffixed(name, i)
        for i, name in plain.items()
    }
    taken, clashes = dict(given), []
    for i, name in names.items():  # a suffixed name that is also an assistant's own name
        if name in taken:
            clashes.append(
                f"assistants {taken[name]!r} and {i!r} are both MCP tool {name!r}; "
                "rename one of them"
            )
        taken.setdefault(name, i)
    return {i: n for i, n in names.items() if taken[n] == i and i not in given.values()}, clashes


def _suffixed(name: str, assistant_id: str) -> str:
    digest = hashlib.sha256(assistant_id.encode()).hexdigest()[:8]
    return f"{name[:119]}_{digest}"


def _input_schema(assistant: Assistant) -> dict[str, Any]:
    """The tool's arguments: the workflow's input (its ``input`` text), and ``thread_id`` and
    ``resume`` to answer a human step or continue a stopped run."""
    workflow = INPUT_SCHEMA  # a workflow's own
    task = dict(workflow["properties"]["input"])
    task["description"] = (
        f"The task for {assistant.assistant_id}, as a user would ask it: the input of its run "
        "(a new run, on a new thread unless thread_id names one)."
    )
    return {
        "type": "object",
        "properties": {
            "input": task,
            "thread_id": {
                "type": "string",
                "description": "A thread an earlier call answered with: with resume, answers "
                "its human step; alone, continues a run that stopped mid-way; with input, its "
                "next turn. With input and an id not used yet, the new run's thread (so a "
                "call cut off before it answers can be continued by that id).",
            },
            "resume": {
                "description": "The answer to the human step the thread waits on (needs thread_id)."
            },
        },
        "additionalProperties": False,
    }


def _invalid(message: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, message)


def _checked(name: str, arguments: Mapping[str, Any]) -> tuple[str | None, str | None, bool, Any]:
    """``(input, thread_id, has_resume, resume)`` of a call, or an invalid-params error naming the
    argument and the fix."""
    unknown = sorted(set(arguments) - set(_ARGUMENTS))
    if unknown:
        raise _invalid(
            f"{name}: unknown argument {unknown[0]!r}; the arguments are input (a new task), "
            "thread_id and resume (answer a human step)"
        )
    text, thread_id = arguments.get("input"), arguments.get("thread_id")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise _invalid(f"{name}: argument 'input' must be a non-empty string (the task)")
    if thread_id is not None:
        if not isinstance(thread_id, str):
            raise _invalid(f"{name}: argument 'thread_id' must be a string ({ID_RULE})")
        try:
            check_id("thread_id", thread_id)
        except ApiError as exc:
            raise _invalid(f"{name}: argument {exc.message}") from None
    has_resume = "resume" in arguments
    if has_resume and thread_id is None:
        raise _invalid(
            f"{name}: argument 'resume' needs 'thread_id': the thread whose human step it answers"
        )
    if has_resume and text is not None:
        raise _invalid(f"{name}: send either 'input' (a new task) or 'resume', not both")
    if text is None and thread_id is None:
        raise _invalid(f"{name}: argument 'input' is required: the task for the workflow")
    return text, thread_id, has_resume, arguments.get("resume")


def _prompt(interrupts: list[dict[str, Any]]) -> str:
    value = interrupts[0].get("value") if interrupts else None
    if isinstance(value, Mapping) and value.get("prompt") is not None:
        return str(value["prompt"])
    return "the workflow waits for input" if value is None else str(value)


class McpTools:
    """The server's assistants as MCP tools, run through its run machinery."""

    def __init__(self, app: App, routes: RunRoutes) -> None:
        self.app = app
        self.routes = routes
        served = list(app.assistants)  # the system assistants, fixed for the server's life
        names = tool_names(a.assistant_id for a in served)
        self.tools = {names[a.assistant_id]: a for a in served}
        """The served workflows by tool name (a clash of names fails here, at server start);
        :meth:`catalog` adds the created assistants."""
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=version("aworld-graph"),
            instructions="Each tool runs a workflow of this aworld-graph server and names "
            "the thread it ran on; a run waiting for a person answers needs_input: call the "
            "same tool again with that thread_id and resume.",
            on_list_tools=self._list,
            on_call_tool=self._call,
        )
        self.manager = StreamableHTTPSessionManager(self.server, stateless=True, json_response=True)

    def rows(self) -> Rows:
        # POST only: a stateless server has no session to end (DELETE) and nothing to push
        # on a standing stream (GET), which the transport spec lets it refuse with a 405
        return [("/mcp", self.endpoint, ["POST"])]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve ``/mcp`` while this is entered (the app's lifespan)."""
        async with self.manager.run():
            yield

    async def endpoint(self, request: Request) -> Response:
        """``/mcp``: the streamable HTTP transport, reached once the request passed the
        app's guard (API key, ids), with a body within the server's limits (the SDK's
        transport reads whatever comes)."""
        return _Transport(self.manager, await self.app.raw_body(request))

    async def catalog(self) -> dict[str, Assistant]:
        """The tools now, by name: the served workflows', then the assistants created over the
        API (read from the store), named by the same rule; a created assistant whose name a
        served workflow has gets the suffix, so a served workflow's tool never changes name."""
        tools = dict(self.tools)
        made = [a for a in await self.app.assistants.every() if not a.system]
        given = {name: a.assistant_id for name, a in tools.items()}
        names, clashes = _named((a.assistant_id for a in made), given)
        for line in clashes:
            log.warning("MCP: %s (left out of the tools)", line)
        return tools | {names[a.assistant_id]: a for a in made if a.assistant_id in names}

    async def _list(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [
            types.Tool(
                name=name,
                title=a.name or a.assistant_id,
                description=a.description or _about(a),
                input_schema=_input_schema(a),
                output_schema=OUTPUT_SCHEMA,
                _meta={"aworld-graph/assistant_id": a.assistant_id},
            )
            for name, a in (await self.catalog()).items()
        ]
        return types.ListToolsResult(tools=tools)

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tools = await self.catalog()
        assistant = tools.get(params.name)
        if assistant is None:
            raise _invalid(
                f"no tool {params.name!r}; this server has {sorted(tools)} (tools/list lists them)"
            )
        text, thread_id, has_resume, resume = _checked(params.name, params.arguments or {})
        try:
            return await self.run(assistant, text, thread_id, resume if has_resume else _NONE)
        except ApiError as exc:  # the thread cannot take this call: say why and what to do
            raise _invalid(f"{params.name}: {exc.message}") from None

    async def run(
        self, assistant: Assistant, text: str | None, thread_id: str | None, resume: Any = _NONE
    ) -> types.CallToolResult:
        """Run ``assistant`` (a new thread for ``text``; else answer the human step of
        ``thread_id`` with ``resume``, give it its next ``text``, or – neither – continue it,
        or wait for the run going on it), wait for it, and say how it ended."""
        has_resume = resume is not _NONE
        resume = resume if has_resume else None
        thread = thread_id or str(uuid.uuid4())
        exists = thread_id is not None and await self.app.threads.exists(thread)
        if thread_id is not None and not exists and (text is None or has_resume):
            raise self.app.threads.not_found(thread)
        new = not exists  # a new thread: the caller's id, if it named one
        if not new:
            owner = await self.app.threads.assistant_of(thread)
            if owner is not None and owner.graph_id != assistant.graph_id:
                raise ApiError(
                    409,
                    "wrong_assistant",
                    f"thread {thread} holds runs of {owner.assistant_id}; call that tool",
                )
        running = [] if new else self.app.runs.busy(thread)
        if running and text is None and not has_resume:
            run = running[-1]  # a run going on the thread (a call cut off): wait for it
        else:
            if not new and not running:
                await self.routes.check(thread, text, has_resume)
            run = await self.app.runs.start(
                thread_id=thread,
                assistant=assistant,
                text=text,
                resume=resume,
                multitask_strategy="reject",
                metadata={"via": "mcp"},
                kwargs={"input": text, "command": {"resume": resume} if has_resume else None},
                new_thread=new,
            )
        await run.done.wait()
        state = await self.app.threads.state(thread)
        values = run.values or state["values"] or {}
        result: dict[str, Any] = {"thread_id": thread, "run_id": run.run_id}
        if run.error is not None:
            error = clean(run.error)
            result |= {"status": "error", "error": f"{error['error']}: {error['message']}"}
        elif state["interrupts"]:
            result |= {"status": "needs_input", "prompt": _prompt(state["interrupts"])}
        elif run.status == "interrupted" or state["next"]:
            result |= {"status": "interrupted"}
        else:
            result |= {"status": "success", "answer": values.get("answer")}
        result = clean(result)  # secret-free, as every answer of the server
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_said(result))],
            structured_content=result,
            is_error=result["status"] == "error",
        )


def _about(assistant: Assistant) -> str:
    if assistant.system:
        return f"Run the workflow {assistant.assistant_id}."
    return f"Run the workflow {assistant.graph_id} as the assistant {assistant.assistant_id}."


def _said(result: Mapping[str, Any]) -> str:
    thread = result["thread_id"]
    status = result["status"]
    if status == "success":
        return f"{result.get('answer') or ''}\n(thread {thread})".lstrip()
    if status == "needs_input":
        return (
            f"needs input: {result['prompt']} - call again with thread_id={thread!r} and "
            "resume=<your answer>"
        )
    if status == "interrupted":
        return f"the run on thread {thread} stopped mid-way; call again with thread_id={thread!r}"
    return f"the run on thread {thread} failed: {result.get('error')}"


class _Transport(Response):
    """A response that hands the request, its ``body`` read already, to the MCP session
    manager."""

    def __init__(self, manager: StreamableHTTPSessionManager, body: bytes) -> None:
        self.manager = manager
        self.body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent = False

        async def replayed() -> Message:
            nonlocal sent
            if sent:  # then what the connection says (a disconnect)
                return await receive()
            sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}

        await self.manager.handle_request(scope, replayed, send)


async def serve_stdio(app: Any) -> None:
    """Serve the MCP tools of ``app`` (from :func:`~aworld_graph.server.create_app`) over
    stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = app.state.server
    async with app.router.lifespan_context(app), stdio_server() as (read, write):
        tools: McpTools = server.mcp
        await tools.server.run(read, write, tools.server.create_initialization_options())
