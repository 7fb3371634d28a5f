"""Node cards -> node objects: finding card files, resolving tools, scorers, MCP and models."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..agent import Agent
from ..config import AgentConfig
from ..errors import ConfigError, DefinitionError
from ..swarm.nodes import Critic, Human, Node
from ..swarm.remote import RemoteAgent
from ._problems import Problem, did_you_mean
from ._registry import BUILTIN_SCORERS, BUILTIN_TOOLS, ImportProblem, Unchecked, import_ref
from .models import AgentCard, CriticCard, FunctionCard, HumanCard, ModelSettings, RemoteCard
from .source import Path_, Source, YamlTooBig, display_path, parse_yaml

__all__ = ["Context", "build_card", "card_dirs", "find_card", "is_path", "merge_settings"]

_CONF_FIELDS = ("llm_provider", "llm_model_name", "llm_base_url", "llm_temperature")


@dataclass(kw_only=True)
class Context:
    """What a workflow hands down to the cards it uses."""

    mcp_config: dict[str, Any] | str | None = None
    """The workflow's MCP config (a path is already absolute)."""
    mcp_known: list[str] | None = None
    """Server names of that config, when it could be read."""
    defaults: ModelSettings | None = None
    """The workflow's model defaults."""
    problems: list[Problem] = field(default_factory=list)
    """Where problems go."""
    standalone: bool = False
    """Checking a card file alone: the workflow that will supply ``mcp_config`` is unknown."""
    execute: bool = True
    """Import the modules ``module:function`` references name (``False``: check their source)."""


def is_path(ref: str) -> bool:
    """Whether a node reference is a file path rather than a card name."""
    return ref.endswith((".yaml", ".yml")) or "/" in ref or os.sep in ref


def card_dirs(base: Path) -> list[Path]:
    """Where card names are looked up: ``nodes/`` beside the workflow, then one level up."""
    dirs = [base / "nodes", base.parent / "nodes"]
    return [
        d
        for i, d in enumerate(dirs)
        if d.is_dir() and d.resolve() not in [x.resolve() for x in dirs[:i]]
    ]


CardIndex = dict[Path, dict[str, list[Path]]]
"""Card names found in each ``nodes`` directory (each card file parsed once per load)."""


def _names_in(d: Path, index: CardIndex) -> dict[str, list[Path]]:
    key = d.resolve()
    if key not in index:
        named: dict[str, list[Path]] = {}
        for path in sorted(d.glob("*.y*ml")):
            try:
                _, data = parse_yaml(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError, UnicodeDecodeError, YamlTooBig):
                continue
            if isinstance(data, dict) and isinstance(data.get("name"), str):
                named.setdefault(data["name"], []).append(path)
        index[key] = named
    return index[key]


def find_card(ref: str, base: Path, index: CardIndex | None = None) -> tuple[Path | None, str, str]:
    """The card file ``ref`` names; or ``None`` with a message and a fix. ``index`` keeps the
    names found by reading the cards, for the next reference of the same load."""
    if is_path(ref):
        path = base / ref
        if path.is_file():
            return path, "", ""
        return (
            None,
            f"card file {ref!r} not found (looked at {os.path.normpath(path)})",
            ("check the path; it is relative to the workflow file"),
        )
    dirs = card_dirs(base)
    for d in dirs:
        for suffix in (".yaml", ".yml"):
            if (d / f"{ref}{suffix}").is_file():
                return d / f"{ref}{suffix}", "", ""
    index = {} if index is None else index
    named: dict[str, list[Path]] = {}
    for d in dirs:
        for name, paths in _names_in(d, index).items():
            named.setdefault(name, []).extend(paths)
    if len(named.get(ref, [])) == 1:
        return named[ref][0], "", ""
    if len(named.get(ref, [])) > 1:
        files = ", ".join(str(p) for p in named[ref])
        return None, f"several cards are named {ref!r} ({files})", "reference one by its path"
    where = (
        " or ".join(display_path(d) for d in dirs) or f"{display_path(base / 'nodes')} (missing)"
    )
    known = sorted(named)
    return (
        None,
        f"no node card named {ref!r} in {where}{did_you_mean(ref, known)}",
        (
            f"create nodes/{ref}.yaml, define the node inline, or give a path"
            + (f"; cards found: {', '.join(known)}" if known else "")
        ),
    )


def merge_settings(base: ModelSettings | None, own: ModelSettings | None) -> ModelSettings | None:
    """``own`` over ``base`` (the workflow's defaults)."""
    if base is None:
        return own
    if own is None:
        return base
    return base.model_copy(update=own.model_dump(exclude_unset=True))


def _conf(
    ctx: Context, own: ModelSettings | None, source: Source, path: Path_
) -> AgentConfig | None:
    """The node's model settings over the workflow's defaults (the API key read from its
    environment variable; an unset variable is a problem where the card names it)."""
    settings = merge_settings(ctx.defaults, own)
    if settings is None:
        return None
    data = settings.model_dump(exclude_none=True)
    key_env = data.pop("llm_api_key_env", None)
    if key_env and key_env not in os.environ and own is not None and own.llm_api_key_env:
        ctx.problems.append(
            source.problem(
                path + ("model", "llm_api_key_env"),
                f"environment variable {key_env} (named for the API key) is not set",
                f"export {key_env}=... before loading this workflow",
            )
        )
    return AgentConfig(**data, llm_api_key=os.environ.get(key_env) if key_env else None)


