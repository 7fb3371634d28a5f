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
    """Seconds between two looks at a remote A2A task that has not finished."""
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
        try:
            async with asyncio.timeout(self.timeout):
                sent = await _send(self, text, ident)  # saved before the wait: a resume joins it
                answer = await self._answer(sent)
        except TimeoutError:
            where = f"remote {_named(sent)}" if sent else "sending it did not finish"
            raise self._failure(
                f"no answer within {self.timeout:g} s ({where}); resume the run to try again"
            ) from None
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
        return {
            "messages": [{"role": "assistant", "content": answer, "_agent": self.name}],
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

    async def _answer(self, sent: dict[str, Any]) -> str:
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

    async def _join_run(self, sent: dict[str, Any]) -> str:
        client = self._sdk()
        try:
            values = await client.runs.join(sent["thread_id"], sent["run_id"])
        finally:
            await client.aclose()
        if not isinstance(values, dict):
            raise self._failure(f"answered {_shown(values)}, not the thread's values")
        if values.get("__error__"):
            raise self._failure(f"the remote run failed: {_shown(values['__error__'])}")
        if values.get("__interrupt__"):
            raise self._failure(
                f"the remote run waits for a person's input (thread {sent['thread_id']}); "
                "answer it there, then resume this run"
            )
        answer = values.get("answer")
        if answer is None:
            messages = values.get("messages")
            last = messages[-1] if isinstance(messages, list) and messages else None
            answer = last.get("content") if isinstance(last, dict) else None
        if not isinstance(answer, str):
            raise self._failure(f"answered {_shown(values)}: no answer or message in it")
        return answer

    # -- A2A -------------------------------------------------------------------------------

    async def _a2a(self, http: httpx.AsyncClient) -> Any:
        from a2a.client import ClientConfig, create_client

        config = ClientConfig(streaming=False, polling=True, httpx_client=http)
        return await create_client(self.url, client_config=config)

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self.headers(), timeout=30)

    async def _start_task(self, text: str, ident: str) -> dict[str, Any]:
        from a2a.helpers import get_message_text, new_text_message
        from a2a.types import Role, SendMessageRequest

        message = new_text_message(text, role=Role.ROLE_USER)
        message.message_id = ident
        async with self._http() as http:
            client = await self._a2a(http)
            try:
                async for event in client.send_message(SendMessageRequest(message=message)):
                    if event.HasField("task"):
                        return {"task_id": event.task.id, "context_id": event.task.context_id}
                    if event.HasField("message"):
                        return {"answer": get_message_text(event.message)}
            finally:
                await client.close()
        raise self._failure("the agent answered with neither a task nor a message")

    async def _join_task(self, sent: dict[str, Any]) -> str:
        from a2a.types import GetTaskRequest, TaskState

        ended = {TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
        ended |= {TaskState.TASK_STATE_REJECTED}
        waiting = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
        async with self._http() as http:
            client = await self._a2a(http)
            try:
                while True:
                    found = await client.get_task(GetTaskRequest(id=sent["task_id"]))
                    state = found.status.state
                    if state == TaskState.TASK_STATE_COMPLETED:
                        return self._task_text(found)
                    if state in ended:
                        why = _status_text(found) or TaskState.Name(state)
                        raise self._failure(f"remote task {sent['task_id']} ended: {why}")
                    if state in waiting:
                        raise self._failure(
                            f"remote task {sent['task_id']} waits for input: "
                            f"{_status_text(found) or TaskState.Name(state)}"
                        )
                    await asyncio.sleep(self.poll_interval)
            finally:
                await client.close()

    def _task_text(self, found: Any) -> str:
        from a2a.helpers import get_artifact_text

        parts = [get_artifact_text(a) for a in found.artifacts]
        text = "\n".join(p for p in parts if p) or _status_text(found)
        if not text:
            raise self._failure(f"remote task {found.id} completed with no text in it")
        return text


def _status_text(found: Any) -> str:
    from a2a.helpers import get_message_text

    return get_message_text(found.status.message) if found.status.HasField("message") else ""


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


@_named_task(TOOL_CALL_TASK)
async def _send(agent: RemoteAgent, text: str, ident: str) -> dict[str, Any]:
    """Send ``text`` to ``agent``: a LangGraph task, so the ids it answers are saved in the
    checkpoint as soon as it returns (a resumed node reads them back instead of sending)."""
    return await agent.start(text, ident)
