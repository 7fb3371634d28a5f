"""LangChain's event stream (``astream_events`` v2) of a workflow's run, as LangGraph's ``events``
stream mode gives a graph's.

A workflow is a compiled LangGraph graph, so LangGraph's own ``astream_events`` gives its chain
events: the graph's (the root run), each node's ``on_chain_start`` / ``on_chain_stream`` /
``on_chain_end`` and those of the runnables inside a node (a routing function). Two things of
a workflow are not LangChain runnables, and :class:`WorkflowEvents` writes them as LangChain
would:

* a model call of an agent (the agent runtime's own model client) becomes ``on_chat_model_start``,
  one ``on_chat_model_stream`` per streamed piece (an ``AIMessageChunk``; the tool calls as
  ``tool_call_chunks`` of a last chunk) and ``on_chat_model_end`` (the ``AIMessage`` with its
  ``tool_calls`` and ``usage_metadata``), a child of the agent's node, made from the ``token``
  and ``llm_call`` events the runtime writes to the stream. The start goes out as the call
  starts (``llm_start``), its ``input`` the messages the model is sent;
* a tool call, run as a LangGraph task of the tools node, becomes ``on_tool_start`` (the
  arguments as an object) and ``on_tool_end`` (a ``ToolMessage``), under the task's run id.

What the runtime writes to the stream reaches the run loop a moment after LangChain's
callbacks, so a node's ``on_chain_stream`` and ``on_chain_end`` are held until the node's
update arrives (everything the node wrote came before it): a model call's events always fall
between its node's start and end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage, convert_to_messages
from langchain_core.messages.tool import tool_call_chunk

from ..agent.runtime import TOOL_CALL_TASK

__all__ = ["WorkflowEvents", "root_run_id"]

_HIDDEN = "langsmith:hidden"
"""The tag of LangGraph's internal runnables, which LangGraph's server leaves out too."""


def root_run_id(metadata: Mapping[str, Any]) -> uuid.UUID:
    """The run id of a run's root (graph) events: the server's run id when the run has one,
    as LangGraph's server streams them, else a new one."""
    try:
        return uuid.UUID(str(metadata.get("run_id")))
    except ValueError:
        return uuid.uuid4()


def _args(raw: Any) -> Any:
    """A tool call's arguments as an object (the text as it is when it is not JSON)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


class _ModelRun:
    """An agent's model call being streamed."""

    def __init__(self, node: Mapping[str, Any], name: str) -> None:
        self.run_id = str(uuid.uuid4())
        self.name = name
        metadata = dict(node["metadata"])
        metadata["checkpoint_ns"] = metadata.get("langgraph_checkpoint_ns", "")
        state = (node.get("data") or {}).get("input")
        messages = state.get("messages") if isinstance(state, Mapping) else None
        self.input = {"messages": [list(messages or [])]}
        self.common = {
            "name": name,
            "run_id": self.run_id,
            "parent_ids": [*node["parent_ids"], node["run_id"]],
            "metadata": metadata,
        }
        self.streamed = False

    def event(self, kind: str, tags: list[str], data: dict[str, Any]) -> dict[str, Any]:
        return {"event": kind, **self.common, "tags": list(tags), "data": data}


