"""pydantic validation errors turned into :class:`Problem` s that name the line and the fix."""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

import pydantic
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from ._problems import Problem, did_you_mean
from .source import Path_, Source

__all__ = ["check"]

_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}
_SECRET_KEYS = {"llm_api_key", "api_key", "apikey", "openai_api_key"}


_ADAPTERS: dict[int, TypeAdapter[Any]] = {}


def check(root: Any, data: Any, source: Source, prefix: Path_ = ()) -> tuple[Any, list[Problem]]:
    """Validate ``data`` (found at ``prefix`` in ``source``) as type ``root``.

    Returns the validated value, or ``None`` and a problem per wrong field.
    """
    adapter = _ADAPTERS.get(id(root))
    if adapter is None:
        adapter = _ADAPTERS[id(root)] = TypeAdapter(root)
    try:
        return adapter.validate_python(data), []
    except pydantic.ValidationError as exc:
        errors = exc.errors(include_url=False)
    grouped: dict[Path_, list[ErrorDetails]] = {}
    for err in errors:
        grouped.setdefault(_data_path(data, err), []).append(err)
    problems = []
    for path, errs in grouped.items():
        problems.append(_explain(path, errs, root, data, source, prefix))
    return None, problems


def _data_path(data: Any, err: ErrorDetails) -> Path_:
    """The error's location in the data, without union tags and member names."""
    loc = list(err["loc"])
    path: list[Any] = []
    current = data
    for i, part in enumerate(loc):
        if isinstance(current, dict) and part in current:
            path.append(part)
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            path.append(part)
            current = current[part]
        elif err["type"] == "missing" and i == len(loc) - 1:
            path.append(part)
    return tuple(path)


def _explain(
    path: Path_, errs: list[ErrorDetails], root: Any, data: Any, source: Source, prefix: Path_
) -> Problem:
    err = errs[0]
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    where = prefix + path
    name = str(path[-1]) if path else ""
    info = _field_at(root, [p for p in err["loc"]])
    hint = _first_sentence(info.description) if info is not None and info.description else ""
    also = f" ({hint})" if hint else ""
    if kind == "missing":
        return source.problem(
            where,
            f"required field {name!r} is missing",
            f"add `{name}: ...`" + (f" ({hint})" if hint else ""),
        )
    if kind == "extra_forbidden":
        allowed = _allowed(root, list(err["loc"])[:-1])
        if name.lower() in _SECRET_KEYS:
            return source.problem(
                where,
                "an API key is never written in a workflow or card file",
                "remove it and name the environment variable that holds it instead: "
                "`llm_api_key_env: OPENAI_API_KEY`",
            )
        return source.problem(
            where,
            f"unknown key {name!r}{did_you_mean(name, allowed)}",
            "remove it or fix its spelling"
            + (f"; allowed keys: {', '.join(allowed)}" if allowed else ""),
        )
    if kind == "literal_error":
        expected = [
            e.strip().strip("'")
            for e in str(ctx.get("expected", "")).replace(" or ", ",").split(",")
        ]
        return source.problem(
            where,
            f"{value!r} is not allowed{did_you_mean(str(value), expected)}",
            f"use one of {', '.join(e for e in expected if e)}",
        )
    if kind == "union_tag_invalid":
        tags = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",")]
        return source.problem(
            where + ("kind",),
            f"kind {ctx.get('tag')!r} is unknown{did_you_mean(str(ctx.get('tag')), tags)}",
            f"use one of {', '.join(tags)}",
        )
    if kind == "union_tag_not_found":
        return source.problem(
            where,
            "the card has no `kind`",
            "add `kind: agent` (or critic, human, function, remote) at the top",
        )
    if kind in ("step", "node_entry") and isinstance(value, dict):
        known = ["parallel", "serial"] if kind == "step" else ["card", "workflow", "kind"]
        if kind == "node_entry" and "kind" in value:
            kinds = ["agent", "critic", "human", "function", "remote", "workflow"]
            return source.problem(
                where + ("kind",),
                f"kind {value['kind']!r} is unknown{did_you_mean(str(value['kind']), kinds)}",
                f"use one of {', '.join(kinds)}",
            )
        odd = [k for k in value if k not in known]
        if odd:
            return source.problem(
                where + (odd[0],),
                f"unknown key {odd[0]!r}{did_you_mean(str(odd[0]), known)}",
                f"use one of {', '.join(known)}",
            )
    if kind == "step":
        return source.problem(
            where,
            f"{value!r} is not a topology entry",
            "write a node name, {parallel: [a, b]} or {serial: [a, b]} in a "
            "workflow, or 'a -> b' pairs in handoff/team/hybrid swarms",
        )
    if kind == "node_entry":
        return source.problem(
            where,
            f"{_show(value)} is not a node",
            "write a card name, {card: PATH}, {workflow: PATH} or an inline "
            "definition with kind: agent | critic | human | function | remote | workflow",
        )
    if kind in _TYPE_WORDS:
        words = sorted(
            {_TYPE_WORDS.get(e["type"], e["type"]) for e in errs if e["type"] in _TYPE_WORDS}
        )
        return source.problem(
            where,
            f"expected {' or '.join(words)}, got {_show(value)}",
            f"give {' or '.join(words)}" + (f" ({hint})" if hint else ""),
        )
    if kind == "too_short":
        return source.problem(
            where, f"needs at least {ctx.get('min_length')} item(s)", "add the missing items" + also
        )
    if kind == "string_too_short":
        return source.problem(where, "must not be empty", "give a value" + also)
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        limit = err["msg"].lower().removeprefix("input should be ")
        return source.problem(where, f"{value!r} is out of range", f"give a value {limit}" + also)
    if kind == "string_pattern_mismatch":
        return source.problem(
            where, f"{value!r} has the wrong form", (hint or f"match {ctx.get('pattern')}")
        )
    return source.problem(where, err["msg"], hint)


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    kinds: dict[type[Any], str] = {dict: "a mapping", list: "a list"}
    kind = kinds.get(type(value))
    return kind or (text if len(text) < 60 else text[:57] + "...")


