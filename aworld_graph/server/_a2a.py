"""A2A: each served workflow is an A2A agent, on the same runs and threads as the LangGraph API.

Built on ``a2a-sdk``: its JSON-RPC and HTTP+JSON (REST) dispatchers parse requests, answer
the spec's errors and write the streams, for protocol 1.0 and its 0.3 compatibility; this
module is the SDK's :class:`~a2a.server.request_handlers.RequestHandler` for one assistant,
over the server's :class:`~._runs.RunManager` and :class:`~._threads.Threads`.

An A2A task is a run and its context is a thread: ``taskId`` is the id of the run that
started the task, ``contextId`` its thread id. A message that answers the task's human step
(``input-required``) or continues it after its server stopped is a new run on the thread
whose metadata names the task (:data:`TASK_KEY`); the task's state is its last run's, read
from the store's ``runs`` table and the thread's checkpoints, and its webhooks are in the
store too (:mod:`._a2a_push`), so nothing about a task lives only in this process.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from a2a.helpers.proto_helpers import get_data_parts
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.response_helpers import (
    agent_card_to_dict,
    build_error_response,
)
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length, validate_page_size
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message

from ._a2a_push import PushConfigs, checked_url, push
from ._assistants import Assistant
from ._input import MAX_DEPTH, check_depth, check_id
from ._runs import CANCELLED, Run
from ._wire import ApiError, now

if TYPE_CHECKING:
    from ._app import App, Handler, Rows

__all__ = ["CARD_PATH", "MESSAGE_KEY", "TASK_KEY", "A2ARoutes", "is_card"]

log = logging.getLogger("aworld_graph.server")

CARD_PATH = "/.well-known/agent-card.json"
"""Where an agent card is served: at the root (the default assistant, or ``?assistant_id=``)
and under each assistant's prefix, ``/a2a/{assistant_id}``."""

TASK_KEY = "a2a_task"
"""The run metadata key naming the A2A task a run continues (absent on the run that started
it: its own id is the task's)."""

MESSAGE_KEY = "a2a_message"
"""The run metadata key holding the ``messageId`` of the message that started the run: a
message sent again with the same id in the same context (a client that lost the answer) is
answered with the task that took it, and starts nothing."""

State = pb.TaskState
_TERMINAL = frozenset(
    {State.TASK_STATE_COMPLETED, State.TASK_STATE_FAILED, State.TASK_STATE_CANCELED}
    | {State.TASK_STATE_REJECTED}
)
_PAGE = 50


def is_card(path: str) -> bool:
    """Whether ``path`` is an agent card, which answers without the API key."""
    if path == CARD_PATH:
        return True
    name = path.removeprefix("/a2a/").removesuffix(CARD_PATH)
    return path == f"/a2a/{name}{CARD_PATH}" and bool(name) and "/" not in name


def _text_of(message: pb.Message) -> str:
    """The task input of an A2A message: its text parts, and its data parts as JSON."""
    out = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            out.append(part.text)
        elif kind == "data":
            out += [json.dumps(v, ensure_ascii=False) for v in get_data_parts([part])]
    if not out:
        raise InvalidParamsError(
            message="message.parts has no text or data part; send the task as "
            '{"text": "..."} (files and URLs are not read by these workflows)'
        )
    return "\n".join(out)


