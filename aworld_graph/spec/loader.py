"""``load_workflow``: a workflow file (and the node cards it names) -> a :class:`Swarm`.

Every problem in every file is collected, each with its file, line, field and fix, and raised
at once as :class:`SpecError`. Checks the swarm itself makes (unreachable nodes, cycles, the
shape of a team) are run too and mapped back to the line that causes them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..errors import DefinitionError
from ..model import ChatModel
from ..swarm import Swarm
from ..swarm.nodes import Critic
from ._cards import (
    CardIndex,
    Context,
    build_card,
    find_card,
    merge_settings,
    placeholder,
    read_mcp,
)
from ._problems import Problem, SpecError, field_path
from ._validate import check
from ._wiring import Wiring
from .models import (
    CardRef,
    InlineWorkflow,
    NodeCard,
    NodeEntry,
    WorkflowRef,
    WorkflowSpec,
)
from .source import Path_, Source, display_path, read_source

__all__ = ["load_card", "load_workflow", "validate_file"]

_HEADER_SKIP = ("nodes", "topology", "edges")

_EMPTY_CARD = ("the card file is empty", "start with `kind: agent` and `name: ...`")
"""Problem and fix for a node card file with nothing in it."""


def load_workflow(
    path: str | os.PathLike[str],
    *,
    model: ChatModel | None = None,
    models: Mapping[str, ChatModel] | None = None,
) -> Swarm:
    """Load a workflow file into a :class:`Swarm`, or raise :class:`SpecError` listing every problem.

    ``model`` replaces the model of every agent and critic, ``models`` that of the nodes it
    names (tests pass ``ScriptedModel`` / ``FunctionModel`` this way). The swarm's ``info``
    records the workflow file, its version and each node card's version fields.
    """
    loader = _Loader()
    swarm = loader.workflow_file(Path(path))
    loader.raise_problems()
    assert swarm is not None
    if model is not None or models:
        _apply_models(swarm, model, dict(models or {}))
    return swarm


def load_card(path: str | os.PathLike[str]) -> Any:
    """Load one node card file into an ``Agent``, ``Critic``, ``Human`` or ``Node``."""
    loader = _Loader()
    node = loader.card_file(Path(path))
    loader.raise_problems()
    return node


def validate_file(path: str | os.PathLike[str]) -> list[Problem]:
    """Every problem of a workflow or card file: a card when it lies in a ``nodes`` directory or
    has a ``kind`` (and no ``nodes``), a workflow otherwise.

    Runs no plugin code: a ``package.module:function`` reference (tool, scorer, function node,
    edge predicate) is checked in the module's source without importing it (see
    :mod:`aworld_graph.spec._registry`)."""
    loader = _Loader(execute=False)
    path = Path(path)
    source = loader.source(path)
    data = source.data
    is_card = path.parent.name == "nodes" or (
        isinstance(data, dict)
        and "kind" in data
        and "build_type" not in data
        and "nodes" not in data
    )
    if source.data is not None or not source.problems:
        (loader.card_file if is_card else loader.workflow_file)(path)
    return loader.sorted_problems()


@dataclass(kw_only=True)
class _Entry:
    """A node of the workflow being loaded."""

    name: str
    node: Any
    """The built node, a stand-in for a broken one, or ``None``."""
    path: Path_
    """Where the entry is in the workflow file."""
    ok: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


class _Loader:
    def __init__(self, *, execute: bool = True) -> None:
        self.execute = execute
        """Import the modules that ``module:function`` references name (loading does; checking
        only looks them up and parses their source)."""
        self.problems: list[Problem] = []
        self.sources: dict[Path, Source] = {}
        self.stack: list[Path] = []
        self.card_index: CardIndex = {}

    # -- files --------------------------------------------------------------------------------
    def source(self, path: Path) -> Source:
        key = path.resolve()
        if key not in self.sources:
            self.sources[key] = read_source(path)
            self.problems += self.sources[key].problems
        return self.sources[key]

    def sorted_problems(self) -> list[Problem]:
        unique = list(dict.fromkeys(self.problems))
        return sorted(unique, key=lambda p: (p.file, p.line or 0))

    def raise_problems(self) -> None:
        if any(not p.warning for p in self.problems):
            raise SpecError(self.sorted_problems())

    def workflow_file(self, path: Path, ctx: Context | None = None) -> Swarm | None:
        source = self.source(path)
        if source.data is None and source.problems:
            return None
        if not isinstance(source.data, dict):
            self.problems.append(
                source.problem(
                    (),
                    "a workflow file is a mapping (name, build_type, nodes, topology, ...)"
                    if source.data is not None
                    else "the file is empty",
                    "start with `name: my_workflow` and list its `nodes:`",
                )
            )
            return None
        self.stack.append(path.resolve())
        try:
            swarm = self.workflow(
                source,
                source.data,
                (),
                ctx or Context(problems=self.problems, execute=self.execute),
            )
        finally:
            self.stack.pop()
        if swarm is not None:
            swarm.info = {
                "workflow": display_path(path) if path.is_absolute() else os.path.normpath(path),
                **swarm.info,
            }
        return swarm

    def card_file(self, path: Path, ctx: Context | None = None) -> Any:
        source = self.source(path)
        if source.data is None and source.problems:
            return None
        if source.data is None:
            self.problems.append(source.problem((), *_EMPTY_CARD))
            return None
        card, problems = check(NodeCard, source.data, source)
        self.problems += problems
        if card is None:
            return None
        ctx = ctx or Context(problems=self.problems, standalone=True, execute=self.execute)
        return build_card(card, source, (), ctx)

    # -- a workflow ---------------------------------------------------------------------------
    def workflow(
        self, source: Source, data: dict[str, Any], prefix: Path_, outer: Context
    ) -> Swarm | None:
        inline = "kind" in data
        header_data = {k: v for k, v in data.items() if k not in _HEADER_SKIP}
        header, problems = check(
            InlineWorkflow if inline else WorkflowSpec,
            {**header_data, "nodes": ["-"]},
            source,
            prefix,
        )
        self.problems += problems
        if not data.get("nodes"):
            self.problems.append(
                source.problem(
                    prefix + ("nodes",),
                    "a workflow needs at least one node",
                    "list its nodes: card names (`- solver`) or inline definitions "
                    "(`- {kind: agent, name: a}`)",
                )
            )
            return None
        ctx = Context(
            execute=outer.execute,
            mcp_config=outer.mcp_config,
            mcp_known=outer.mcp_known,
            defaults=outer.defaults,
            problems=self.problems,
        )
        if header is not None:
            if header.mcp_config is not None:
                ctx.mcp_config, ctx.mcp_known = read_mcp(
                    header.mcp_config,
                    source.path.parent,
                    source,
                    prefix + ("mcp_config",),
                    self.problems,
                )
            ctx.defaults = merge_settings(outer.defaults, header.defaults)
            key_env = header.defaults.llm_api_key_env if header.defaults else None
            if key_env and key_env not in os.environ:
                self.problems.append(
                    source.problem(
                        prefix + ("defaults", "llm_api_key_env"),
                        f"environment variable {key_env} (named for the API key) is not set",
                        f"export {key_env}=... before loading this workflow",
                    )
                )
        entries, broken = self._nodes(source, data["nodes"], prefix, ctx)
        wiring = Wiring(
            source=source,
            prefix=prefix,
            nodes={e.name: e.path for e in entries},
            broken=broken,
            execute=ctx.execute,
            incomplete=bool(broken),
            blocked=header is None,
        )
        topology = wiring.topology(data.get("topology"), header.build_type if header else None)
        edges = wiring.edges(data.get("edges"))
        root = header.root_agent if header is not None else data.get("root_agent")
        if isinstance(root, str) and not wiring.ref(root, prefix + ("root_agent",)):
            root = None
        for e in entries:
            if isinstance(e.node, Critic) and e.ok:
                wiring.ref(e.node.judged_name, e.path + ("judges",), "judged node")
        self.problems += wiring.problems
        if wiring.blocked or header is None or not entries:
            return None
        try:
            swarm = Swarm(
                *[e.node for e in entries],
                topology=topology,
                root_agent=root,
                build_type=header.build_type,
                edges=edges,
                max_steps=header.max_steps,
                name=header.name,
                description=header.description,
            )
        except DefinitionError as exc:
            wiring.problems = []
            wiring.swarm_problems(str(exc))
            self.problems += wiring.problems
            return None
        swarm.info = {
            "workflow_version": header.version,
            "cards": {e.name: e.meta for e in entries if e.meta},
        }
        if header.build_type in ("team", "hybrid") and header.root_agent is None:
            # AWorld's rule, as in Python's TeamSwarm(leader, ...); a file should say it
            self.problems.append(
                source.problem(
                    prefix + ("build_type",),
                    f"no root_agent: {swarm.root!r} leads the {header.build_type} because it "
                    "comes first",
                    f"name the leader with `root_agent: {swarm.root}`",
                    warning=True,
                )
            )
        return swarm

    def _nodes(
        self, source: Source, raw: Any, prefix: Path_, ctx: Context
    ) -> tuple[list[_Entry], set[str]]:
        """The workflow's nodes (stand-ins for broken ones), and names that could not be made."""
        if not isinstance(raw, list):
            self.problems.append(
                source.problem(
                    prefix + ("nodes",),
                    "expected a list of nodes",
                    "write `nodes: [card_name, ...]`",
                )
            )
            return [], set()
        entries: list[_Entry] = []
        broken: set[str] = set()
        seen: dict[str, _Entry] = {}
        for i, item in enumerate(raw):
            path = prefix + ("nodes", i)
            entry = self._node(source, item, path, ctx)
            if entry.node is None:
                broken.add(entry.name)
            elif entry.name in seen:
                self.problems.append(
                    source.problem(
                        path,
                        f"node name {entry.name!r} is used twice (first at line "
                        f"{source.line(seen[entry.name].path)})",
                        "give each node its own name",
                    )
                )
            else:
                seen[entry.name] = entry
                entries.append(entry)
        return entries, broken

    def _node(self, source: Source, item: Any, path: Path_, ctx: Context) -> _Entry:
        name = item.get("name") if isinstance(item, dict) else item
        failed = _Entry(name=str(name), node=None, path=path, ok=False)
        if isinstance(item, dict) and item.get("kind") == "workflow":
            swarm = self.workflow(source, item, path, ctx)
            return _Entry(name=str(name), node=swarm, path=path) if swarm is not None else failed
        entry, problems = check(NodeEntry, item, source, path)
        self.problems += problems
        if entry is None:
            _salvage(NodeEntry, item, source, path, problems, ctx)
            return _stand_in(item, path, failed)
        if isinstance(entry, WorkflowRef):
            return self._workflow_ref(source, entry, path, ctx, failed)
        card_source, card_path = source, path
        if isinstance(entry, str | CardRef):
            ref = entry if isinstance(entry, str) else entry.card
            failed.name = ref
            found, message, fix = find_card(ref, source.path.parent, self.card_index)
            if found is None:
                where = path if isinstance(entry, str) else path + ("card",)
                self.problems.append(source.problem(where, message, fix))
                return failed
            card_source, card_path = self.source(found), ()
            if card_source.data is None:
                if not card_source.problems:
                    self.problems.append(card_source.problem((), *_EMPTY_CARD))
                return failed
            entry, problems = check(NodeCard, card_source.data, card_source)
            self.problems += problems
            if entry is None:
                _salvage(NodeCard, card_source.data, card_source, (), problems, ctx)
                return _stand_in(card_source.data, path, failed)
        node = build_card(entry, card_source, card_path, ctx)
        if node is None:
            return _stand_in(entry.model_dump(), path, failed)
        origin = card_source.display if card_source is not source else None
        return _Entry(name=node.name, node=node, path=path, meta=_meta(entry, origin, ctx))

    def _workflow_ref(
        self, source: Source, entry: WorkflowRef, path: Path_, ctx: Context, failed: _Entry
    ) -> _Entry:
        target = source.path.parent / entry.workflow
        failed.name = Path(entry.workflow).stem
        if not target.is_file():
            self.problems.append(
                source.problem(
                    path + ("workflow",),
                    f"workflow file {entry.workflow!r} not found",
                    "check the path; it is relative to this file",
                )
            )
            return failed
        if target.resolve() in self.stack:
            self.problems.append(
                source.problem(
                    path + ("workflow",),
                    f"{entry.workflow!r} includes itself (a workflow cannot contain itself)",
                    "remove this reference",
                )
            )
            return failed
        swarm = self.workflow_file(target, ctx)
        return _Entry(name=swarm.name, node=swarm, path=path) if swarm is not None else failed


