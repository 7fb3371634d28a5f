"""``RemoteAgent``: an agent served elsewhere as a node of a swarm – an A2A agent (through the
``a2a-sdk`` client) or an assistant of a LangGraph-API server (``aworld-graph serve``,
LangGraph Platform or any server ``langgraph.pregel.remote.RemoteGraph`` talks to).

A call is checkpointed like a tool call. Sending runs as a LangGraph task of its own
(:data:`~aworld_graph.agent.runtime.TOOL_CALL_TASK`), whose result – the remote task id, or
the remote thread and run ids (kept in the node's trace record as ``sub_thread`` and
``raw``) – is saved in the thread's checkpoint before the node waits for
the answer. When a crashed run resumes, the node runs again, reads those ids back instead of
sending the message again, and joins the remote task. The ids the node sends (an A2A message
id, a LangGraph thread id) are derived from the run's thread, step and node, so a crash
between sending and saving finds the remote task by them (LangGraph) or sends a message a
server can recognise as the same (A2A).

A remote agent that waits for a person (an A2A task in ``input-required``, a LangGraph run
stopped at an interrupt) makes this node the run's own human step: the run stops with the
remote's prompt (LangGraph ``interrupt``, as :class:`~aworld_graph.swarm.nodes.Human` does, its
value one the Agent Chat UI answers with its form: :mod:`._asking`),
and the person's answer is sent as the next message on the same remote task (A2A: with its
task and context ids; LangGraph: a run on the same thread that resumes it), which then goes on.
Each answer is sent by a checkpointed task too, under an id derived from the node's and the
answer's number, so a resumed node replays the answers it sent instead of sending them again.
Each wait for the remote (its answer or its next question) is a checkpointed task as well: a
node resumed after a crash that lost what sending an answer returned replays the question it
answered, not the remote's next one, and, for A2A, looks at the remote task before it sends
the answer again: a task that no longer waits on that question took it, and nothing is sent
(a server that keeps message ids, as ``aworld-graph serve`` does, would also take the same
message id as the same message).

An A2A task is followed by subscribing to it (``SubscribeToTask``) when the agent's card says it
streams, else by polling ``GetTask`` every ``poll_interval`` seconds.

A remote agent that does not answer within ``timeout``, answers something unreadable, fails,
or cannot be reached is a :class:`~aworld_graph.errors.ToolError` naming the agent and the
URL: the node fails, the failure is kept in the run's trajectory, and resuming the run joins
the same remote task again.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar
from urllib.parse import urlsplit

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.func import task

from ..agent.runtime import TOOL_CALL_TASK
from ..errors import DefinitionError, ToolError
from ..records import TraceRecord
from ..secrets import register_secret
from ..state import SwarmState
from ._asking import ask
from .nodes import Node

if TYPE_CHECKING:
    from langgraph.func import _TaskFunction

__all__ = ["RemoteAgent"]

Protocol = Literal["a2a", "langgraph"]

_IDS = uuid.UUID("6f1c1d39-5a57-4c43-9c36-2a1f0e6a4b8e")
"""Namespace of the ids derived from a run's thread, step and node."""

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(kw_only=True, eq=False)
class RemoteAgent(Node):
    """An agent at ``url`` as a node: it is sent the latest message of the run (the task
    input, or the answer of the node before it) and its answer becomes this node's answer.

    ``protocol="a2a"`` (the default without ``assistant_id``): an A2A agent whose card is
    at ``URL/.well-known/agent-card.json``. ``protocol="langgraph"`` (the default with
    ``assistant_id``): the assistant ``assistant_id`` of the LangGraph-API server at ``url``.
    """

    name: str
    """Unique node name."""
    url: str
    """Where the agent is served (``http://host:port``)."""
    assistant_id: str | None = None
    """The assistant (graph) to run on a LangGraph-API server."""
    protocol: Protocol | None = None
    """``a2a`` or ``langgraph``; by default ``langgraph`` when ``assistant_id`` is given."""
    api_key_env: str | None = None
    """The environment variable holding the remote's API key (sent as ``x-api-key`` and as a
    bearer token); the key itself is never part of the definition, a card or a checkpoint."""
    timeout: float = 300.0
    """Seconds to wait for the answer before the call is a tool error (resume the run to wait
    again)."""
    poll_interval: float = 0.5
    """Seconds between two looks at a remote A2A task that has not finished, when the agent's
    card says it does not stream (one that streams is followed by subscription)."""
    description: str = ""
    """What the remote agent does."""
    fn: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.fn = self.node
        super().__post_init__()
        problems = []
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"url must be an http:// or https:// URL, got {self.url!r}")
        elif parts.username is not None or parts.password is not None:
            # the url is in the card, the trajectory and every error message
            problems.append(
                "url may not carry credentials (user:password@); name the environment "
                "variable holding the remote's API key with api_key_env="
            )
        if self.protocol is None:
            self.protocol = "langgraph" if self.assistant_id else "a2a"
        if self.protocol not in ("a2a", "langgraph"):
            problems.append(f"protocol must be 'a2a' or 'langgraph', got {self.protocol!r}")
        if self.protocol == "langgraph" and not self.assistant_id:
            problems.append("protocol 'langgraph' needs assistant_id= (the graph to run)")
        if not self.timeout > 0 or not self.poll_interval > 0:
            problems.append("timeout and poll_interval must be positive numbers of seconds")
        if problems:
            raise DefinitionError(f"remote agent {self.name!r}: " + "; ".join(problems))

    def card(self) -> dict[str, Any]:
        return {
            "kind": "remote",
            "name": self.name,
            "url": self.url,
            "protocol": self.protocol,
            "assistant_id": self.assistant_id,
            "api_key_env": self.api_key_env,
            "timeout": self.timeout,
            "description": self.description,
        }

    # -- the node --------------------------------------------------------------------------

    async def node(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        text = _request(state)
        step = int((config.get("metadata") or {}).get("langgraph_step", 0))
        conf = config.get("configurable") or {}
        seed = f"{conf.get('thread_id')}|{conf.get('checkpoint_ns', '')}|{step}|{self.name}"
        ident = str(uuid.uuid5(_IDS, seed))
        started = time.monotonic()
        sent: dict[str, Any] = {}
        replies: list[str] = []
        refused: list[dict[str, Any]] = []
        # ``timeout`` bounds the whole call; each task bounds itself by what is left of it, so
        # a cut-off wait ends as this clear error in the trajectory, not as a cancelled task
        deadline = time.monotonic() + self.timeout
        sent = await _send(self, deadline, text, ident)  # saved before the wait: a resume joins it
        while "prompt" in (got := await _wait(self, deadline, sent)):
            # the remote waits for a person: this run's own human step
            value, bad = ask(self.name, got["prompt"], state.get("answer"))
            refused += [{"given": given, "error": error} for given, error in bad]
            replies.append(value if isinstance(value, str) else json.dumps(value))
            again = str(uuid.uuid5(_IDS, f"{seed}|{len(replies)}"))
            sent = await _reply(self, deadline, sent, replies[-1], again, got["mark"])
        answer = got["answer"]
        record: TraceRecord = {
            "kind": "remote",
            "at": time.time(),
            "node": self.name,
            "agent": self.name,
            "step": step,
            "content": answer,
            "tool_calls": [],
            "latency_ms": round((time.monotonic() - started) * 1000, 3),
        }
        record["sub_thread"] = str(sent.get("task_id") or sent.get("thread_id") or "") or None
        record["raw"] = {"url": self.url, "protocol": self.protocol, **sent}  # what sending got
        if replies:
            record["raw"]["replies"] = replies
        if refused:  # a person's answers it could not read (the node asked again)
            record["raw"]["refused"] = refused
        said = [{"role": "user", "content": reply, "_agent": self.name} for reply in replies]
        return {
            "messages": [*said, {"role": "assistant", "content": answer, "_agent": self.name}],
            "answer": answer,
            "outputs": {self.name: answer},
            "trace": record,
            "steps": 1,
        }

    def _failure(self, why: str) -> ToolError:
        return ToolError(f"remote agent {self.name!r} ({self.url}): {why}")

    def api_key(self) -> str | None:
        """The remote's API key, read from ``api_key_env`` now (and registered as a secret:
        a remote that echoes it into an error leaves it out of the trajectory and logs)."""
        key = (os.environ.get(self.api_key_env) or None) if self.api_key_env else None
        register_secret(key)
        return key

    def headers(self) -> dict[str, str]:
        """The headers that carry the API key."""
        key = self.api_key()
        return {"x-api-key": key, "authorization": f"Bearer {key}"} if key else {}

    async def start(self, text: str, ident: str) -> dict[str, Any]:
        """Send ``text``; the ids to join the remote task by."""
        try:
            if self.protocol == "langgraph":
                return await self._start_run(text, ident)
            return await self._start_task(text, ident)
        except ToolError:
            raise
        except Exception as exc:  # unreachable, refused, or an answer that is not A2A
            raise self._failure(f"sending failed: {_said(exc)}") from None

    async def reply(self, sent: dict[str, Any], text: str, ident: str, mark: str) -> dict[str, Any]:
        """Send a person's answer ``text`` to the remote task ``sent`` waits on (whose waiting
        ``mark`` it answers); the ids to join it by."""
        try:
            if self.protocol == "langgraph":
                return await self._resume_run(sent, text)
            return await self._start_task(text, ident, sent, mark)
        except ToolError:
            raise
        except Exception as exc:
            raise self._failure(
                f"sending the answer to {_named(sent)} failed: {_said(exc)}"
            ) from None

    async def wait(self, sent: dict[str, Any]) -> dict[str, str]:
        """Wait for the remote task ``sent`` names to end or to ask for input: its answer
        (``{"answer": ...}``) or its question (``{"prompt": ..., "mark": ...}``, ``mark``
        naming this waiting, to be passed to :meth:`reply`)."""
        answer = await self._answer(sent)
        if isinstance(answer, _Asked):
            return {"prompt": answer.prompt, "mark": answer.mark}
        return {"answer": answer}

    async def _answer(self, sent: dict[str, Any]) -> str | _Asked:
        if "answer" in sent:  # an A2A agent that answered with a message, not a task
            return str(sent["answer"])
        try:
            if self.protocol == "langgraph":
                return await self._join_run(sent)
            return await self._join_task(sent)
        except ToolError:
            raise
        except Exception as exc:
            raise self._failure(f"waiting for remote {_named(sent)} failed: {_said(exc)}") from None

    # -- LangGraph API ---------------------------------------------------------------------

    def _sdk(self) -> Any:
        from langgraph_sdk import get_client

        # reads unbounded: joining a run waits for its end, which ``timeout`` bounds
        wait = (30.0, None, 30.0, 30.0)  # connect, read, write, pool
        return get_client(url=self.url, api_key=self.api_key(), timeout=wait)

    async def _start_run(self, text: str, ident: str) -> dict[str, Any]:
        client = self._sdk()
        try:
            await client.threads.create(thread_id=ident, if_exists="do_nothing")
            runs = await client.runs.list(ident, limit=1)
            if runs:  # sent before a crash, not yet saved here: join that run
                return {"thread_id": ident, "run_id": str(runs[0]["run_id"])}
            run = await client.runs.create(
                ident,
                str(self.assistant_id),
                input={"messages": [{"role": "user", "content": text}]},
            )
            return {"thread_id": ident, "run_id": str(run["run_id"])}
        finally:
            await client.aclose()

    async def _resume_run(self, sent: dict[str, Any], text: str) -> dict[str, Any]:
        client = self._sdk()
        thread_id = sent["thread_id"]
        try:
            runs = await client.runs.list(thread_id, limit=1)
            if runs and str(runs[0]["run_id"]) != sent["run_id"]:  # sent before a crash
                return {"thread_id": thread_id, "run_id": str(runs[0]["run_id"])}
            run = await client.runs.create(
                thread_id, str(self.assistant_id), command={"resume": text}
            )
            return {"thread_id": thread_id, "run_id": str(run["run_id"])}
        finally:
            await client.aclose()

    async def _join_run(self, sent: dict[str, Any]) -> str | _Asked:
        client = self._sdk()
        try:
            values = await client.runs.join(sent["thread_id"], sent["run_id"])
        finally:
            await client.aclose()
        if not isinstance(values, dict):
            raise self._failure(f"answered {_shown(values)}, not the thread's values")
        if values.get("__error__"):
            raise self._failure(f"the remote run failed: {_shown(values['__error__'])}")
        asked = values.get("__interrupt__")
        if asked:
            first = asked[0] if isinstance(asked, list) else asked
            value = first.get("value") if isinstance(first, dict) else first
            prompt = value.get("prompt") if isinstance(value, dict) else value
            text = prompt if isinstance(prompt, str) else json.dumps(prompt, default=str)
            return _Asked(text, str(sent["run_id"]))
        answer = values.get("answer")
        if answer is None:
            messages = values.get("messages")
            last = messages[-1] if isinstance(messages, list) and messages else None
            answer = last.get("content") if isinstance(last, dict) else None
        if not isinstance(answer, str):
            raise self._failure(f"answered {_shown(values)}: no answer or message in it")
        return answer

    # -- A2A -------------------------------------------------------------------------------

    async def _a2a(self, http: httpx.AsyncClient, *, follow: bool = False) -> tuple[Any, bool]:
        """A client of the agent and whether it streams (its card says so). ``follow``: a
        client that subscribes to tasks (else one whose sends return at once)."""
        from a2a.client import A2ACardResolver, ClientConfig, create_client

        card = await A2ACardResolver(http, self.url).get_agent_card()
        streams = bool(card.capabilities.streaming)
        config = ClientConfig(streaming=follow and streams, polling=True, httpx_client=http)
        return await create_client(card, client_config=config), streams

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self.headers(), timeout=30)

    async def _start_task(
        self, text: str, ident: str, on: dict[str, Any] | None = None, mark: str = ""
    ) -> dict[str, Any]:
        """Send ``text`` as message ``ident``: a new task in context ``ident`` (a server can
        tell a message sent again by its id in its context), or, with ``on``, the next
        message of that task, answering its waiting ``mark`` – unless the task waits on
        ``mark`` no more: then the answer was sent before a crash lost what sending it
        returned, and it is not sent again."""
        from a2a.helpers import get_message_text, new_text_message
        from a2a.types import GetTaskRequest, Role, SendMessageRequest

        message = new_text_message(text, role=Role.ROLE_USER)
        message.message_id = ident
        message.context_id = on["context_id"] if on else ident
        if on:
            message.task_id = on["task_id"]
        async with self._http() as http:
            client, _ = await self._a2a(http)
            try:
                if on:
                    found = await client.get_task(GetTaskRequest(id=on["task_id"]))
                    waits = self._outcome(found.id, found.status, None)
                    if not (isinstance(waits, _Asked) and waits.mark == mark):
                        return {
                            "task_id": found.id,
                            "context_id": found.context_id,
                            "answered": mark,
                        }
                async for event in client.send_message(SendMessageRequest(message=message)):
                    if event.HasField("task"):
                        found = {"task_id": event.task.id, "context_id": event.task.context_id}
                        return {**found, "answered": mark} if mark else found
                    if event.HasField("message"):
                        return {"answer": get_message_text(event.message)}
            finally:
                await client.close()
        raise self._failure("the agent answered with neither a task nor a message")

    async def _join_task(self, sent: dict[str, Any]) -> str | _Asked:
        from a2a.types import GetTaskRequest

        async with self._http() as http:
            client, streams = await self._a2a(http, follow=True)
            try:
                while True:
                    found = await client.get_task(GetTaskRequest(id=sent["task_id"]))
                    outcome = self._outcome(found.id, found.status, sent.get("answered"))
                    if isinstance(outcome, _Asked):
                        return outcome
                    if outcome:
                        return self._task_text(found)
                    if not (streams and await self._follow(client, sent)):
                        await asyncio.sleep(self.poll_interval)
            finally:
                await client.close()

    async def _follow(self, client: Any, sent: dict[str, Any]) -> bool:
        """Follow the task's stream until it says the task ended or waits; whether it did
        (``False``: the stream ended first, or the server has no stream for the task now)."""
        from a2a.types import SubscribeToTaskRequest
        from a2a.utils.errors import UnsupportedOperationError

        try:
            async for event in client.subscribe(SubscribeToTaskRequest(id=sent["task_id"])):
                kind = event.WhichOneof("payload")
                if kind not in ("task", "status_update"):
                    continue
                status = event.task.status if kind == "task" else event.status_update.status
                if self._outcome(sent["task_id"], status, sent.get("answered")):
                    return True
        except UnsupportedOperationError:  # ended or waiting already: GetTask reads it
            return True
        return False

    def _outcome(self, task_id: str, status: Any, answered: str | None) -> _Asked | bool:
        """What a task's ``status`` means: ``True`` (completed), an :class:`_Asked` (it waits
        for a person; not the waiting ``answered`` already answered), or ``False`` (it still
        goes); a failed or refused task is a tool error."""
        from a2a.types import TaskState

        state = status.state
        if state == TaskState.TASK_STATE_COMPLETED:
            return True
        if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED) or (
            state == TaskState.TASK_STATE_REJECTED
        ):
            why = _said_in(status) or TaskState.Name(state)
            raise self._failure(f"remote task {task_id} ended: {why}")
        if state == TaskState.TASK_STATE_AUTH_REQUIRED:
            raise self._failure(
                f"remote task {task_id} waits for authentication: {_said_in(status) or 'say how'}"
            )
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            mark = f"{status.message.message_id}|{status.timestamp.ToJsonString()}"
            if mark == answered:  # the answer sent has not been taken up yet
                return False
            return _Asked(_said_in(status) or "the remote agent asks for input", mark)
        return False

    def _task_text(self, found: Any) -> str:
        from a2a.helpers import get_artifact_text

        parts = [get_artifact_text(a) for a in found.artifacts]
        text = "\n".join(p for p in parts if p) or _status_text(found)
        if not text:
            raise self._failure(f"remote task {found.id} completed with no text in it")
        return text


