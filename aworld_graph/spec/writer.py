"""A :class:`Swarm` back to YAML: ``swarm_to_yaml`` (one file) and ``dump_workflow`` (files).

Loading what these write gives the same swarm again: the same nodes (with their cards), the
same topology, the same edges and condition texts. API keys are never written: a key read from
an environment variable is written as that variable's name, any other key is left out.
Python callables are written as ``package.module:function``; a lambda or a local function
cannot be, and raises :class:`~aworld_graph.errors.DefinitionError` naming it.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from ..agent import Agent
from ..config import AgentConfig
from ..errors import DefinitionError
from ..swarm import GraphBuildType, Swarm
from ..swarm.nodes import Critic, Human, Node
from ..swarm.remote import RemoteAgent
from ._registry import BUILTIN_SCORERS, BUILTIN_TOOLS, ref_of

__all__ = ["card_to_dict", "dump_workflow", "swarm_to_dict", "swarm_to_yaml"]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
_DEFAULT_PROMPT = Agent.__dataclass_fields__["system_prompt"].default
_DEFAULT_HUMAN_PROMPT = Human.__dataclass_fields__["prompt"].default


def swarm_to_yaml(swarm: Swarm, *, schema_hint: str | None = None) -> str:
    """The swarm as one self-contained workflow file (every node inline)."""
    text = _dump(swarm_to_dict(swarm))
    return f"# yaml-language-server: $schema={schema_hint}\n{text}" if schema_hint else text


def dump_workflow(swarm: Swarm, path_or_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``swarm`` as YAML; return the files written.

    A path ending in ``.yaml``/``.yml`` gets one self-contained file. A directory gets the
    project layout: ``workflows/<name>.yaml`` referring by name to one card per node in
    ``nodes/`` (nested swarms stay inline).
    """
    target = Path(path_or_dir)
    if target.suffix in (".yaml", ".yml"):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            swarm_to_yaml(swarm, schema_hint=_hint("workflow", target.parent)), encoding="utf-8"
        )
        return [target]
    workflows, nodes = target / "workflows", target / "nodes"
    workflows.mkdir(parents=True, exist_ok=True)
    nodes.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    cards = swarm.info.get("cards") or {}
    data = swarm_to_dict(swarm, base=workflows)
    for i, (name, node) in enumerate(swarm.nodes.items()):
        if isinstance(node, Swarm):
            continue
        origin = (cards.get(name) or {}).get("card")
        file = nodes / (Path(origin).name if origin else f"{_slug(name)}.yaml")
        card = card_to_dict(node, cards.get(name), base=nodes)
        file.write_text(
            f"# yaml-language-server: $schema={_hint('node', nodes)}\n{_dump(card)}",
            encoding="utf-8",
        )
        written.append(file)
        data["nodes"][i] = name if file.stem == name else {"card": f"../nodes/{file.name}"}
    file = workflows / f"{_slug(swarm.name)}.yaml"
    file.write_text(
        f"# yaml-language-server: $schema={_hint('workflow', workflows)}\n{_dump(data)}",
        encoding="utf-8",
    )
    return [file, *written]


def swarm_to_dict(swarm: Swarm, *, base: Path | None = None) -> dict[str, Any]:
    """The workflow file's content for ``swarm`` (nodes inline)."""
    cards = swarm.info.get("cards") or {}
    shared = _shared_mcp(swarm)
    data: dict[str, Any] = {"name": swarm.name}
    if swarm.description:
        data["description"] = swarm.description
    data["version"] = int(swarm.info.get("workflow_version") or 1)
    data["build_type"] = swarm.build_type.value
    if swarm.build_type is not GraphBuildType.WORKFLOW and swarm.root:
        data["root_agent"] = swarm.root
    if swarm.max_steps is not None:
        data["max_steps"] = swarm.max_steps
    if shared is not None:
        data["mcp_config"] = _mcp_value(shared, base)
    nodes = []
    for name, node in swarm.nodes.items():
        if isinstance(node, Swarm):
            nodes.append({"kind": "workflow", **swarm_to_dict(node, base=base)})
        else:
            nodes.append(card_to_dict(node, cards.get(name), base=base, shared_mcp=shared))
    data["nodes"] = nodes
    if swarm.topology is not None:
        data["topology"] = [_step(item, swarm.build_type) for item in swarm.topology]
    edges = []
    for e in swarm.declared_edges:
        item: dict[str, Any] = {"from": e.source, "to": e.target}
        if e.condition is not None:
            fn = e.condition.fn
            item["when"] = (
                e.condition.text
                if getattr(fn, "__module__", "") == "aworld_graph.swarm.conditions"
                else ref_of(fn, {}, "predicate", f"edge {e.source} -> {e.target}")
            )
        if e.max_rounds is not None:
            item["max_rounds"] = e.max_rounds
        edges.append(item)
    if edges:
        data["edges"] = edges
    return data