def _salvage(
    root: Any, data: Any, source: Source, path: Path_, problems: list[Problem], ctx: Context
) -> None:
    """Build a broken card without its bad fields, so that the problems of the rest (an
    unknown tool, a scorer that does not import) are reported in the same pass."""
    if not isinstance(data, dict):
        return
    prefix = field_path(path)
    bad = set()
    for problem in problems:
        if problem.file == source.display and problem.field.startswith(prefix):
            key = re.split(r"[.\[]", problem.field[len(prefix) :].lstrip("."))[0]
            bad.add(key)
    if not bad or bad & {"", "kind", "name"}:
        return
    entry, _ = check(root, {k: v for k, v in data.items() if k not in bad}, source, path)
    if entry is not None and not isinstance(entry, str | CardRef | WorkflowRef):
        build_card(entry, source, path, ctx)


def _stand_in(data: Any, path: Path_, failed: _Entry) -> _Entry:
    """A stand-in for a broken node, so that the rest of the workflow can still be checked."""
    node = placeholder(data)
    return _Entry(name=node.name, node=node, path=path, ok=False) if node is not None else failed


def _meta(card: Any, file: str | None, ctx: Context) -> dict[str, Any]:
    meta = {
        "version": card.version,
        "parent": card.parent,
        "score": card.score,
        "operator": card.operator,
        "card": file,
    }
    settings = merge_settings(ctx.defaults, getattr(card, "model", None))
    if settings is not None and settings.llm_api_key_env:
        meta["llm_api_key_env"] = settings.llm_api_key_env
    return meta


def _apply_models(swarm: Swarm, model: ChatModel | None, models: dict[str, ChatModel]) -> None:
    found: set[str] = set()

    def visit(s: Swarm) -> None:
        for name, node in s.nodes.items():
            if isinstance(node, Swarm):
                visit(node)
            elif isinstance(node, Agent | Critic):
                chosen = models.get(name, model)
                if name in models:
                    found.add(name)
                if chosen is not None:
                    node.model = chosen

    visit(swarm)
    unknown = sorted(set(models) - found)
    if unknown:
        raise DefinitionError(
            f"models= names {', '.join(map(repr, unknown))}, which {'is' if len(unknown) == 1 else 'are'} "
            f"not an agent or critic of workflow {swarm.name!r}; fix the name"
        )
