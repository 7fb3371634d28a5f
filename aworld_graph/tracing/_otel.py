"""The OpenTelemetry side of :mod:`aworld_graph.tracing` (imported only by ``configure``).

Attribute names of the GenAI semantic conventions are written as strings here: the semconv
package marks its ``gen_ai`` constants deprecated, and importing them would trip
warnings-as-errors. Names of this project's own attributes start with ``aworld_graph.``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from langgraph.errors import GraphBubbleUp
from langgraph.types import CheckpointPayload
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..secrets import strip_secrets
from . import _content as content
from ._env import global_provider, version

__all__ = ["Tracing"]

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
WORKFLOW_NAME = "gen_ai.workflow.name"
CONVERSATION = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"
THREAD = "aworld_graph.thread_id"
STEP = "aworld_graph.step"
PARENT_CHECKPOINT = "aworld_graph.parent_checkpoint_id"
CHECKPOINT = "aworld_graph.checkpoint_id"
NODE = "aworld_graph.node"
OTHER_ERROR = "_OTHER"

_W3C = TraceContextTextMapPropagator()
_ERROR_NAME = re.compile(r"^([A-Za-z_][\w.]*)(?=[(:])")


@dataclass
class _Run:
    """The run span of the running ``_drive`` call and the last checkpoint it saved."""

    span: Any
    last: tuple[int, str] | None = None
    """Step and id of the latest checkpoint this run saved."""
    started_from: str | None = None
    """The checkpoint the run continued from (``None`` for a fresh thread)."""


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar(
    "aworld_graph_trace_run", default=None
)


@functools.cache
def _signature(fn: Any) -> inspect.Signature:
    return inspect.signature(fn)


def _join(config: Any) -> dict[str, Any]:
    """What ties a span to its trajectory row: thread, step, the checkpoint the step ran from."""
    if not isinstance(config, Mapping):
        return {}
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    attrs: dict[str, Any] = {}
    thread = configurable.get("thread_id")
    if thread is not None:
        attrs[THREAD] = attrs[CONVERSATION] = str(thread)
    if metadata.get("langgraph_step") is not None:
        attrs[STEP] = int(metadata["langgraph_step"])
    parent = (configurable.get("checkpoint_map") or {}).get("")
    if parent:
        attrs[PARENT_CHECKPOINT] = str(parent)
    if metadata.get("langgraph_node"):
        attrs[NODE] = str(metadata["langgraph_node"])
    return attrs


def _running_config() -> Any:
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:  # called outside a graph node
        return None


def _error_type(exc: BaseException) -> str:
    cause = exc.__cause__
    return type(cause if cause is not None else exc).__qualname__


def _fail(span: Any, exc: BaseException) -> None:
    message = str(strip_secrets(str(exc)))[:1000]
    span.set_attribute(ERROR_TYPE, _error_type(exc))
    span.add_event(
        "exception", {"exception.type": type(exc).__qualname__, "exception.message": message}
    )
    span.set_status(Status(StatusCode.ERROR, message[:500]))


def _first(value: Any) -> dict[str, Any]:
    if isinstance(value, list):
        value = value[0] if value else {}
    return value if isinstance(value, dict) else {}


def _provider_name(model: Any) -> str:
    kind = type(model).__name__
    return {"OpenAIModel": "openai", "LocalModel": "llama_cpp"}.get(
        kind, str(getattr(model, "provider", "") or kind)
    )


def _base_url(model: Any) -> str | None:
    url = getattr(model, "base_url", None) or getattr(
        getattr(model, "_model", None), "base_url", None
    )
    return url if isinstance(url, str) else None


def _server(model: Any, default: bool) -> dict[str, Any]:
    url = _base_url(model)
    if url is None:
        return {"server.address": "api.openai.com"} if default else {}
    parts = urlsplit(url)
    attrs: dict[str, Any] = {"server.address": parts.hostname or url}
    if parts.port:
        attrs["server.port"] = parts.port
    return attrs


def _request(model: Any) -> dict[str, Any]:
    from ..model import sampling_temperature_now

    attrs: dict[str, Any] = {}
    params = getattr(model, "params", None) or {}
    temperature = sampling_temperature_now()
    if temperature is None:
        temperature = params.get("temperature", getattr(model, "temperature", None))
    if isinstance(temperature, (int, float)):
        attrs["gen_ai.request.temperature"] = float(temperature)
    for key in ("max_tokens", "top_p", "seed"):
        if isinstance(params.get(key), (int, float)):
            attrs[f"gen_ai.request.{key}"] = params[key]
    return attrs


class Tracing:
    """Spans for runs, agent steps, model and tool calls, and critics' verdicts."""

    def __init__(self, tracer_provider: Any, *, capture_content: bool) -> None:
        self.provider = tracer_provider if tracer_provider is not None else global_provider()
        self.tracer = self.provider.get_tracer("aworld_graph", version())
        self.capture_content = capture_content

    # -- context across processes and sub-runs -----------------------------------------------
    def inject(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        return carrier

    def extract(self, carrier: Mapping[str, str]) -> Any:
        return _W3C.extract(dict(carrier))

    @contextmanager
    def attached(self, ctx: Any) -> Iterator[None]:
        token = otel_context.attach(ctx)
        try:
            yield
        finally:
            otel_context.detach(token)

    def new_context(self) -> contextvars.Context:
        ctx = contextvars.Context()
        ctx.run(otel_context.attach, otel_context.get_current())
        return ctx

    # -- spans ---------------------------------------------------------------------------------
    @contextmanager
    def _span(
        self, name: str, attrs: dict[str, Any], kind: SpanKind = SpanKind.INTERNAL
    ) -> Iterator[Any]:
        with self.tracer.start_as_current_span(
            name, kind=kind, attributes=attrs, record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                yield span
            except GraphBubbleUp:  # an interrupt or a command: control flow, not a failure
                raise
            except BaseException as exc:
                _fail(span, exc)
                raise

    def _content(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return attrs if self.capture_content else {}

    async def run(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = _signature(fn).bind(*args, **kwargs).arguments
        task, info, resume = bound["task"], bound["graph"].info, bound.get("resume")
        single = info.get("kind") == "agent"
        operation = "invoke_agent" if single else "invoke_workflow"
        name = str(info.get("name") or task.name)
        attrs: dict[str, Any] = {
            OPERATION: operation,
            (AGENT_NAME if single else WORKFLOW_NAME): name,
            CONVERSATION: task.id,
            THREAD: task.id,
            "aworld_graph.task.id": task.id,
            "aworld_graph.swarm.kind": str(info.get("kind") or ""),
        }
        if task.name:
            attrs["aworld_graph.task.name"] = str(task.name)
        if task.session_id:
            attrs["aworld_graph.session.id"] = str(task.session_id)
        for key in ("rollout_group", "rollout_index", "rollout_temperature"):
            value = task.metadata.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                attrs["aworld_graph." + key.replace("_", ".", 1)] = value
        with self._span(f"{operation} {name}", attrs) as span:
            run = _Run(span)
            token = _RUN.set(run)
            try:
                if resume is not None:
                    span.add_event(
                        "aworld_graph.human.resume",
                        {
                            THREAD: task.id,
                            **self._content({"aworld_graph.human.value": content.text(resume)}),
                        },
                    )
                response, updates = await fn(*args, **kwargs)
            finally:
                _RUN.reset(token)
            self._finish_run(run, response)
            return response, updates

    def _finish_run(self, run: _Run, response: Any) -> None:
        span = run.span
        span.set_attribute("aworld_graph.status", str(response.status))
        if response.checkpoint_id:
            span.set_attribute(CHECKPOINT, str(response.checkpoint_id))
        if run.last is not None:
            span.set_attribute(STEP, run.last[0])
        if run.started_from is not None:
            span.set_attribute(PARENT_CHECKPOINT, run.started_from)
        for item in response.interrupts:
            value = item.get("value")
            node = value.get("node") if isinstance(value, dict) else None
            attrs: dict[str, Any] = {
                "aworld_graph.interrupt.id": str(item.get("id")),
                THREAD: response.thread_id,
                PARENT_CHECKPOINT: str(response.checkpoint_id or ""),
            }
            if run.last is not None:
                attrs[STEP] = run.last[0] + 1
            if node:
                attrs[NODE] = str(node)
            attrs.update(self._content({"aworld_graph.interrupt.value": content.text(value)}))
            span.add_event("aworld_graph.human.interrupt", attrs)
        if response.status in ("error", "max_steps", "busy"):
            message = str(strip_secrets(str(response.msg or response.status)))
            found = _ERROR_NAME.match(message)
            kind = {"max_steps": "max_steps", "busy": "ThreadBusy"}.get(response.status)
            span.set_attribute(ERROR_TYPE, kind or (found.group(1) if found else OTHER_ERROR))
            span.set_status(Status(StatusCode.ERROR, message[:500]))

    def checkpoint_saved(self, chunk: CheckpointPayload[dict[str, Any]]) -> None:
        run = _RUN.get()
        if run is None:
            return
        checkpoint_id = str(((chunk["config"] or {}).get("configurable") or {})["checkpoint_id"])
        step = int(chunk["metadata"].get("step", -1))
        parent = ((chunk["parent_config"] or {}).get("configurable") or {}).get("checkpoint_id")
        first = run.last is None
        run.last = (step, checkpoint_id)
        if first and parent:  # a continued run first re-emits the checkpoint it starts from
            run.started_from = checkpoint_id
            return
        attrs: dict[str, Any] = {CHECKPOINT: checkpoint_id, STEP: step}
        if parent:
            attrs[PARENT_CHECKPOINT] = str(parent)
        run.span.add_event("aworld_graph.checkpoint", attrs)

    async def agent_step(self, kind: str, fn: Any, runtime: Any, state: Any, config: Any) -> Any:
        attrs = {
            OPERATION: "invoke_agent",
            AGENT_NAME: runtime.name,
            **_join(config),
            NODE: runtime.name if kind == "llm" else runtime.tools_node,
            "aworld_graph.node.kind": "agent" if kind == "llm" else "tools",
        }
        with self._span(f"invoke_agent {runtime.name}", attrs) as span:
            update = await fn(runtime, state, config)
            record = _first(update.get("trace"))
            if record.get("turn"):
                span.set_attribute("aworld_graph.turn", str(record["turn"]))
            if update.get("status") == "max_steps":
                span.set_attribute("aworld_graph.status", "max_steps")
            if kind == "tools" and update.get("active_agent"):
                span.set_attribute("aworld_graph.handoff.target", str(update["active_agent"]))
            return update

    async def model_call(
        self,
        model: Any,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        kwargs: dict[str, Any],
    ) -> Any:
        name = str(getattr(model, "name", "") or type(model).__name__)
        provider = _provider_name(model)
        attrs: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: provider,
            "gen_ai.request.model": name,
            **_join(_running_config()),
            **_request(model),
            **_server(model, provider == "openai"),
        }
        if self.capture_content:
            system = content.system_instructions(messages)
            if system is not None:
                attrs["gen_ai.system_instructions"] = system
            attrs["gen_ai.input.messages"] = content.input_messages(messages)
            if tools:
                attrs["gen_ai.tool.definitions"] = content.as_json(list(tools))
        with self._span(f"chat {name}", attrs, SpanKind.CLIENT) as span:
            response = await model.complete(messages, tools, **kwargs)
            if "server.address" not in attrs:
                span.set_attributes(_server(model, False))
            raw = response.raw if isinstance(response.raw, dict) else {}
            done: dict[str, Any] = {
                "gen_ai.response.model": response.model or name,
                "gen_ai.response.finish_reasons": [str(response.finish_reason or "")],
                "gen_ai.usage.input_tokens": response.usage.prompt_tokens,
                "gen_ai.usage.output_tokens": response.usage.completion_tokens,
            }
            if isinstance(raw.get("id"), str):
                done["gen_ai.response.id"] = raw["id"]
            if self.capture_content:
                done["gen_ai.output.messages"] = content.output_messages(response)
            span.set_attributes(done)
            return response

    async def tool_call(
        self, fn: Any, runtime: Any, tc: dict[str, Any], messages: Any, exclude: Any, config: Any
    ) -> Any:
        called = str((tc.get("function") or {}).get("name") or "")
        server, tool = _resolve(runtime, called)
        graph_tool = runtime.graph_tools.get(called)
        attrs: dict[str, Any] = {
            OPERATION: "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.type": "extension" if server else "function",
            "aworld_graph.agent": runtime.name,
            **_join(config),
        }
        if tc.get("id"):
            attrs["gen_ai.tool.call.id"] = str(tc["id"])
        if server:
            attrs["aworld_graph.tool.server"] = server
        if tool != called:
            attrs["aworld_graph.tool.called_as"] = called
        if graph_tool is not None:
            attrs["aworld_graph.tool.kind"] = graph_tool.kind
        if self.capture_content:
            raw = (tc.get("function") or {}).get("arguments") or ""
            attrs["gen_ai.tool.call.arguments"] = content.text(raw)
        with self._span(f"execute_tool {tool}", attrs) as span:
            result = await fn(runtime, tc, messages, exclude, config)
            _tool_outcome(span, result, called, server)
            if self.capture_content:
                span.set_attribute("gen_ai.tool.call.result", content.text(result.get("content")))
            return result

    async def critic_step(self, fn: Any, critic: Any, state: Any, config: Any) -> Any:
        attrs = {
            OPERATION: "evaluate",
            AGENT_NAME: critic.name,
            "gen_ai.evaluation.name": critic.name,
            "aworld_graph.evaluation.judged": critic.judged_name,
            "aworld_graph.evaluation.threshold": float(critic.threshold),
            **_join(config),
            "aworld_graph.node.kind": "critic",
        }
        with self._span(f"evaluate {critic.name}", attrs) as span:
            update = await fn(critic, state, config)
            reward = _first(update.get("rewards"))
            verdict: dict[str, Any] = {"gen_ai.evaluation.name": critic.name}
            if isinstance(reward.get("score"), (int, float)):
                verdict["gen_ai.evaluation.score.value"] = float(reward["score"])
            if reward.get("status"):
                verdict["gen_ai.evaluation.score.label"] = str(reward["status"])
            if self.capture_content and reward.get("feedback"):
                verdict["gen_ai.evaluation.explanation"] = content.text(reward["feedback"])
            span.set_attributes(verdict)
            if isinstance(reward.get("round"), int):
                span.set_attribute("aworld_graph.evaluation.round", reward["round"])
            span.add_event("gen_ai.evaluation.result", verdict)
            return update


def _resolve(runtime: Any, called: str) -> tuple[str | None, str]:
    """``(server, tool)``: the MCP server and its own name for a tool the model called."""
    if called in runtime.local_tools or called in runtime.graph_tools:
        return None, called
    resolve = getattr(getattr(runtime.provider, "mcpservers", None), "resolve", None)
    found = resolve(called) if callable(resolve) else None
    if isinstance(found, tuple) and len(found) == 2:
        return str(found[0]), str(found[1])
    return None, called


def _tool_outcome(span: Any, result: dict[str, Any], called: str, server: str | None) -> None:
    ran_on = result.get("server")
    if ran_on and not server:
        span.set_attributes(
            {"aworld_graph.tool.server": str(ran_on), "gen_ai.tool.type": "extension"}
        )
        prefix = f"{ran_on}__"
        if called.startswith(prefix):
            tool = called[len(prefix) :]
            span.update_name(f"execute_tool {tool}")
            span.set_attributes({"gen_ai.tool.name": tool, "aworld_graph.tool.called_as": called})
    if result.get("repeated"):
        span.set_attribute("aworld_graph.tool.repeated", True)
    if result.get("handoff"):
        span.set_attribute("aworld_graph.handoff.target", str(result["handoff"]))
    if result.get("delegate"):
        span.set_attribute("aworld_graph.delegate.target", str(result["delegate"]))
        if result.get("thread_id"):
            span.set_attribute("aworld_graph.delegate.thread_id", str(result["thread_id"]))
    if result.get("is_error"):
        detail = result.get("result")
        kind = detail.get("error_type") if isinstance(detail, dict) else None
        span.set_attribute(ERROR_TYPE, str(kind or "tool_error"))
        span.set_status(Status(StatusCode.ERROR, f"tool {called!r} failed"))