@dataclass(frozen=True)
class _Asked:
    """A remote task that waits for a person: what it asks, and which waiting this is (so
    an answer already sent is not taken for a new question)."""

    prompt: str
    mark: str


def _status_text(found: Any) -> str:
    return _said_in(found.status)


def _said_in(status: Any) -> str:
    from a2a.helpers import get_message_text

    return get_message_text(status.message) if status.HasField("message") else ""


def _request(state: SwarmState) -> str:
    """What the remote agent is sent: the latest message's text, else the task input."""
    messages = state.get("messages") or []
    content = messages[-1].get("content") if messages else None
    if isinstance(content, str) and content:
        return content
    if content:
        return json.dumps(content)
    return str(state.get("input") or "")


def _named(sent: dict[str, Any]) -> str:
    if "task_id" in sent:
        return f"task {sent['task_id']}"
    return f"run {sent.get('run_id')} on thread {sent.get('thread_id')}"


def _said(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text[:200] + ("…" if len(text) > 200 else "")


def _named_task(name: str) -> Callable[[Callable[_P, Awaitable[_T]]], _TaskFunction[_P, _T]]:
    """``langgraph.func.task(name=...)``, typed (see ``agent._tools_node``)."""
    return task(name=name)


async def _within(agent: RemoteAgent, deadline: float, work: Awaitable[_T], where: str) -> _T:
    """``work`` cut off at ``deadline`` (``time.monotonic()``) as the node's clear failure."""
    try:
        async with asyncio.timeout(deadline - time.monotonic()):
            return await work
    except TimeoutError:
        raise agent._failure(
            f"no answer within {agent.timeout:g} s ({where}); resume the run to try again"
        ) from None


@_named_task(TOOL_CALL_TASK)
async def _send(agent: RemoteAgent, deadline: float, text: str, ident: str) -> dict[str, Any]:
    """Send ``text`` to ``agent``: a LangGraph task, so the ids it answers are saved in the
    checkpoint as soon as it returns (a resumed node reads them back instead of sending)."""
    return await _within(agent, deadline, agent.start(text, ident), "sending it did not finish")


@_named_task(TOOL_CALL_TASK)
async def _wait(agent: RemoteAgent, deadline: float, sent: dict[str, Any]) -> dict[str, str]:
    """Wait for the remote task's answer or question: a LangGraph task, so a question is
    saved before the run stops for the person, and a node resumed after a crash that lost
    the sending of the answer replays that question (and sends the answer to it), not the
    remote's next one."""
    return await _within(agent, deadline, agent.wait(sent), f"remote {_named(sent)}")


@_named_task(TOOL_CALL_TASK)
async def _reply(
    agent: RemoteAgent, deadline: float, sent: dict[str, Any], text: str, ident: str, mark: str
) -> dict[str, Any]:
    """Send a person's answer to the remote task ``sent`` waits on: a LangGraph task like
    :func:`_send`, so a resumed node replays it instead of sending it again."""
    where = f"sending the answer to remote {_named(sent)}"
    return await _within(agent, deadline, agent.reply(sent, text, ident, mark), where)