class WorkflowEvents:
    """Turns the ``astream_events`` v2 events of a workflow's graph (and the parts of its
    stream) into the events of LangGraph's ``events`` mode, passed to ``send``.

    ``root`` is the run id of the graph's own events; ``models`` names each agent's model
    (the name of its chat model events)."""

    def __init__(
        self, root: str, models: Mapping[str, str], send: Callable[[dict[str, Any]], None]
    ) -> None:
        self.root = root
        self.models = dict(models)
        self.send = send
        self.tags: list[str] = []
        """The root's tags: those every run of the graph inherits."""
        self.nodes: dict[str, dict[str, Any]] = {}
        """The start event of each node run (a direct child of the root), by run id."""
        self.tools: dict[str, dict[str, Any]] = {}
        """The start of each tool call's task, by run id: its tool's name and arguments."""
        self.calls: dict[str, _ModelRun] = {}
        """Each agent's model call being streamed."""
        self.held: list[tuple[str, dict[str, Any]]] = []
        """Events that wait for their node's update (by the node's name): a node's stream and
        end, and what runs inside an agent's model node (after its model call)."""

    # -- LangChain's events ---------------------------------------------------------------

    def event(self, event: Mapping[str, Any]) -> None:
        """One event of ``astream_events`` (not the root's stream parts: :meth:`part`)."""
        if _HIDDEN in (event.get("tags") or ()):
            return
        found = dict(event)
        run_id, kind = found["run_id"], found["event"]
        if run_id == self.root:
            if kind == "on_chain_start":
                self.tags = list(found.get("tags") or [])
            elif kind == "on_chain_end":
                self.flush()
            self.send(found)
            return
        if found["name"] == TOOL_CALL_TASK or run_id in self.tools:
            self._tool(found)
            return
        parents = list(found.get("parent_ids") or [])
        if parents == [self.root]:  # a node
            if kind == "on_chain_start":
                self.nodes[run_id] = found
            else:
                self.held.append((found["name"], found))
                return
        elif len(parents) > 1 and self.nodes.get(parents[1], {}).get("name") in self.models:
            # inside an agent's model node: what runs after its model call (the routing)
            self.held.append((self.nodes[parents[1]]["name"], found))
            return
        self.send(found)

    def _tool(self, event: dict[str, Any]) -> None:
        """A tool call's task event as the tool's."""
        kind, run_id = event["event"], event["run_id"]
        given = (event.get("data") or {}).get("input")
        if kind == "on_chain_start":
            call = (given or {}).get("tc") if isinstance(given, Mapping) else None
            function = (call or {}).get("function") or {}
            self.tools[run_id] = {
                "name": str(function.get("name") or "tool"),
                "args": _args(function.get("arguments")),
                "id": (call or {}).get("id"),
            }
        tool = self.tools.get(run_id)
        if tool is None or kind == "on_chain_stream":
            return
        metadata = dict(event.get("metadata") or {})
        parents = list(event.get("parent_ids") or [])
        node = self.nodes.get(parents[-1]) if parents else None
        if node is not None:  # the tools node's, as a tool of LangGraph's ToolNode has them
            metadata = dict(node["metadata"])
            metadata["checkpoint_ns"] = metadata.get("langgraph_checkpoint_ns", "")
        data: dict[str, Any] = {"input": tool["args"]}
        if kind == "on_chain_end":
            self.tools.pop(run_id, None)
            result = (event.get("data") or {}).get("output")
            result = result if isinstance(result, Mapping) else {}
            data["output"] = ToolMessage(
                content=str(result.get("content", "")),
                name=str(result.get("name") or tool["name"]),
                tool_call_id=str(result.get("tool_call_id") or tool["id"] or ""),
                status="error" if result.get("is_error") else "success",
            )
        self.send(
            {
                "event": "on_tool_start" if kind == "on_chain_start" else "on_tool_end",
                "name": tool["name"],
                "run_id": run_id,
                "parent_ids": parents,
                "tags": list(event.get("tags") or []),
                "metadata": metadata,
                "data": data,
            }
        )

    # -- the graph's stream parts -----------------------------------------------------------

    def part(self, mode: str, chunk: Any) -> None:
        """A part of the graph's own stream: what an agent wrote (its model call's events),
        a node's update (the node's held end goes out), a checkpoint (every held end)."""
        if mode == "custom" and isinstance(chunk, Mapping):
            if chunk.get("event") == "llm_start":
                prompt = chunk.get("prompt")
                self._model(str(chunk.get("agent")), prompt if isinstance(prompt, list) else None)
            elif chunk.get("event") == "token":
                self._token(str(chunk.get("agent")), str(chunk.get("text") or ""))
            elif chunk.get("event") == "llm_call":
                self._model_end(chunk)
        elif mode == "updates" and isinstance(chunk, Mapping):
            self.flush(set(chunk))
        elif mode == "checkpoints":
            self.flush()

    def flush(self, nodes: set[str] | None = None) -> None:
        """Send the held node ends (of ``nodes`` only, when given), in their order."""
        keep = []
        for node, event in self.held:
            if nodes is None or node in nodes:
                self.send(event)
            else:
                keep.append((node, event))
        self.held = keep

    def _model(self, agent: str, prompt: list[Any] | None = None) -> _ModelRun:
        """The agent's model call, started (``on_chat_model_start``, its input the ``prompt``
        the model is sent when told) if it was not."""
        found = self.calls.get(agent)
        if found is None:
            node = next(
                (n for n in reversed(self.nodes.values()) if n["name"] == agent),
                {"name": agent, "run_id": self.root, "parent_ids": [], "metadata": {}},
            )
            found = self.calls[agent] = _ModelRun(node, self.models.get(agent, agent))
            if prompt is not None:
                found.input = {"messages": [convert_to_messages(prompt)]}
            self.send(found.event("on_chat_model_start", self.tags, {"input": found.input}))
        return found

    def _chunk(self, run: _ModelRun, text: str, calls: list[Mapping[str, Any]]) -> None:
        pieces = [
            tool_call_chunk(name=c.get("name"), args=c.get("arguments"), id=c.get("id"), index=i)
            for i, c in enumerate(calls)
        ]
        chunk = AIMessageChunk(content=text, id=f"lc_run--{run.run_id}", tool_call_chunks=pieces)
        run.streamed = True
        self.send(run.event("on_chat_model_stream", self.tags, {"chunk": chunk}))

    def _token(self, agent: str, text: str) -> None:
        self._chunk(self._model(agent), text, [])

    def _model_end(self, call: Mapping[str, Any]) -> None:
        agent = str(call.get("agent"))
        run = self._model(agent)
        calls = [c for c in call.get("tool_calls") or () if isinstance(c, Mapping)]
        content = str(call.get("content") or "")
        if not run.streamed:  # no token streamed: the whole reply as one chunk
            self._chunk(run, content, calls)
        elif calls:  # the text was streamed; its tool calls follow in a chunk of their own
            self._chunk(run, "", calls)
        usage = call.get("usage") or {}
        parsed = [(c, _args(c.get("arguments"))) for c in calls]
        message = AIMessage(
            content=content,
            id=f"lc_run--{run.run_id}",
            tool_calls=[
                {"name": str(c.get("name")), "args": args, "id": c.get("id")}
                for c, args in parsed
                if isinstance(args, dict)
            ],
            invalid_tool_calls=[
                {
                    "name": c.get("name"),
                    "args": c.get("arguments"),
                    "id": c.get("id"),
                    "error": "the arguments are not a JSON object",
                    "type": "invalid_tool_call",
                }
                for c, args in parsed
                if not isinstance(args, dict)
            ],
            usage_metadata={
                "input_tokens": int(usage.get("prompt_tokens") or 0),
                "output_tokens": int(usage.get("completion_tokens") or 0),
                "total_tokens": int(usage.get("total_tokens") or 0),
            },
        )
        self.send(
            run.event("on_chat_model_end", self.tags, {"output": message, "input": run.input})
        )
        del self.calls[agent]