def _mcp(
    card: AgentCard, source: Source, path: Path_, ctx: Context
) -> tuple[dict[str, Any] | str | None, list[str] | None]:
    config: dict[str, Any] | str | None = ctx.mcp_config
    known = ctx.mcp_known
    if card.mcp_config is not None:
        config, known = read_mcp(
            card.mcp_config, source.path.parent, source, path + ("mcp_config",), ctx.problems
        )
    elif card.mcp_servers is None:
        return None, None
    if config is None:
        if ctx.standalone:
            return None, card.mcp_servers
        ctx.problems.append(
            source.problem(
                path + ("mcp_servers",),
                "the agent lists MCP servers but no mcp_config applies",
                "add mcp_config (an {mcpServers: ...} mapping) to the workflow or to this card",
            )
        )
        return None, card.mcp_servers
    for i, name in enumerate(card.mcp_servers or []):
        if known is not None and name not in known:
            ctx.problems.append(
                source.problem(
                    path + ("mcp_servers", i),
                    f"unknown MCP server {name!r}{did_you_mean(name, known)}",
                    f"use one of the servers in mcp_config: {', '.join(known) or 'none'}",
                )
            )
    return config, card.mcp_servers


def read_mcp(
    value: dict[str, Any] | str, base: Path, source: Source, path: Path_, problems: list[Problem]
) -> tuple[dict[str, Any] | str | None, list[str] | None]:
    """Check an ``mcp_config`` value; a path comes back absolute. Also its server names."""
    from ..environment import load_mcp_config

    target: dict[str, Any] | str = value
    if isinstance(value, str):
        target = str((base / value).resolve())
    try:
        parsed = load_mcp_config(target)
    except ConfigError as exc:
        lines = str(exc).split("\n  ")
        for line in lines[1:] or lines:  # the first line only names the config when more follow
            message, _, fix = line.removeprefix(f"{target}: ").partition("; ")
            problems.append(source.problem(path, message, fix or "fix the MCP config"))
        return target, None
    return target, list(parsed.servers)


def build_card(card: Any, source: Source, path: Path_, ctx: Context) -> Any:
    """The node object for a validated card, or ``None`` (problems are added to ``ctx``)."""
    problems = ctx.problems
    before = len(problems)
    try:
        if isinstance(card, AgentCard):
            tools = _resolve_all(card.tools, BUILTIN_TOOLS, "tool", source, path + ("tools",), ctx)
            mcp_config, mcp_servers = _mcp(card, source, path, ctx)
            conf = _conf(ctx, card.model, source, path)
            node: Any = Agent(
                name=card.name,
                system_prompt=card.system_prompt,
                description=card.description,
                tools=tools,
                mcp_config=mcp_config,
                mcp_servers=mcp_servers,
                conf=conf,
                max_steps=card.max_steps,
                tool_choice=card.tool_choice,
                demos=[
                    d.model_dump(exclude=set() if d.tool_calls else {"tool_calls"})
                    for d in card.demos
                ],
            )
        elif isinstance(card, CriticCard):
            scorer = None
            if (card.scorer is None) == (card.system_prompt is None):
                problems.append(
                    source.problem(
                        path,
                        "a critic needs exactly one of `scorer` or `system_prompt`",
                        "give `scorer: contains_number` (or package.module:function) for a Python "
                        "check, or `system_prompt: ...` for an LLM judge",
                    )
                )
            elif card.scorer is not None:
                scorer = _resolve(
                    card.scorer, BUILTIN_SCORERS, "scorer", source, path + ("scorer",), ctx
                )
            conf = _conf(ctx, card.model, source, path)
            if len(problems) > before:
                return None
            node = Critic(
                name=card.name,
                judges=card.judges,
                system_prompt=card.system_prompt,
                scorer=scorer,
                threshold=card.threshold,
                max_rounds=card.max_rounds,
                conf=conf,
                description=card.description,
            )
        elif isinstance(card, HumanCard):
            node = Human(name=card.name, prompt=card.prompt, description=card.description)
        elif isinstance(card, FunctionCard):
            fn = _resolve(card.function, {}, "function", source, path + ("function",), ctx)
            if fn is None:
                return None
            node = Node(name=card.name, fn=fn, description=card.description)
        elif isinstance(card, RemoteCard):
            fields = ("url", "assistant_id", "protocol", "api_key_env", "timeout")
            node = RemoteAgent(
                name=card.name,
                description=card.description,
                **{f: getattr(card, f) for f in fields},
            )
        else:  # pragma: no cover - the models allow nothing else
            raise AssertionError(card)
    except DefinitionError as exc:
        message, _, fix = str(exc).partition("; ")
        problems.append(source.problem(path + ("name",), message, fix or "rename the node"))
        return None
    return None if len(problems) > before else node


def placeholder(data: Any) -> Any:
    """A stand-in for a node whose card is broken, so the topology can still be checked."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    try:
        if data.get("kind") == "critic" and isinstance(data.get("judges"), str):
            return Critic(name=data["name"], judges=data["judges"], scorer=lambda o, s: 1.0)
        if data.get("kind") == "human":
            return Human(name=data["name"])
        return Agent(name=data["name"])
    except DefinitionError:
        return None


def _resolve(
    ref: str,
    builtins: dict[str, Any],
    what: str,
    source: Source,
    path: Path_,
    ctx: Context,
) -> Any:
    try:
        return import_ref(ref, builtins, what, execute=ctx.execute)
    except Unchecked as exc:
        ctx.problems.append(source.problem(path, exc.message, "", warning=True))
        return exc.stand_in
    except ImportProblem as exc:
        ctx.problems.append(source.problem(path, exc.message, exc.fix))
        return None


def _resolve_all(
    refs: list[str],
    builtins: dict[str, Any],
    what: str,
    source: Source,
    path: Path_,
    ctx: Context,
) -> list[Any]:
    found = [_resolve(ref, builtins, what, source, path + (i,), ctx) for i, ref in enumerate(refs)]
    return [f for f in found if f is not None]
