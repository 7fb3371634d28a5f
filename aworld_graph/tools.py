"""Tools an agent can call: Python functions (``@tool``) and the seam for environments (MCP).

Every tool reaches the model as an OpenAI function schema and is called by name with a JSON
object of arguments. Arguments are validated before the call; a validation error, a raised
:class:`~aworld_graph.errors.ModelRetry` or any other exception becomes a tool message the
model can read, and is recorded in the trajectory – never a crash of the run.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, get_type_hints, overload, runtime_checkable

import pydantic

from .errors import DefinitionError, ModelRetry

__all__ = [
    "Tool",
    "ToolOutcome",
    "ToolProvider",
    "ToolSpec",
    "tool",
    "MAX_TOOL_TEXT",
    "truncate_for_model",
]

MAX_TOOL_TEXT = 8_000
"""Tool results longer than this many characters are truncated for the model (kept whole in
the trajectory)."""


@dataclass(kw_only=True, frozen=True)
class ToolSpec:
    """What the model sees of a tool."""

    name: str
    """Name the model calls; unique within one agent (MCP tools are ``server__tool``)."""
    description: str = ""
    """One paragraph telling the model what the tool does."""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""

    def openai(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools=[...]`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(kw_only=True)
class ToolOutcome:
    """The result of one tool call, as recorded in the trajectory."""

    content: str
    """Text handed back to the model (already truncated if long)."""
    is_error: bool = False
    """True when the call failed (validation, exception, timeout, dead server)."""
    result: Any = None
    """The whole result, JSON-compatible, kept in the trajectory."""
    server: str | None = None
    """MCP server that ran the tool, ``None`` for Python tools."""
    duration_ms: float = 0.0
    """Wall time of the call."""


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools that lives outside the graph (an MCP sandbox, a remote registry).

    The agent asks it for tool specs when the run starts and calls tools by the exposed name.
    """

    async def tool_specs(self) -> list[ToolSpec]:
        """The tools offered to the model."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run the tool called ``name`` (as exposed in :meth:`tool_specs`)."""
        ...


def truncate_for_model(text: str, limit: int = MAX_TOOL_TEXT) -> str:
    """Cut ``text`` to ``limit`` characters, saying so, so the model knows it saw a part."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: showing {limit} of {len(text)} characters]"


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return _to_text(value)


@dataclass(kw_only=True)
class Tool:
    """A Python function exposed to the model. Build it with :func:`tool`."""

    name: str
    """Name the model calls."""
    description: str
    """What the tool does (the function's docstring by default)."""
    fn: Callable[..., Any]
    """The function; sync functions run in a worker thread, async ones are awaited."""
    args_model: type[pydantic.BaseModel]
    """Pydantic model built from the signature; validates arguments before the call."""

    @property
    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    async def __call__(self, arguments: dict[str, Any]) -> ToolOutcome:
        """Validate ``arguments`` and run the function; failures become error outcomes."""
        started = time.perf_counter()

        def done(content: str, *, is_error: bool, result: Any = None) -> ToolOutcome:
            return ToolOutcome(
                content=truncate_for_model(content),
                is_error=is_error,
                result=result if result is not None else content,
                duration_ms=(time.perf_counter() - started) * 1000,
            )

        try:
            parsed = self.args_model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors()
            )
            return done(
                f"Invalid arguments for tool '{self.name}': {problems}. "
                f"Call it again with arguments matching its schema.",
                is_error=True,
            )
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await self.fn(**kwargs)
            else:
                value = await asyncio.to_thread(self.fn, **kwargs)
        except ModelRetry as exc:
            return done(exc.message, is_error=True)
        except Exception as exc:  # a tool's failure is the model's to read, not a crash
            return done(f"Tool '{self.name}' failed: {type(exc).__name__}: {exc}", is_error=True)
        return done(_to_text(value), is_error=False, result=_jsonable(value))


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed Python function into a :class:`Tool`.

    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> add.spec.parameters["required"]
    ['a', 'b']
    """

    def wrap(func: Callable[..., Any]) -> Tool:
        return Tool(
            name=name or func.__name__,
            description=description or inspect.getdoc(func) or "",
            fn=func,
            args_model=_args_model(func),
        )

    return wrap(fn) if fn is not None else wrap


def _args_model(func: Callable[..., Any]) -> type[pydantic.BaseModel]:
    signature = inspect.signature(func)
    try:
        hints = get_type_hints(func)
    except Exception as exc:
        raise DefinitionError(
            f"tool {func.__qualname__}: cannot resolve its type hints ({exc}); "
            "import the types it names at module level"
        ) from exc
    fields: dict[str, Any] = {}
    for pname, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise DefinitionError(
                f"tool {func.__qualname__}: *{pname} parameters cannot be described to a model; "
                "list each argument explicitly"
            )
        annotation = hints.get(pname, Any)
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, default)
    return pydantic.create_model(f"{func.__name__}_args", **fields)


def as_tools(items: Sequence[Tool | Callable[..., Any]]) -> list[Tool]:
    """Normalise a mix of :class:`Tool` objects and plain functions into tools."""
    tools: list[Tool] = []
    for item in items:
        if isinstance(item, Tool):
            tools.append(item)
        elif callable(item):
            tools.append(tool(item))
        else:
            raise DefinitionError(
                f"tools: {item!r} is neither a function nor a Tool; pass functions decorated "
                "with @tool, or an MCP config through mcp_config="
            )
    return tools


ToolFn = Callable[[dict[str, Any]], Awaitable[ToolOutcome]]