def card_to_dict(
    node: Any,
    meta: dict[str, Any] | None = None,
    *,
    base: Path | None = None,
    shared_mcp: Any = None,
) -> dict[str, Any]:
    """A node card for ``node``; ``meta`` holds its version fields (``swarm.info["cards"]``)."""
    meta = meta or {}
    kinds = {Agent: "agent", Critic: "critic", Human: "human", Node: "function"}
    kind = kinds.get(type(node)) or ("remote" if isinstance(node, RemoteAgent) else None)
    if kind is None:
        raise DefinitionError(f"{node!r} cannot be written as a node card")
    data: dict[str, Any] = {
        "kind": kind,
        "name": node.name,
        "version": int(meta.get("version") or 1),
    }
    for key in ("parent", "score", "operator"):
        if meta.get(key) is not None:
            data[key] = meta[key]
    if node.description:
        data["description"] = node.description
    owner = f"{kind} {node.name!r}"
    if isinstance(node, Agent):
        if node.system_prompt != _DEFAULT_PROMPT:
            data["system_prompt"] = node.system_prompt
        if node.tools:
            data["tools"] = [ref_of(t, BUILTIN_TOOLS, "tool", owner) for t in node.tools]
        if node.mcp_config is not None and not (
            shared_mcp is not None
            and node.mcp_servers is not None
            and node.mcp_config == shared_mcp
        ):
            data["mcp_config"] = _mcp_value(node.mcp_config, base)
        if node.mcp_servers is not None:
            data["mcp_servers"] = list(node.mcp_servers)
        _model(data, node.conf, meta)
        if node.max_steps != 10:
            data["max_steps"] = node.max_steps
        if node.tool_choice != "auto":
            data["tool_choice"] = node.tool_choice
        if node.demos:
            data["demos"] = [
                {"input": d["input"], "output": d["output"]}
                | ({"tool_calls": list(d["tool_calls"])} if d.get("tool_calls") else {})
                for d in node.demos
            ]
    elif isinstance(node, Critic):
        data["judges"] = node.judged_name
        if node.scorer is not None:
            data["scorer"] = ref_of(node.scorer, BUILTIN_SCORERS, "scorer", owner)
        else:
            data["system_prompt"] = node.system_prompt
        data["threshold"] = node.threshold
        data["max_rounds"] = node.max_rounds
        _model(data, node.conf, meta)
    elif isinstance(node, Human):
        if node.prompt != _DEFAULT_HUMAN_PROMPT:
            data["prompt"] = node.prompt
    elif isinstance(node, RemoteAgent):
        remote = node.card()
        data |= {k: remote[k] for k in ("url", "protocol", "timeout")}
        data |= {k: remote[k] for k in ("assistant_id", "api_key_env") if remote[k]}
    else:
        data["function"] = ref_of(node.fn, {}, "function", owner)
    return data


def _model(data: dict[str, Any], conf: AgentConfig | None, meta: dict[str, Any]) -> None:
    if conf is None:
        return
    model: dict[str, Any] = {k: v for k, v in conf.public().items() if v is not None}
    if meta.get("llm_api_key_env"):
        model["llm_api_key_env"] = meta["llm_api_key_env"]  # the key itself: never
    if conf.max_retries != 3:
        model["max_retries"] = conf.max_retries
    if conf.timeout != 120.0:
        model["timeout"] = conf.timeout
    if conf.params:
        model["params"] = dict(conf.params)
    if conf.record_tokens:
        model["record_tokens"] = True
    data["model"] = model


def _shared_mcp(swarm: Swarm) -> Any:
    """The MCP config most agents that name servers use (written once, at the top)."""
    configs = [
        n.mcp_config
        for n in swarm.nodes.values()
        if isinstance(n, Agent) and n.mcp_config is not None and n.mcp_servers is not None
    ]
    if not configs:
        return None
    counts = Counter(repr(c) for c in configs)
    best = counts.most_common(1)[0][0]
    return next(c for c in configs if repr(c) == best)


def _mcp_value(value: Any, base: Path | None) -> Any:
    if isinstance(value, str | os.PathLike) and base is not None and os.path.isabs(value):
        return os.path.relpath(value, base)
    return str(value) if isinstance(value, os.PathLike) else value


def _step(item: Any, build_type: GraphBuildType) -> Any:
    if build_type is not GraphBuildType.WORKFLOW and isinstance(item, tuple) and len(item) == 2:
        return f"{_name(item[0])} -> {_name(item[1])}"
    if isinstance(item, tuple):
        return {"serial": [_step(i, build_type) for i in item]}
    if isinstance(item, list):
        return {"parallel": [_step(i, build_type) for i in item]}
    return _name(item)


def _name(item: Any) -> str:
    return item if isinstance(item, str) else str(item.name)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "node"


def _hint(kind: str, directory: Path) -> str:
    schema = SCHEMA_DIR / f"{kind}.schema.json"
    relative = os.path.relpath(schema, directory.resolve())
    return relative if relative.count("..") <= 2 else schema.as_uri()


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.Node:
    flow = all(isinstance(v, str | int | float) and "\n" not in str(v) for v in value) and (
        sum(len(str(v)) + 2 for v in value) < 60
    )
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(list, _list)


def _dump(data: dict[str, Any]) -> str:
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=100,
        default_flow_style=False,
    )
