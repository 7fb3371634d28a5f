"""Reading one YAML file: data, the line of every field, duplicate keys, ``${VAR}`` values.

Every YAML text is parsed once and bounded (:func:`parse_yaml`): at most :data:`MAX_BYTES`
bytes, :data:`MAX_DEPTH` levels of nesting and :data:`MAX_VALUES` values with aliases
expanded, so an alias bomb or a deeply nested file is a clear problem, not a ``MemoryError``
or ``RecursionError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..environment.variables import substitute_vars
from ._problems import Problem, field_path

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_VALUES",
    "Source",
    "YamlTooBig",
    "display_path",
    "parse_yaml",
    "read_source",
]

MAX_BYTES = 1 << 20
"""Largest workflow, card or MCP config file read (1 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists."""
MAX_VALUES = 100_000
"""Most values (scalars, mappings, lists) a file may hold, counting each alias expanded."""


class YamlTooBig(ValueError):
    """A YAML text over the size, depth or alias-expansion bounds; the message says which."""


def parse_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """The composed node tree and the data of one YAML document, within the bounds.

    Raises :class:`YamlTooBig` or :class:`yaml.YAMLError`."""
    if len(text) > MAX_BYTES:
        raise YamlTooBig(
            f"the file is {len(text):,} characters long (at most {MAX_BYTES:,}); split it "
            "into smaller files (node cards, nested workflows)"
        )
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YamlTooBig(_too_deep()) from None
        if node is None:
            return None, None
        _check_shape(node)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


def _too_deep() -> str:
    return f"it nests more than {MAX_DEPTH} levels deep; flatten it"


def _check_shape(root: yaml.Node) -> None:
    """Depth and alias-expanded size of a node graph, without expanding it."""
    sizes: dict[int, int] = {}
    # iterative post-order walk; a node reached again through an alias is counted from `sizes`
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    open_: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_DEPTH:
            raise YamlTooBig(_too_deep())
        key = id(node)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        if done:
            open_.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[key] > MAX_VALUES:
                raise YamlTooBig(
                    f"it holds more than {MAX_VALUES:,} values once its aliases (*name) are "
                    "expanded (an alias bomb is refused); write the values out, or use fewer "
                    "aliases"
                )
            continue
        if key in sizes:
            continue
        if key in open_:
            raise YamlTooBig("an alias (*name) refers to a value that contains it; remove the loop")
        open_.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in children if id(child) not in sizes)


Path_ = tuple[Any, ...]
_RAW_FIELDS = ("mcp_config",)
"""Fields whose ``${VAR}`` are left for the MCP loader (they may name secrets: env, headers)."""


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


@dataclass(kw_only=True)
class Source:
    """A parsed YAML file and where each of its fields is."""

    path: Path
    """The file."""
    display: str
    """The file as problems name it."""
    data: Any = None
    """The parsed content (``${VAR}`` already replaced outside ``mcp_config``)."""
    lines: dict[Path_, int] = field(default_factory=dict)
    """1-based line of each field path (mapping keys point at the key)."""
    problems: list[Problem] = field(default_factory=list)
    """Problems found while reading."""

    def line(self, path: Path_) -> int | None:
        """Line of ``path``, or of its nearest parent that has one."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)

    def problem(
        self, path: Path_, message: str, fix: str = "", *, warning: bool = False
    ) -> Problem:
        """A :class:`Problem` at ``path`` of this file."""
        return Problem(
            file=self.display,
            line=self.line(path),
            field=field_path(path),
            message=message,
            fix=fix,
            warning=warning,
        )


def read_source(path: Path, display: str | None = None) -> Source:
    """Read and parse ``path``; problems (syntax, duplicate keys, unset variables) are kept."""
    source = Source(path=path, display=display or display_path(path))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        source.problems.append(
            Problem(
                file=source.display,
                line=None,
                field="",
                message="file not found",
                fix="check the path",
            )
        )
        return source
    except (OSError, UnicodeDecodeError) as exc:
        source.problems.append(
            Problem(
                file=source.display,
                line=None,
                field="",
                message=f"cannot read: {exc}",
                fix="check the file",
            )
        )
        return source
    try:
        node, data = parse_yaml(text)
    except YamlTooBig as exc:
        problem, _, fix = str(exc).partition("; ")
        source.problems.append(
            Problem(file=source.display, line=None, field="", message=problem, fix=fix)
        )
        return source
    except yaml.YAMLError as exc:
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        if context:
            problem = f"{context} ({problem})"
        source.problems.append(
            Problem(
                file=source.display,
                line=mark.line + 1 if mark else None,
                field="",
                message=f"invalid YAML: {problem}",
                fix="fix the syntax (check indentation, quotes and ':' after keys)",
            )
        )
        return source
    if node is not None:
        source.lines[()] = node.start_mark.line + 1
        _walk(node, (), source)
    source.data = _substitute(data, (), source)
    return source


def _walk(node: yaml.Node, path: Path_, source: Source) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                source.problems.append(
                    Problem(
                        file=source.display,
                        line=line,
                        field=field_path(path + (key,)),
                        message=f"key {key!r} appears twice (lines {seen[key]} and {line})",
                        fix="keep one of them",
                    )
                )
            seen[key] = line
            source.lines.setdefault(path + (key,), line)
            _walk(value_node, path + (key,), source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            source.lines.setdefault(path + (i,), item.start_mark.line + 1)
            _walk(item, path + (i,), source)


def _substitute(value: Any, path: Path_, source: Source) -> Any:
    def unset(var: str, at: Path_) -> str:
        source.problems.append(
            source.problem(
                at,
                f"environment variable {var} is not set",
                f"export {var}, or write ${{{var}:-default}} to give a default",
            )
        )
        return f"${{{var}}}"  # left as written

    return substitute_vars(value, unset, path=path, raw=_RAW_FIELDS)
