"""OpenTelemetry spans for runs, in the GenAI semantic conventions, joined to the trajectory.

Tracing is off until :func:`configure` is called; while it is off this module imports
nothing of OpenTelemetry and each hook below is one ``None`` check. Once on, every run is
one span tree::

    invoke_workflow {swarm}           (invoke_agent {agent} for a lone agent)
      invoke_agent {agent}            one per agent superstep: its LLM call, or its tool calls
        chat {model}                  the model call (kind CLIENT)
        execute_tool {tool}           each tool call (a delegation's sub-run nests under it)
      evaluate {critic}               a critic's verdict (gen_ai.evaluation.*)

Every span carries ``aworld_graph.thread_id``, ``aworld_graph.step`` and
``aworld_graph.parent_checkpoint_id``: the ``trajectory`` row a step produced – or, for a
failed step, its error row – is the one with the same ``thread_id``, ``step`` and
``parent_checkpoint_id``. The run span also lists every checkpoint it saved as an
``aworld_graph.checkpoint`` event, and ends with the run's last ``aworld_graph.checkpoint_id``.
See ``docs/tracing.md``.

The hooks (:func:`traced_run`, :func:`agent_step`, :func:`tool_call`, :func:`critic_step`,
:func:`model_call`, :func:`checkpoint_saved`, :func:`new_context`) are what the runner and
the nodes call; applications use :func:`configure`, :func:`disable`, and :func:`inject` /
:func:`extract` / :func:`attached` to carry a trace across processes.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from langgraph.types import CheckpointPayload

    from ._otel import Tracing

__all__ = [
    "attached",
    "capturing_content",
    "configure",
    "disable",
    "enabled",
    "extract",
    "inject",
]

_tracing: Tracing | None = None
"""The active tracing set-up; ``None`` while tracing is off."""

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def configure(tracer_provider: Any = None, capture_content: bool = False) -> None:
    """Turn tracing on for this process.

    ``tracer_provider``: an OpenTelemetry ``TracerProvider``; without one the global provider
    is used, and when none has been set and the ``otel`` extra (the SDK and the OTLP/HTTP
    exporter) is installed, one is set up from the standard ``OTEL_*`` environment
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_TRACES_EXPORTER``…).
    ``capture_content``: also record prompts, completions, tool arguments and results,
    critics' explanations and human input (secrets stripped even then).

    Without OpenTelemetry installed this is a no-op. Calling it again replaces the set-up.
    """
    global _tracing
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError:  # OpenTelemetry is not installed: tracing stays off
        _tracing = None
        return
    from ._otel import Tracing

    _tracing = Tracing(tracer_provider, capture_content=capture_content)


def disable() -> None:
    """Turn tracing off again (the provider is left as it is)."""
    global _tracing
    _tracing = None


def enabled() -> bool:
    """Whether :func:`configure` turned tracing on."""
    return _tracing is not None


def capturing_content() -> bool:
    """Whether spans record content (``configure(capture_content=True)``)."""
    return _tracing is not None and _tracing.capture_content


# -- carrying a trace to another process (Ray workers) ------------------------------------------


def inject() -> dict[str, str]:
    """The current trace context as a W3C ``traceparent`` (and ``tracestate``) carrier.

    Send it along with a task to another process; there, ``with attached(extract(carrier)):``
    makes the spans of the task children of the sender's span. ``{}`` while tracing is off.
    """
    if _tracing is None:
        return {}
    return _tracing.inject()


def extract(carrier: Mapping[str, str] | None) -> Any:
    """The trace context in a carrier made by :func:`inject` (``None`` when there is none,
    or while tracing is off)."""
    if _tracing is None or not carrier:
        return None
    return _tracing.extract(carrier)


@contextmanager
def attached(context: Any) -> Iterator[None]:
    """Run the block under ``context`` (from :func:`extract`); ``None`` changes nothing."""
    if _tracing is None or context is None:
        yield
        return
    with _tracing.attached(context):
        yield


# -- hooks for the runner and the nodes ----------------------------------------------------------


def new_context() -> contextvars.Context:
    """An empty ``contextvars.Context`` for a sub-run that carries only the current trace
    context, so a delegated member's or nested swarm's run joins its parent's trace."""
    if _tracing is None:
        return contextvars.Context()
    return _tracing.new_context()


def traced_run(fn: F) -> F:
    """Decorate the run loop's ``_drive`` (parameters ``task``, ``graph``, ``resume``…): the
    run becomes the root span ``invoke_workflow {name}`` (``invoke_agent`` for an agent)."""

    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        if _tracing is None:
            return await fn(*args, **kwargs)
        return await _tracing.run(fn, args, kwargs)

    return cast(F, run)  # a wrapper with fn's parameters and result


def checkpoint_saved(chunk: CheckpointPayload[dict[str, Any]]) -> None:
    """The run saw a checkpoint saved (a ``checkpoints`` stream chunk, as in a
    :class:`~aworld_graph.run.State` event): an event on the run span mapping its step to its
    checkpoint id."""
    if _tracing is not None:
        _tracing.checkpoint_saved(chunk)


def agent_step(kind: str) -> Callable[[F], F]:
    """Decorate ``AgentRuntime.llm_node`` (``kind="llm"``) or ``tools_node_fn``
    (``kind="tools"``): the superstep becomes an ``invoke_agent {agent}`` span."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        async def node(self: Any, state: Any, config: Any) -> Any:
            if _tracing is None:
                return await fn(self, state, config)
            return await _tracing.agent_step(kind, fn, self, state, config)

        return cast(F, node)  # a wrapper with fn's parameters and result

    return decorate


def tool_call(fn: F) -> F:
    """Decorate ``AgentRuntime._run_call(tc, messages, exclude, config)``: each tool call
    becomes an ``execute_tool {tool}`` span."""

    @functools.wraps(fn)
    async def call(self: Any, tc: Any, messages: Any, exclude: Any, config: Any) -> Any:
        if _tracing is None:
            return await fn(self, tc, messages, exclude, config)
        return await _tracing.tool_call(fn, self, tc, messages, exclude, config)

    return cast(F, call)  # a wrapper with fn's parameters and result


def critic_step(fn: F) -> F:
    """Decorate ``Critic.node``: the verdict becomes an ``evaluate {critic}`` span with the
    ``gen_ai.evaluation.*`` attributes and a ``gen_ai.evaluation.result`` event."""

    @functools.wraps(fn)
    async def node(self: Any, state: Any, config: Any) -> Any:
        if _tracing is None:
            return await fn(self, state, config)
        return await _tracing.critic_step(fn, self, state, config)

    return cast(F, node)  # a wrapper with fn's parameters and result


async def model_call(
    model: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[dict[str, Any]] | None = None,
    **kwargs: Any,
) -> Any:
    """``await model.complete(messages, tools, **kwargs)`` inside a ``chat {model}`` span."""
    if _tracing is None:
        return await model.complete(messages, tools, **kwargs)
    return await _tracing.model_call(model, messages, tools, kwargs)
