"""Tasks as specs: what a Ray worker needs to rebuild a task, as plain JSON data.

A task's agent or swarm travels as one of three source specs, tried in this order:

* ``{"kind": "ref", "ref": "package.module:attr"}`` – the very object is a top-level
  attribute of an importable module; the worker imports the module and takes the attribute
  (module-level code runs again there, so a ``FunctionModel`` built in it is rebuilt too);
* ``{"kind": "data", ...}`` – a meta-learning candidate: its workflow as data and the
  references of the model objects it was materialized with (see :func:`remember`);
* ``{"kind": "file", "path", "versions"}`` – a swarm loaded from a workflow file with no model
  objects set on it, wherever it was loaded (the script being run included); the worker loads
  the same file and checks the workflow and card versions.

Anything else (defined in ``__main__``, built inside a function, a model object set by hand)
cannot be rebuilt on another process: :func:`task_spec` raises a :class:`DefinitionError`
naming the fix before anything is sent. Live agents, models, sockets and MCP clients never
travel.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import sys
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..config import TaskConfig, TaskRunMode
from ..errors import DefinitionError
from ..swarm.graph import GraphSource, SingleAgent
from ..task import Task

__all__ = ["remember", "source_of", "task_of", "task_spec"]

_refs: weakref.WeakKeyDictionary[Any, tuple[str | None, bool]] = weakref.WeakKeyDictionary()
_recipes: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()

_FIX = (
    "define it at the top level of an importable module and run it as MODULE:ATTR, or load it "
    "from a YAML workflow file (aworld_graph.load_workflow)"
)


def remember(
    swarm: GraphSource,
    spec: Mapping[str, Any],
    *,
    model: Any = None,
    models: Mapping[str, Any] | None = None,
    pool: Mapping[str, Any] | None = None,
    info: Mapping[str, Any] | None = None,
) -> None:
    """Record that ``swarm`` is ``materialize(spec, model=…, models=…, pool=…, info=…)`` so a
    worker can build it again from that data (the model objects by their module references)."""
    _recipes[swarm] = {
        "spec": json.loads(json.dumps(dict(spec))),
        "model": model,
        "models": dict(models or {}),
        "pool": dict(pool or {}),
        "info": dict(info or {}),
    }


def _find(obj: Any) -> tuple[str | None, bool]:
    """``("module:attr", _)`` of a module attribute holding ``obj``; the flag says whether
    only ``__main__`` holds it."""
    try:
        return _refs[obj]
    except (KeyError, TypeError):
        pass
    found: str | None = None
    in_main = False
    main = sys.modules.get("__main__")
    for name, module in list(sys.modules.items()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        attr = next((k for k, v in list(namespace.items()) if v is obj), None)
        if attr is None:
            continue
        if name == "__main__" or module is main:  # the script being run (under any name)
            in_main = True
            continue
        if getattr(module, "__spec__", None) is None:  # made at run time: nothing to import
            continue
        found = f"{name}:{attr}"
        break
    result = (found, in_main and found is None)
    try:
        _refs[obj] = result
    except TypeError:
        pass
    return result


def _ref(obj: Any, what: str) -> str:
    ref, in_main = _find(obj)
    if ref is not None:
        return ref
    where = (
        "it is defined in __main__ (the script being run), which a worker process does not run"
        if in_main
        else "it is not a top-level attribute of any importable module (built inside a "
        "function, a lambda or a closure?)"
    )
    raise DefinitionError(f"{what} cannot be rebuilt on a Ray worker: {where}; {_FIX}")


def _model_objects(swarm: Any) -> list[str]:
    """Names of the nodes (nested swarms included) that carry a model object."""
    names: list[str] = []
    for name, node in (getattr(swarm, "nodes", None) or {}).items():
        if getattr(node, "nodes", None) is not None:
            names += _model_objects(node)
        elif getattr(node, "model", None) is not None:
            names.append(name)
    return names


def source_spec(obj: Any) -> dict[str, Any]:
    """The source spec of an agent or swarm (see the module docstring)."""
    if isinstance(obj, SingleAgent):  # a lone agent travels as the agent itself
        obj = obj.agent
    what = f"{type(obj).__name__} {getattr(obj, 'name', obj)!r}"
    ref, _ = _find(obj)
    if ref is not None:
        return {"kind": "ref", "ref": ref}
    recipe = _recipes.get(obj) if not isinstance(obj, Agent) else None
    if recipe is not None:
        return {
            "kind": "data",
            "spec": recipe["spec"],
            "model": None if recipe["model"] is None else _ref(recipe["model"], f"{what}'s model"),
            "models": {k: _ref(m, f"{what}'s model {k!r}") for k, m in recipe["models"].items()},
            "pool": {k: _ref(m, f"{what}'s model {k!r}") for k, m in recipe["pool"].items()},
            "info": json.loads(json.dumps(recipe["info"], default=str)),
        }
    info = getattr(obj, "info", None) or {}
    if info.get("workflow"):  # wherever it was loaded, __main__ included
        with_models = _model_objects(obj)
        if with_models:
            raise DefinitionError(
                f"{what} was loaded from {info['workflow']} and then given model objects "
                f"(nodes {', '.join(map(repr, with_models))}), which the file does not name, so "
                f"a Ray worker cannot rebuild it; {_FIX} (the model too, e.g. a module-level "
                "swarm = load_workflow(path, model=...)), or configure the model in the file"
            )
        cards = info.get("cards") or {}
        return {
            "kind": "file",
            "path": str(Path(info["workflow"]).resolve()),
            "versions": {
                "workflow": info.get("workflow_version"),
                "cards": {k: m.get("version") for k, m in sorted(cards.items())},
            },
        }
    return {"kind": "ref", "ref": _ref(obj, what)}


def task_spec(task: Task, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """``task`` as plain data (``source``: its source spec when already made)."""
    conf = dataclasses.asdict(task.conf)
    conf["run_mode"] = str(task.conf.run_mode)
    spec = {
        "source": source or source_spec(task.source),
        "agent": isinstance(task.source, SingleAgent),
        "id": task.id,
        "input": task.input,
        "session_id": task.session_id,
        "name": task.name,
        "conf": conf,
        "metadata": task.metadata,
        "new": task.new_thread,
    }
    try:
        plain: dict[str, Any] = json.loads(json.dumps(spec))
        return plain
    except (TypeError, ValueError) as exc:
        raise DefinitionError(
            f"task {task.id}: its conf.ext or metadata is not plain JSON data ({exc}), so it "
            "cannot be sent to a Ray worker; keep strings, numbers, lists and dicts there"
        ) from None


def _import(ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise DefinitionError(
            f"{ref}: module {module_name!r} cannot be imported on this worker; install the "
            "package there or ship it with RunConfig(runtime_env={'py_modules': [...]})"
        )
    return getattr(importlib.import_module(module_name), attr)


_built_sources: dict[str, Any] = {}


def source_of(spec: dict[str, Any]) -> Any:
    """The agent or swarm of a source spec (built once per process)."""
    key = json.dumps(spec, sort_keys=True)
    if key in _built_sources:
        return _built_sources[key]
    if spec["kind"] == "ref":
        obj = _import(spec["ref"])
    elif spec["kind"] == "file":
        from ..spec import load_workflow

        obj = load_workflow(spec["path"])
        info = obj.info
        found = {
            "workflow": info.get("workflow_version"),
            "cards": {k: m.get("version") for k, m in sorted((info.get("cards") or {}).items())},
        }
        if found != spec["versions"]:
            raise DefinitionError(
                f"{spec['path']} on this worker is not the version the driver loaded "
                f"({found} here, {spec['versions']} there); deploy the same files to every "
                "machine (or ship them with RunConfig(runtime_env={'working_dir': ...}))"
            )
    else:
        from ..meta.candidates import materialize

        obj = materialize(
            spec["spec"],
            model=None if spec["model"] is None else _import(spec["model"]),
            models={k: _import(r) for k, r in spec["models"].items()},
            pool={k: _import(r) for k, r in spec["pool"].items()},
            info=spec["info"],
        )
    _built_sources[key] = obj
    return obj


def task_of(spec: dict[str, Any]) -> Task:
    """The task a :func:`task_spec` describes, rebuilt in this process."""
    obj = source_of(spec["source"])
    conf = dict(spec["conf"])
    conf["run_mode"] = TaskRunMode(conf["run_mode"])
    return Task(
        input=spec["input"],
        agent=obj if spec["agent"] else None,
        swarm=None if spec["agent"] else obj,
        id=spec["id"],
        session_id=spec["session_id"],
        name=spec["name"],
        conf=TaskConfig(**conf),
        metadata=dict(spec["metadata"]),
        new_thread=bool(spec["new"]),
    )
