"""Serving any LangGraph application: loading a graph by ``MODULE:ATTR`` or
``./path/file.py:ATTR``, reading a project's ``langgraph.json`` as ``langgraph dev`` does,
an application's JSON schemas and subgraphs as LangGraph's server gives them, and its
chat-model messages as the ``messages`` stream mode's parts.

A graph is a compiled graph (``CompiledStateGraph`` or any ``Pregel``), an uncompiled
``StateGraph`` or a factory (a function returning one, called with the run's config when it
takes an argument); an ``Agent`` or a ``Swarm`` of this library is served as before. Every
problem is one :class:`~aworld_graph.errors.ConfigError` line naming the file, the field and
the fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message
from langgraph.graph import END, StateGraph
from langgraph.pregel import Pregel
from langgraph.types import Command, Send

from ..agent import Agent
from ..errors import ConfigError, DefinitionError
from ..run import GraphSource, LangGraphApp, as_source
from ..secrets import register_secret
from ..swarm import Swarm
from ._wire import ApiError

__all__ = [
    "CONFIG_FILE",
    "MessageParts",
    "Project",
    "app_command",
    "check_steering",
    "ends",
    "steers",
    "graph_schemas",
    "load_graph",
    "read_project",
    "source_of",
]

CONFIG_FILE = "langgraph.json"
"""The project file ``aworld-graph serve`` reads when it is given no target."""

_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*?)\s*$")


def _import_file(path: Path, where: str) -> Any:
    """The module in Python file ``path``, imported under a name of its own (as LangGraph's
    server imports a graph file)."""
    name = "_aworld_graph_app_" + re.sub(r"\W", "_", str(path.resolve()).lstrip("/"))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{where}: cannot load {path} as Python; point at a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        raise ConfigError(
            f"{where}: importing {path} failed: {type(exc).__name__}: {exc}; fix the file or "
            "install what it imports"
        ) from None
    return module


def load_graph(spec: str, *, where: str, base: Path | None = None) -> Any:
    """The object ``spec`` names: ``MODULE:ATTR`` (imported from ``sys.path``) or
    ``PATH.py:ATTR`` (a file, relative to ``base`` or the current folder). ``where`` starts
    each error line (the file and field, or the command-line target)."""
    location, sep, attr = spec.rpartition(":")
    if not sep or not location or not attr:
        raise ConfigError(
            f"{where}: {spec!r} names no graph; write it as 'module.path:attr' or "
            "'./path/file.py:attr'"
        )
    if location.endswith(".py") or "/" in location or os.sep in location:
        path = Path(location)
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if not path.is_file():
            raise ConfigError(
                f"{where}: no file {path} (from {spec!r}); fix the path (relative to "
                f"{base or Path.cwd()})"
            )
        module = _import_file(path, where)
        named = str(path)
    else:
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(location)
        except ImportError as exc:
            raise ConfigError(
                f"{where}: cannot import module {location!r} ({exc}); check the name, "
                "PYTHONPATH, or the project's dependencies"
            ) from None
        except Exception as exc:
            raise ConfigError(
                f"{where}: importing module {location!r} failed: {type(exc).__name__}: {exc}; "
                "fix the module"
            ) from None
        named = f"module {location!r}"
    try:
        return getattr(module, attr)
    except AttributeError:
        graphs = [k for k, v in vars(module).items() if isinstance(v, (Pregel, StateGraph))]
        hint = f" (graphs there: {', '.join(sorted(graphs))})" if graphs else ""
        raise ConfigError(f"{where}: {named} has no attribute {attr!r}{hint}") from None


def source_of(obj: Any, *, name: str, where: str) -> GraphSource:
    """``obj`` as what a server serves: an ``Agent`` or ``Swarm`` as before; a LangGraph
    graph (compiled, a ``StateGraph``, or a factory function) as a :class:`LangGraphApp`
    named ``name``."""
    if isinstance(obj, (Agent, Swarm)):
        return as_source(obj)
    try:
        return LangGraphApp(obj, name=name)
    except DefinitionError as exc:
        if isinstance(obj, (Pregel, StateGraph)) or not callable(obj):
            raise ConfigError(
                f"{where}: the value there is of type {type(obj).__name__}, not a graph; point "
                "at a compiled graph, a StateGraph, a function returning one, or an "
                "aworld-graph Agent or Swarm"
            ) from None
        raise ConfigError(f"{where}: {exc}") from None


@dataclass
class Project:
    """A ``langgraph.json``: its graphs, environment and dependencies."""

    path: Path
    """The file."""
    graphs: dict[str, str]
    """Graph id → ``MODULE:ATTR`` or ``./path/file.py:ATTR``."""
    descriptions: dict[str, str] = field(default_factory=dict)
    """Graph id → its description, when the file gives one."""
    env: dict[str, str] = field(default_factory=dict)
    """The environment it sets (values are never shown)."""
    dependencies: list[Path] = field(default_factory=list)
    """Folders added to ``sys.path``."""

    @property
    def base(self) -> Path:
        """The folder paths in the file are relative to."""
        return self.path.parent

    def apply(self) -> None:
        """Set the environment and put the dependency folders (and the file's own folder) on
        ``sys.path``, as ``langgraph dev`` does before it imports the graphs. A value under a
        secret-looking name, or token-shaped, is registered as a secret: scrubbed wherever it
        would show."""
        for key, value in self.env.items():
            register_secret(value, key)
        os.environ.update(self.env)
        for folder in [self.base, *self.dependencies]:
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))

    def sources(self) -> Iterator[tuple[str, str, GraphSource]]:
        """``(graph id, spec, source)`` for each graph, loaded (after :meth:`apply`)."""
        for graph_id, spec in self.graphs.items():
            where = f'{self.path}: field "graphs.{graph_id}"'
            obj = load_graph(spec, where=where, base=self.base)
            yield graph_id, spec, source_of(obj, name=graph_id, where=where)


def _read_env_file(path: Path, where: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and quotes allowed, ``#`` comments), as a ``.env``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot read {path} ({exc.strerror or exc}); fix the path (relative to "
            f"{path.parent}) or give env as an object"
        ) from None
    values: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ENV_LINE.match(line)
        if match is None:
            raise ConfigError(f"{where}: {path} line {n} is not KEY=VALUE; fix that line")
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def read_project(path: str | os.PathLike[str]) -> Project:
    """The project ``path`` (a ``langgraph.json``) describes, checked: each problem is one
    ConfigError line naming the file, the field and the fix. Nothing is imported yet."""
    file = Path(path)
    if file.is_dir():
        file = file / CONFIG_FILE
    if not file.is_file():
        raise ConfigError(
            f"{file}: no such file; name a langgraph.json with --config, or run in its folder"
        )
    file = file.resolve()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read it ({exc}); check the file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); fix "
            "the JSON"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f'{file}: must be a JSON object like {{"graphs": {{...}}}}')
    graphs = data.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise ConfigError(
            f'{file}: field "graphs" must be an object of graph ids to graph paths, like '
            '{"agent": "./agent.py:graph"}'
        )
    specs: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    for graph_id, value in graphs.items():
        where = f'{file}: field "graphs.{graph_id}"'
        if isinstance(value, dict) and isinstance(value.get("path"), str):
            spec = value["path"]
            if isinstance(value.get("description"), str):
                descriptions[graph_id] = value["description"]
        elif isinstance(value, str):
            spec = value
        else:
            raise ConfigError(
                f"{where} must be a path like './agent.py:graph' or 'module:graph', or an "
                'object with "path"'
            )
        if ":" not in spec:
            raise ConfigError(
                f"{where}: {spec!r} names no graph variable; write it as './file.py:graph' "
                "or 'module:graph'"
            )
        if spec.rpartition(":")[0].endswith((".ts", ".js", ".mts", ".cts", ".tsx", ".jsx")):
            raise ConfigError(f"{where}: {spec!r} is a JavaScript graph; only Python is served")
        specs[str(graph_id)] = spec
    env: dict[str, str] = {}
    raw_env = data.get("env")
    if isinstance(raw_env, str):
        env = _read_env_file(file.parent / raw_env, f'{file}: field "env"')
    elif isinstance(raw_env, dict):
        for key, value in raw_env.items():
            if not isinstance(value, (str, int, float, bool)):
                raise ConfigError(
                    f'{file}: field "env.{key}" must be a string (got '
                    f"{type(value).__name__}); give each variable a text value"
                )
            env[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    elif raw_env is not None:
        raise ConfigError(
            f'{file}: field "env" must be a path to a .env file or an object of variables'
        )
    deps = data.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ConfigError(
            f'{file}: field "dependencies" must be a list of paths (like ["."]) or package names'
        )
    folders = []
    for dep in deps:
        folder = (file.parent / dep).resolve()
        if folder.is_dir():  # a package name (installed with pip) is not a folder
            folders.append(folder)
    return Project(
        path=file, graphs=specs, descriptions=descriptions, env=env, dependencies=folders
    )


# -- schemas -------------------------------------------------------------------------------

_NOT_CONFIGURABLE = (
    *("__pregel_checkpointer", "__pregel_store"),
    *("checkpoint_id", "checkpoint_ns", "thread_id"),
)


def _state_schema(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    """The state as LangGraph's server gives it: one property per channel it streams."""
    from langchain_core.runnables.utils import create_model  # type: ignore[attr-defined]

    fields: dict[str, Any] = {}
    for key in graph.stream_channels_list:
        kind = getattr(graph.channels[key], "UpdateType", Any)
        try:
            create_model(key, __root__=(kind, None)).model_json_schema()
            fields[key] = (kind, None)
        except Exception:  # a type pydantic cannot describe: any value
            fields[key] = (Any, None)
    schema: dict[str, Any] = create_model(graph.get_name("State"), **fields).model_json_schema()
    return schema


def _configurable_schema(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    import warnings

    from pydantic import TypeAdapter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # config_schema is deprecated for context_schema
        model = graph.config_schema()
    fields = getattr(model, "model_fields", None) or {}
    if "configurable" not in fields:
        return {}
    schema: dict[str, Any] = TypeAdapter(fields["configurable"].annotation).json_schema()
    for key in _NOT_CONFIGURABLE:
        schema.get("properties", {}).pop(key, None)
    kind = getattr(graph, "config_type", None)
    if kind is not None and hasattr(kind, "__name__"):
        schema["title"] = kind.__name__
    return schema


def graph_schemas(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    """``input_schema``, ``output_schema``, ``state_schema``, ``config_schema`` and
    ``context_schema`` of a graph, as LangGraph's server gives them (``None`` for one that
    pydantic cannot describe)."""
    makers = {
        "input_schema": graph.get_input_jsonschema,
        "output_schema": graph.get_output_jsonschema,
        "state_schema": lambda: _state_schema(graph),
        "config_schema": lambda: _configurable_schema(graph),
        "context_schema": graph.get_context_jsonschema,
    }
    out: dict[str, Any] = {}
    for name, make in makers.items():
        try:
            out[name] = make()
        except Exception:  # LangGraph's server logs it and answers None
            out[name] = None
    return out


# -- commands ------------------------------------------------------------------------------


def steers(command: Any) -> bool:
    """Whether a run's ``command`` (checked by ``check_command``) updates the state or says
    where to go (more than a ``resume``)."""
    return isinstance(command, Mapping) and any(
        command.get(k) not in (None, [], {}) for k in ("update", "goto")
    )


def ends(command: Any) -> bool:
    """Whether ``command`` is ``{"goto": "__end__"}`` alone (a chat UI's "mark as resolved"):
    a workflow's thread then ends what it waits for, its pending tasks dropped."""
    return (
        isinstance(command, Mapping)
        and command.get("goto") == END
        and command.get("update") in (None, [], {})
        and "resume" not in command
    )


class Steered(Protocol):
    """What :func:`check_steering` reads of an assistant."""

    @property
    def is_app(self) -> bool: ...

    @property
    def graph_id(self) -> str: ...

    def graph(self) -> AbstractAsyncContextManager[Any]: ...


async def check_steering(assistant: Steered, command: Mapping[str, Any]) -> None:
    """A 422 for a ``command`` that :func:`steers` a run of ``assistant`` where it cannot: a
    workflow of this library (it takes ``resume`` only), or a node ``goto`` names or a key
    ``update`` sets that the application's graph does not have (LangGraph would ignore that
    write; a client would never learn it)."""
    if not assistant.is_app:
        if ends(command):
            return
        field = "command.update" if command.get("update") not in (None, [], {}) else "command.goto"
        raise ApiError(
            422,
            "invalid_command",
            f"{field} is served for LangGraph applications; workflow {assistant.graph_id} "
            "takes command={'resume': ...}, or {'goto': '__end__'} alone to end what it waits "
            "for (edit its state with POST /threads/{thread_id}/state)",
        )
    async with assistant.graph() as graph:
        nodes = sorted(n for n in graph.nodes if not n.startswith("__"))
    goto = command.get("goto")
    for item in goto if isinstance(goto, list) else [] if goto is None else [goto]:
        node = item if isinstance(item, str) else str(item["node"])
        if node not in nodes and node != END:  # LangGraph takes END as a goto
            raise ApiError(
                422,
                "invalid_command",
                f"command.goto names node {node!r}, which graph {assistant.graph_id!r} does "
                f"not have; its nodes: {', '.join(nodes)}",
            )
    update = command.get("update")
    keys = [k for k, _ in update] if isinstance(update, list) else list(update or {})
    for key in keys:
        if key not in graph.channels or key.startswith(("__", "branch:")):
            known = sorted(k for k in graph.stream_channels_list if not k.startswith("__"))
            raise ApiError(
                422,
                "invalid_command",
                f"command.update sets {key!r}, which is not a key of graph "
                f"{assistant.graph_id!r}'s state; its keys: {', '.join(known)}",
            )


def app_command(command: Mapping[str, Any]) -> Command[Any]:
    """A run's ``command`` (checked by ``check_command``) as LangGraph's ``Command``, as
    LangGraph's server makes it: ``goto`` a list, each ``{"node", "input"}`` a ``Send``,
    ``update`` pairs as tuples."""
    goto = command.get("goto")
    targets = [
        item if isinstance(item, str) else Send(str(item["node"]), item["input"])
        for item in (goto if isinstance(goto, list) else [] if goto is None else [goto])
    ]
    update = command.get("update")
    if isinstance(update, list):
        update = [(str(key), value) for key, value in update]
    return Command(update=update, goto=targets, resume=command.get("resume"))


# -- messages ------------------------------------------------------------------------------


class MessageParts:
    """An application's ``messages`` stream as LangGraph's server sends it: the ``(message,
    metadata)`` pair itself (``messages-tuple``), and for ``messages`` a
    ``messages/metadata`` part the first time a message id is seen, then the message so far
    (``messages/partial`` while a model streams chunks, ``messages/complete`` for a whole
    message)."""

    def __init__(self) -> None:
        self.seen: dict[str, BaseMessage] = {}

    def parts(self, message: Any, metadata: Mapping[str, Any]) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = [("messages-tuple", [message, dict(metadata)])]
        if not isinstance(message, BaseMessage):
            return out
        ident = str(message.id)
        if ident in self.seen:
            before = self.seen[ident]
            both = isinstance(before, BaseMessageChunk) and isinstance(message, BaseMessageChunk)
            self.seen[ident] = cast(BaseMessage, before + message) if both else message
        else:
            self.seen[ident] = message
            out.append(("messages/metadata", {ident: {"metadata": dict(metadata)}}))
        whole = self.seen[ident]
        if isinstance(message, BaseMessageChunk):
            out.append(("messages/partial", [whole]))
        else:
            out.append(("messages/complete", [message_chunk_to_message(whole)]))
        return out