def _agent_message(text: str, task_id: str, context_id: str, ident: str) -> pb.Message:
    return pb.Message(
        message_id=ident,
        role=pb.Role.ROLE_AGENT,
        parts=[pb.Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def _prompt(interrupt: Any) -> str:
    value = interrupt.get("value") if isinstance(interrupt, dict) else interrupt
    if isinstance(value, dict) and value.get("prompt"):
        return str(value["prompt"])
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _a2a_error(exc: ApiError) -> A2AError:
    """The A2A error of a server refusal: a state conflict is an unsupported operation now,
    anything else bad parameters; the message says what to do."""
    if exc.code == "thread_busy":  # said in A2A's words, not the LangGraph API's
        return UnsupportedOperationError(
            message="this context's task is still working on an earlier message; wait for it "
            "(GetTask, SubscribeToTask), cancel it (CancelTask), or send the message without "
            "a contextId to start a task of its own"
        )
    if exc.status == 409:
        return UnsupportedOperationError(message=exc.message)
    return InvalidParamsError(message=exc.message)


def _answers(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A handler method whose server refusals become A2A errors and whose unexpected failures
    are logged and answered as an internal error without their text."""

    def failed(exc: Exception) -> A2AError:
        if isinstance(exc, A2AError):
            return exc
        if isinstance(exc, ApiError):
            return _a2a_error(exc)
        log.exception("A2A %s failed", fn.__name__)
        return InternalError(message="the server failed on this request; see its log")

    if inspect.isasyncgenfunction(fn):

        @functools.wraps(fn)
        async def stream(*args: Any, **kwargs: Any) -> Any:
            try:
                async for item in fn(*args, **kwargs):
                    yield item
            except Exception as exc:
                raise failed(exc) from None

        return stream

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            raise failed(exc) from None

    return call


class _Chain:
    """A task as stored: the run that started it, its last run, and where its thread is."""

    def __init__(self, root: dict[str, Any], last: dict[str, Any], latest: bool) -> None:
        self.root = root
        self.last = last
        self.latest = latest
        """Whether its last run is its thread's last run (a later task supersedes it)."""

    @property
    def task_id(self) -> str:
        return str(self.root["run_id"])

    @property
    def thread_id(self) -> str:
        return str(self.root["thread_id"])


def _chains(rows: list[dict[str, Any]]) -> list[_Chain]:
    """The tasks among one thread's runs (oldest first), in the order they were started."""
    roots: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        parent = (row["metadata"] or {}).get(TASK_KEY)
        if parent is None or parent == row["run_id"]:
            roots[row["run_id"]] = [row]
        elif parent in roots:
            roots[parent].append(row)
    last = rows[-1]["run_id"] if rows else None
    return [_Chain(runs[0], runs[-1], runs[-1]["run_id"] == last) for runs in roots.values()]


class A2ATasks:
    """A2A tasks over the server's runs and threads: read, start, continue, cancel."""

    def __init__(self, app: App, check: Callable[[str, str | None, bool], Awaitable[None]]):
        self.app = app
        self.runs = app.runs
        self.threads = app.threads
        self.check = check
        self.push = PushConfigs(app.runs.table.database)
        """The tasks' webhooks, in the store."""
        self._watching: set[asyncio.Task[None]] = set()

    # -- reading ---------------------------------------------------------------------------

    async def chain(self, task_id: str, assistant: Assistant) -> _Chain | None:
        """The task ``task_id`` of ``assistant``, or ``None``."""
        if not task_id:
            return None
        root = await self.runs.stored(task_id)
        if root is None or not self._mine(root, assistant):
            return None
        rows = await asyncio.to_thread(self.runs.table.of_thread, str(root["thread_id"]))
        return next((c for c in _chains(rows) if c.task_id == task_id), None)

    def _mine(self, row: dict[str, Any], assistant: Assistant) -> bool:
        try:
            return self.app.assistants.get(str(row["assistant_id"])).graph_id == assistant.graph_id
        except ApiError:
            return False

    async def _thread_state(self, thread_id: str) -> dict[str, Any]:
        try:
            return await self.threads.state(thread_id)
        except ApiError:  # not stored yet (a new thread's first run has not started)
            return {"values": {}, "interrupts": [], "next": []}

    async def _left(self, chain: _Chain) -> dict[str, Any]:
        """The thread's state at the last checkpoint of the task's last run (its checkpoints'
        metadata names the run), so its answer and history are its own, not a later task's."""
        query = {"metadata": {"run_id": str(chain.last["run_id"])}, "limit": 1}
        try:
            found = await self.threads.history(chain.thread_id, query)
        except ApiError:
            found = []
        return found[0] if found else {"values": {}, "interrupts": [], "next": []}

    def _status(self, chain: _Chain) -> tuple[str, dict[str, Any] | None, str]:
        """The last run's status and error (as held, else as stored), and its id."""
        run_id = str(chain.last["run_id"])
        held = self.runs.get(run_id)
        if held is not None and not held.done.is_set():  # an ended run: its row is newer
            return held.status, held.error, run_id
        return str(chain.last["status"]), chain.last["error"], run_id

    async def task(self, chain: _Chain, state: dict[str, Any] | None = None) -> pb.Task:
        """The A2A ``Task`` of ``chain`` as the store has it now."""
        status, error, run_id = self._status(chain)
        thread_id, task_id = chain.thread_id, chain.task_id
        if not chain.latest:  # a later task ran on its thread: the thread as this one left it
            state = await self._left(chain)
        elif state is None:
            state = await self._thread_state(thread_id)
        values = state.get("values") or {}
        answer = values.get("answer")
        said: str | None = None
        if status == "pending":
            kind = State.TASK_STATE_SUBMITTED
        elif status == "running":
            kind = State.TASK_STATE_WORKING
        elif status == "error":
            kind = State.TASK_STATE_FAILED
            said = f"the workflow failed: {(error or {}).get('message') or 'see the server log'}"
        elif status != "success" and ((error or {}).get("error") == CANCELLED or not chain.latest):
            kind, said = State.TASK_STATE_CANCELED, "the task was cancelled"
        elif chain.latest and state.get("interrupts"):
            # a human step waits (its run ended success, as LangGraph's server says; or the
            # server died as it was being answered): the next message on the task answers it
            kind, said = State.TASK_STATE_INPUT_REQUIRED, _prompt(state["interrupts"][0])
        elif status == "success":
            kind, said = State.TASK_STATE_COMPLETED, str(answer) if answer else None
        else:  # its run stopped mid-run (its server died): a message on the task continues it
            kind = State.TASK_STATE_INPUT_REQUIRED
            said = (
                "the server stopped during this task (its run reads interrupted); send a "
                "message on this task to continue it from its last checkpoint"
            )
        task = pb.Task(id=task_id, context_id=thread_id)
        task.status.state = kind
        if said:
            task.status.message.CopyFrom(_agent_message(said, task_id, thread_id, f"{run_id}:s"))
        stamp = chain.last.get("updated_at") or chain.last.get("created_at")
        held = self.runs.get(run_id)
        stamp = held.updated_at if held is not None else stamp
        if stamp:
            task.status.timestamp.FromJsonString(_rfc3339(str(stamp)))
        if answer and kind == State.TASK_STATE_COMPLETED:
            task.artifacts.append(
                pb.Artifact(
                    artifact_id=f"{task_id}:answer",
                    name="answer",
                    parts=[pb.Part(text=str(answer))],
                )
            )
        for i, message in enumerate(values.get("messages") or []):
            role = {"user": pb.Role.ROLE_USER, "assistant": pb.Role.ROLE_AGENT}.get(
                str(message.get("role"))
            )
            content = message.get("content")
            if role is None or not content:
                continue
            task.history.append(
                pb.Message(
                    message_id=f"{thread_id}:{i}",
                    role=role,
                    parts=[pb.Part(text=str(content))],
                    context_id=thread_id,
                    task_id=task_id,
                )
            )
        task.metadata.update(
            {
                "assistant_id": str(chain.root["assistant_id"]),
                "run_id": run_id,
                "run_status": status,
            }
        )
        return task

    def _threads(self) -> list[str]:
        """The threads the ``runs`` table has runs of."""
        with self.runs.table.database.read() as tx:
            return [str(r[0]) for r in tx.all("SELECT DISTINCT thread_id FROM runs")]

    async def listed(self, assistant: Assistant, context_id: str) -> list[pb.Task]:
        """The tasks of ``assistant`` (in thread ``context_id`` if given), last updated first."""
        if context_id:
            threads = [context_id]
        else:
            threads = await asyncio.to_thread(self._threads)
        tasks: list[pb.Task] = []
        for thread_id in threads:
            rows = await asyncio.to_thread(self.runs.table.of_thread, thread_id)
            chains = [c for c in _chains(rows) if self._mine(c.root, assistant)]
            if not chains:
                continue
            state = await self._thread_state(thread_id)
            tasks += [await self.task(c, state) for c in chains]
        tasks.sort(key=lambda t: (t.status.timestamp.ToJsonString(), t.id), reverse=True)
        return tasks

    # -- sending ---------------------------------------------------------------------------

    async def taken(self, message: pb.Message, assistant: Assistant) -> _Chain | None:
        """The task that already took a message with this ``messageId`` in the message's
        context (or its task's), or ``None``."""
        thread_id = message.context_id
        if message.task_id:
            chain = await self.chain(message.task_id, assistant)
            thread_id = chain.thread_id if chain is not None else thread_id
        if not thread_id or not message.message_id:
            return None
        rows = await asyncio.to_thread(self.runs.table.of_thread, thread_id)
        for row in rows:
            metadata = row["metadata"] or {}
            if metadata.get(MESSAGE_KEY) == message.message_id:
                return await self.chain(str(metadata.get(TASK_KEY) or row["run_id"]), assistant)
        return None

    async def send(self, message: pb.Message, assistant: Assistant) -> tuple[Run, _Chain | None]:
        """Start the run a message asks for; the task it continues (``None``: a new one)."""
        text, ident = _text_of(message), message.message_id
        if message.task_id:
            chain = await self.chain(message.task_id, assistant)
            if chain is None:
                raise TaskNotFoundError(
                    message=f"no task {message.task_id!r} of {assistant.assistant_id}"
                )
            if message.context_id and message.context_id != chain.thread_id:
                raise InvalidParamsError(
                    message=f"task {chain.task_id} belongs to context {chain.thread_id}, not "
                    f"{message.context_id}; send its contextId or none"
                )
            return await self._follow(chain, text, assistant, ident), chain
        if not message.context_id:
            run = await self._start(str(uuid.uuid4()), assistant, text, ident, new_thread=True)
            return run, None
        thread_id = message.context_id
        try:
            check_id("message.contextId", thread_id)
        except ApiError as exc:
            raise InvalidParamsError(message=exc.message) from None
        if not await self.threads.exists(thread_id):
            await self.threads.create({"thread_id": thread_id})
            return await self._start(thread_id, assistant, text, ident), None
        owner = await self.threads.assistant_of(thread_id)
        if owner is not None and owner.graph_id != assistant.graph_id:
            raise InvalidParamsError(
                message=f"context {thread_id} holds tasks of {owner.assistant_id}, not "
                f"{assistant.assistant_id}; start a new context for another agent"
            )
        rows = await asyncio.to_thread(self.runs.table.of_thread, thread_id)
        chains = _chains(rows)
        waiting = None
        if chains and chains[-1].latest and not self.runs.busy(thread_id):
            task = await self.task(chains[-1])
            if task.status.state == State.TASK_STATE_INPUT_REQUIRED:
                waiting = chains[-1]
        # a message without taskId starts a new task in its context (A2A 1.0, 3.4.3: an
        # answer names its task); its run goes on top of the thread, dropping the human step
        # of a task that waits there, which so ends cancelled
        run = await self._start(thread_id, assistant, text, ident)
        if waiting is not None:
            await self.cancel(waiting)
            await self.notify(waiting.task_id, assistant)
        return run, None

    async def _follow(self, chain: _Chain, text: str, assistant: Assistant, ident: str) -> Run:
        """The run that answers or continues ``chain`` with ``text``."""
        state = await self._thread_state(chain.thread_id)
        kind = (await self.task(chain, state)).status.state
        if kind in _TERMINAL:
            raise UnsupportedOperationError(
                message=f"task {chain.task_id} has ended ({State.Name(kind)}); send a new "
                "message without taskId (with this contextId to go on with the conversation)"
            )
        if kind != State.TASK_STATE_INPUT_REQUIRED:
            raise UnsupportedOperationError(
                message=f"task {chain.task_id} is still working; wait for it (GetTask or "
                "SubscribeToTask) or cancel it (CancelTask)"
            )
        if state.get("interrupts"):  # a human step: the message is its answer
            return await self._start(
                chain.thread_id, assistant, None, ident, resume=text, task_id=chain.task_id
            )
        # stopped mid-run: continue from the last checkpoint (the message has nothing to add)
        return await self._start(chain.thread_id, assistant, None, ident, task_id=chain.task_id)

    async def _start(
        self,
        thread_id: str,
        assistant: Assistant,
        text: str | None,
        ident: str,
        *,
        resume: str | None = None,
        task_id: str | None = None,
        new_thread: bool = False,
    ) -> Run:
        has_resume = resume is not None
        if not new_thread and not self.runs.busy(thread_id):
            await self.check(thread_id, text, has_resume)
        return await self.runs.start(
            thread_id=thread_id,
            assistant=assistant,
            text=text,
            resume=resume,
            multitask_strategy="reject",
            metadata={**({TASK_KEY: task_id} if task_id else {}), MESSAGE_KEY: ident},
            kwargs={
                "input": None if text is None else {"input": text},
                "command": {"resume": resume} if has_resume else None,
                "stream_mode": None,
                "config": None,
            },
            new_thread=new_thread,
        )

    def watch(self, task_id: str, run: Run, assistant: Assistant) -> None:
        """Send the task to its webhooks now (it is working on ``run``) and when ``run`` ends
        or stops for input, in that order."""

        async def watched() -> None:
            await self.notify(task_id, assistant)
            await run.done.wait()
            await self.notify(task_id, assistant)

        watcher = asyncio.get_running_loop().create_task(watched())
        self._watching.add(watcher)  # held until it ends: the loop keeps weak references
        watcher.add_done_callback(self._watching.discard)

    async def notify(self, task_id: str, assistant: Assistant) -> None:
        """Send the task as it is now to its webhooks (best effort: a failure is logged)."""
        try:
            chain = await self.chain(task_id, assistant)
            if chain is not None:
                await push(self.push, await self.task(chain))
        except Exception:
            log.exception("A2A task %s: its push notification failed", task_id)

    async def cancel(self, chain: _Chain) -> None:
        """Stop the task's run, or end a task that waits for a message."""
        status, _, run_id = self._status(chain)
        held = self.runs.get(run_id)
        if held is not None and not held.done.is_set():
            await self.runs.cancel(held, wait=True)
            return
        error = {"error": CANCELLED, "message": f"task {chain.task_id} was cancelled"}
        await self.runs.table.set_status(run_id, "interrupted", now(), error)


def _rfc3339(stamp: str) -> str:
    """An ISO-8601 UTC time as protobuf's ``Timestamp`` reads it (``Z``, not ``+00:00``)."""
    return stamp.replace("+00:00", "Z") if stamp.endswith("+00:00") else stamp


class A2AAgent(RequestHandler):
    """The SDK's request handler for one assistant."""

    def __init__(self, tasks: A2ATasks, assistant: Assistant) -> None:
        self.tasks = tasks
        self.assistant = assistant

    async def _chain(self, task_id: str) -> _Chain:
        chain = await self.tasks.chain(task_id, self.assistant)
        if chain is None:
            raise TaskNotFoundError(message=f"no task {task_id!r} of {self.assistant.assistant_id}")
        return chain

    @_answers
    async def on_get_task(self, params: pb.GetTaskRequest, context: Any) -> pb.Task | None:
        validate_history_length(params)
        task = await self.tasks.task(await self._chain(params.id))
        return apply_history_length(task, params)

    @_answers
    async def on_list_tasks(
        self, params: pb.ListTasksRequest, context: Any
    ) -> pb.ListTasksResponse:
        validate_history_length(params)
        size = params.page_size if params.HasField("page_size") else _PAGE
        validate_page_size(size)
        start = 0
        if params.page_token:
            if not (params.page_token.isascii() and params.page_token.isdigit()):
                raise InvalidParamsError(
                    message="pageToken must be a nextPageToken this server gave"
                )
            start = int(params.page_token)
        tasks = await self.tasks.listed(self.assistant, params.context_id)
        if params.status:
            tasks = [t for t in tasks if t.status.state == params.status]
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToJsonString()
            tasks = [t for t in tasks if t.status.timestamp.ToJsonString() > after]
        page = tasks[start : start + size]
        if not params.include_artifacts:
            for task in page:
                task.ClearField("artifacts")
        page = [apply_history_length(t, params) for t in page]
        more = start + size < len(tasks)
        return pb.ListTasksResponse(
            tasks=page,
            next_page_token=str(start + size) if more else "",
            page_size=size,
            total_size=len(tasks),
        )

    @_answers
    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: Any) -> pb.Task | None:
        chain = await self._chain(params.id)
        task = await self.tasks.task(chain)
        if task.status.state in _TERMINAL:
            raise TaskNotCancelableError(
                message=f"task {chain.task_id} has ended ({State.Name(task.status.state)})"
            )
        waiting = task.status.state == State.TASK_STATE_INPUT_REQUIRED  # no run to watch
        await self.tasks.cancel(chain)
        if waiting:
            await self.tasks.notify(chain.task_id, self.assistant)
        return await self.tasks.task(await self._chain(params.id))  # as stored now

    async def _send(self, params: pb.SendMessageRequest) -> tuple[Run | None, _Chain]:
        """Start the run a message asks for, with its webhook, if it names one; the run and
        its task. A message sent again (its ``messageId`` taken in its context) starts
        nothing: its task's last run, if it still goes, and its task."""
        config = params.configuration if params.HasField("configuration") else None
        validate_history_length(config)
        taken = await self.tasks.taken(params.message, self.assistant)
        if taken is not None:
            return self.tasks.runs.get(str(taken.last["run_id"])), taken
        hook = None
        if config is not None and config.HasField("task_push_notification_config"):
            hook = config.task_push_notification_config
            checked_url(hook.url)
        run, chain = await self.tasks.send(params.message, self.assistant)
        task_id = chain.task_id if chain else run.run_id
        if hook is not None:
            await self.tasks.push.set_info(task_id, hook, None)
        self.tasks.watch(task_id, run, self.assistant)
        return run, await self._chain(task_id)

    @_answers
    async def on_message_send(self, params: pb.SendMessageRequest, context: Any) -> pb.Task:
        run, chain = await self._send(params)
        config = params.configuration if params.HasField("configuration") else None
        if run is not None and not (config and config.return_immediately):
            await run.done.wait()
        task = await self.tasks.task(await self._chain(chain.task_id))
        return apply_history_length(task, config)

    @_answers
    async def on_message_send_stream(
        self, params: pb.SendMessageRequest, context: Any
    ) -> AsyncGenerator[Any]:
        run, chain = await self._send(params)
        yield await self.tasks.task(chain)
        if run is not None:
            async for event in self._follow(chain, run, 0):
                yield event

    @_answers
    async def on_subscribe_to_task(
        self, params: pb.SubscribeToTaskRequest, context: Any
    ) -> AsyncGenerator[Any]:
        chain = await self._chain(params.id)
        task = await self.tasks.task(chain)
        if task.status.state in _TERMINAL:
            raise UnsupportedOperationError(
                message=f"task {chain.task_id} has ended ({State.Name(task.status.state)}); "
                "read it with GetTask"
            )
        yield task
        run = self.tasks.runs.get(str(chain.last["run_id"]))
        if run is not None and not run.done.is_set():
            async for event in self._follow(chain, run, len(run.feed.items)):
                yield event

    async def _follow(self, chain: _Chain, run: Run, start: int) -> AsyncGenerator[Any]:
        """The task's updates while ``run`` goes: a ``working`` status with each model reply,
        then its answer as an artifact and its last status."""
        task_id, thread_id = chain.task_id, chain.thread_id
        async for ready in run.feed.follow(start):
            for i, mode, data in ready:
                if mode != "custom" or data.get("event") != "llm_call" or not data.get("content"):
                    continue
                status = pb.TaskStatus(state=State.TASK_STATE_WORKING)
                said = f"{data.get('agent')}: {data['content']}"
                status.message.CopyFrom(
                    _agent_message(said, task_id, thread_id, f"{run.run_id}:{i}")
                )
                yield pb.TaskStatusUpdateEvent(task_id=task_id, context_id=thread_id, status=status)
        await run.done.wait()
        final = await self.tasks.task(await self._chain(task_id))  # as stored now
        for artifact in final.artifacts:
            yield pb.TaskArtifactUpdateEvent(
                task_id=task_id, context_id=thread_id, artifact=artifact, last_chunk=True
            )
        yield pb.TaskStatusUpdateEvent(task_id=task_id, context_id=thread_id, status=final.status)

    @_answers
    async def on_create_task_push_notification_config(
        self, params: pb.TaskPushNotificationConfig, context: Any
    ) -> pb.TaskPushNotificationConfig:
        await self._chain(params.task_id)
        return await self.tasks.push.set_info(params.task_id, params, context)

    @_answers
    async def on_get_task_push_notification_config(
        self, params: pb.GetTaskPushNotificationConfigRequest, context: Any
    ) -> pb.TaskPushNotificationConfig:
        await self._chain(params.task_id)
        for config in await self.tasks.push.get_info(params.task_id, context):
            if config.id == (params.id or params.task_id):
                return config
        raise TaskNotFoundError(
            message=f"task {params.task_id} has no push notification config {params.id!r}; "
            "ListTaskPushNotificationConfigs lists them"
        )

    @_answers
    async def on_list_task_push_notification_configs(
        self, params: pb.ListTaskPushNotificationConfigsRequest, context: Any
    ) -> pb.ListTaskPushNotificationConfigsResponse:
        await self._chain(params.task_id)
        configs = await self.tasks.push.get_info(params.task_id, context)
        return pb.ListTaskPushNotificationConfigsResponse(configs=configs)

    @_answers
    async def on_delete_task_push_notification_config(
        self, params: pb.DeleteTaskPushNotificationConfigRequest, context: Any
    ) -> None:
        await self._chain(params.task_id)
        await self.tasks.push.delete_info(params.task_id, context, params.id or None)

    async def on_get_extended_agent_card(self, params: Any, context: Any) -> pb.AgentCard:
        # the card does not declare capabilities.extendedAgentCard, so the spec (A2A 1.0,
        # 3.3.4) asks for UnsupportedOperationError here, not ExtendedAgentCardNotConfigured
        raise UnsupportedOperationError(
            message="this agent offers no extended card (its card does not declare "
            f"capabilities.extendedAgentCard); its card is at "
            f"/a2a/{self.assistant.assistant_id}{CARD_PATH}"
        )


def agent_card(assistant: Assistant, base_url: str, api_key: bool) -> pb.AgentCard:
    """The card of ``assistant`` served at ``base_url``; it declares the API key scheme when
    the server needs one (never the key)."""
    url = f"{base_url.rstrip('/')}/a2a/{assistant.assistant_id}"
    kind = str(assistant.info.get("kind") or "workflow")
    about = assistant.description or f"the aworld-graph {kind} {assistant.assistant_id}"
    card = pb.AgentCard(
        name=assistant.assistant_id,
        description=about,
        version=str(assistant.version),
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding=binding, protocol_version=version)
            for version in ("1.0", "0.3")
            for binding in ("JSONRPC", "HTTP+JSON")
        ],
        capabilities=pb.AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            pb.AgentSkill(
                id=assistant.assistant_id,
                name=assistant.assistant_id,
                description=about,
                tags=[kind, assistant.graph_id],
            )
        ],
    )
    if api_key:
        scheme = pb.SecurityScheme(
            api_key_security_scheme=pb.APIKeySecurityScheme(
                location="header", name="x-api-key", description="the server's API key"
            )
        )
        card.security_schemes["apiKey"].CopyFrom(scheme)
        card.security_requirements.add().schemes["apiKey"].CopyFrom(pb.StringList())
    return card