def _first_sentence(text: str) -> str:
    text = " ".join(text.replace("``", "").split())
    return text.split(". ")[0].rstrip(".")


# -- finding the model field behind an error location ----------------------------------------
def _members(tp: Any) -> tuple[Any, dict[str, Any] | None]:
    """Unwrap ``Annotated``; return the type and, for a tagged union, its members by tag."""
    tags: dict[str, Any] | None = None
    while typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        tp = args[0]
        for meta in args[1:]:
            if isinstance(meta, pydantic.Tag):
                continue
            if isinstance(meta, pydantic.Discriminator | FieldInfo) or hasattr(
                meta, "discriminator"
            ):
                tags = {}
    if tags is not None and _is_union(tp):
        for member in typing.get_args(tp):
            tag = _tag_of(member)
            if tag is not None:
                tags[tag] = member
    return tp, tags


def _tag_of(member: Any) -> str | None:
    if typing.get_origin(member) is typing.Annotated:
        for meta in typing.get_args(member)[1:]:
            if isinstance(meta, pydantic.Tag):
                return meta.tag
        member = typing.get_args(member)[0]
    if isinstance(member, type) and issubclass(member, BaseModel) and "kind" in member.model_fields:
        args = typing.get_args(member.model_fields["kind"].annotation)
        return str(args[0]) if args else None
    return None


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _step(tp: Any, part: Any) -> tuple[Any, FieldInfo | None] | None:
    tp, tags = _members(tp)
    if tags and part in tags:
        return tags[part], None
    if _is_union(tp):
        for member in typing.get_args(tp):
            found = _step(member, part)
            if found is not None:
                return found
        return None
    origin = typing.get_origin(tp)
    if origin is list and isinstance(part, int):
        return typing.get_args(tp)[0], None
    if origin is dict:
        return typing.get_args(tp)[1], None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        for fname, finfo in tp.model_fields.items():
            if part in (fname, finfo.alias):
                return finfo.annotation, finfo
    return None


def _walk(root: Any, loc: Sequence[Any]) -> tuple[Any, FieldInfo | None] | None:
    current: tuple[Any, FieldInfo | None] = (root, None)
    for part in loc:
        found = _step(current[0], part)
        if found is None:
            continue  # a member name pydantic put in the location; stay where we are
        current = found
    return current


def _field_at(root: Any, loc: Sequence[Any]) -> FieldInfo | None:
    found = _walk(root, loc)
    return found[1] if found else None


def _allowed(root: Any, loc: Sequence[Any]) -> list[str]:
    found = _walk(root, loc)
    if found is None:
        return []
    tp, _ = _members(found[0])
    candidates = typing.get_args(tp) if _is_union(tp) else (tp,)
    for member in candidates:
        member, _ = _members(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            return [f.alias or name for name, f in member.model_fields.items()]
    return []