_V1_METHODS = frozenset(JsonRpcDispatcher.METHOD_TO_MODEL)
"""The JSON-RPC method names of protocol 1.0 (``SendMessage``); 0.3's are ``message/send``."""


def _method(body: bytes) -> tuple[str | None, Any, Any]:
    """A JSON-RPC body's method, id and params (``None``s when it is not one: the SDK's
    dispatcher answers that with its error)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    method = data.get("method")
    return (method if isinstance(method, str) else None), data.get("id"), data.get("params")


def _unknown_status(value: Any) -> bool:
    """Whether a ListTasks ``status`` filter names no task state (the SDK's parser would
    read it as no filter and list every task)."""
    if value is None or value == "":
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        return value not in State.values()
    return not isinstance(value, str) or value not in State.keys()


def _adapted(endpoint: Handler, path_version: str | None, app: App) -> Handler:
    """``endpoint`` with the server's body limits and two readings the SDK's dispatchers lack.

    A body is read by ``app`` within its size and time limits, as on every other route (the
    SDK's dispatchers read whatever comes).

    A request without the ``A2A-Version`` header is read as the version its
    ``?A2A-Version=`` parameter names (the spec allows either), else as the version its
    method or path belongs to: the 1.0 and 0.3 method names and REST paths do not overlap,
    so a 1.0 method sent without the header (as some clients and the conformance kit do) is
    not refused as 0.3. ``path_version``: the version of a REST path (``None``: JSON-RPC,
    whose version is its method's).

    A ListTasks ``status`` that names no task state is an invalid-params error, never a
    listing that silently ignores the filter."""

    async def adapted(request: Request) -> Response:
        try:
            body = await _bounded(request, app)
        except A2AError as exc:
            if path_version is None:
                return JSONResponse(build_error_response(None, exc))
            return JSONResponse(build_rest_error_payload(exc), 413)
        if _too_deep(body):  # the SDK's parser would fail on it with a RecursionError
            deep = InvalidRequestError(
                message=f"the request body nests deeper than {MAX_DEPTH} levels; flatten it"
            )
            if path_version is None:
                return JSONResponse(build_error_response(None, deep))
            return JSONResponse(build_rest_error_payload(deep), 400)
        version = request.headers.get(VERSION_HEADER) or request.query_params.get(VERSION_HEADER)
        if path_version is None:
            method, ident, params = _method(body)
            status = params.get("status") if isinstance(params, dict) else None
            if method in ("ListTasks", "tasks/list") and _unknown_status(status):
                return _invalid_status(ident, status)
            if not version and method in _V1_METHODS:
                version = "1.0"
        elif request.method == "GET" and _unknown_status(request.query_params.get("status")):
            bad = InvalidParamsError(message=_STATUS_RULE)
            return JSONResponse(build_rest_error_payload(bad), 400)
        version = version or path_version
        if not version or request.headers.get(VERSION_HEADER):
            return await endpoint(_replayed(request, body))
        header = (VERSION_HEADER.lower().encode(), version.encode())
        return await endpoint(_replayed(request, body, [*request.scope["headers"], header]))

    return adapted


async def _bounded(request: Request, app: App) -> bytes:
    """The request's body, read by ``app`` within its limits; else an invalid-request error
    that says which."""
    try:
        return await app.raw_body(request)
    except ApiError as exc:
        raise InvalidRequestError(message=exc.message) from None


def _too_deep(body: bytes) -> bool:
    """Whether ``body`` is JSON nested deeper than :data:`~._input.MAX_DEPTH` levels."""
    try:
        check_depth({"body": json.loads(body)})
    except (RecursionError, ApiError):
        return True
    except ValueError:  # not JSON: the SDK's dispatcher answers that
        pass
    return False


_STATUS_RULE = f"status must be one of {', '.join(State.keys()[1:])}"


def _invalid_status(ident: Any, status: Any) -> Response:
    ident = ident if isinstance(ident, (str, int)) and not isinstance(ident, bool) else None
    error = InvalidParamsError(message=f"{_STATUS_RULE}; got {ascii(str(status)[:40])}")
    return JSONResponse(build_error_response(ident, error))


def _replayed(request: Request, body: bytes, headers: list[Any] | None = None) -> Request:
    """A request like ``request`` (with ``headers``, if given) whose body, read once
    already, reads again."""

    async def replay() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    scope = request.scope if headers is None else {**request.scope, "headers": headers}
    return Request(scope, replay)


class A2ARoutes:
    """The A2A routes of every assistant: its card, JSON-RPC at ``/a2a/{assistant_id}`` and
    HTTP+JSON under it, each for protocol 1.0 and 0.3."""

    def __init__(
        self, app: App, check: Callable[[str, str | None, bool], Awaitable[None]], api_key: bool
    ) -> None:
        self.app = app
        self.api_key = api_key
        self.tasks = A2ATasks(app, check)

    def rows(self) -> Rows:
        rows: Rows = [
            (CARD_PATH, self.card, ["GET"]),
            (f"/a2a/{{assistant_id:str}}{CARD_PATH}", self.card, ["GET"]),
        ]
        for assistant in self.app.assistants:
            agent = A2AAgent(self.tasks, assistant)
            prefix = f"/a2a/{assistant.assistant_id}"
            routes = [
                *create_jsonrpc_routes(agent, prefix, enable_v0_3_compat=True),
                *create_rest_routes(agent, enable_v0_3_compat=True, path_prefix=prefix),
            ]
            for route in routes:
                if isinstance(route, Route):  # not the SDK's per-tenant mount: no tenants here
                    legacy = route.path.startswith(f"{prefix}/v1/")  # 0.3's REST paths
                    kind = None if route.path == prefix else "0.3" if legacy else "1.0"
                    endpoint = _adapted(route.endpoint, kind, self.app)
                    rows.append((route.path, endpoint, sorted(route.methods or ())))
        return rows

    async def card(self, request: Request) -> Response:
        name = request.path_params.get("assistant_id") or request.query_params.get("assistant_id")
        served = {a.assistant_id: a for a in self.app.assistants}
        if not name and not served:
            raise ApiError(404, "assistant_not_found", "this server serves no workflow")
        assistant = served.get(name) if name else next(iter(served.values()))
        if assistant is None:  # the card is public: name no other assistant, served or made
            raise ApiError(
                404,
                "agent_not_found",
                f"no agent card for {ascii(str(name)[:60])}; each served workflow's card is at "
                f"/a2a/ASSISTANT_ID{CARD_PATH}",
            )
        card = agent_card(assistant, str(request.base_url), self.api_key)
        return JSONResponse(agent_card_to_dict(card))
