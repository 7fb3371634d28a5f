"""Strict msgpack serializer: no pickle, allow-listed types only, checked at write time.

LangGraph's :class:`JsonPlusSerializer` encodes any dataclass, pydantic model or enum it
meets, and in strict mode silently hands back the raw payload on read when the type is not
allow-listed. :class:`StrictSerializer` moves that check to write time: a value whose type
could not be rebuilt on read raises :class:`~aworld_graph.errors.DefinitionError` when it
is written, naming the type and the fix.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)

from ..errors import DefinitionError

__all__ = ["StrictSerializer"]

# The options LangGraph packs with. Plain data (dict, list, str, numbers, bool, None) packs
# to the same bytes with or without its `default` hook; everything else is passed through
# to the hook, so packing without one fails fast for any value that needs a type tag.
_PLAIN_OPTIONS = (
    ormsgpack.OPT_NON_STR_KEYS
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_UUID
    | ormsgpack.OPT_REPLACE_SURROGATES
)
_TYPED_CODES = (
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
)


@lru_cache(maxsize=1024)
def _importable(module: str, name: str) -> bool:
    """Whether ``module.name`` resolves the way the reader will look it up."""
    try:
        return getattr(importlib.import_module(module), name, None) is not None
    except Exception:
        return False


class StrictSerializer(JsonPlusSerializer):
    """JsonPlus msgpack with ``pickle_fallback=False`` and an explicit allow-list.

    Types LangGraph itself trusts (datetime, UUID, LangChain messages, ``Send``,
    ``Interrupt``, ``Command``…) are always allowed; ``allowed_types`` adds more, as classes
    or ``(module, name)`` pairs. ``with_msgpack_allowlist`` (used by LangGraph's
    ``with_allowlist``) returns a copy of this class with the merged list.
    """

    def __init__(self, *, allowed_types: Iterable[type | tuple[str, ...]] = ()) -> None:
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=tuple(allowed_types))

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None or isinstance(obj, (bytes, bytearray)):
            return super().dumps_typed(obj)
        try:
            return "msgpack", ormsgpack.packb(obj, option=_PLAIN_OPTIONS)
        except (ormsgpack.MsgpackEncodeError, TypeError):
            pass
        try:
            type_, data = super().dumps_typed(obj)
        except (ormsgpack.MsgpackEncodeError, TypeError) as exc:
            raise DefinitionError(
                f"cannot checkpoint a value of type {type(obj).__module__}."
                f"{type(obj).__qualname__}: {exc}. Keep graph state to plain data (dict, list, "
                "str, numbers) or a dataclass/pydantic model listed in "
                "TrajectorySaver(allowed_types=[...])"
            ) from None
        if type_ == "msgpack":
            self._check_types(data)
        return type_, data

    def _check_types(self, data: bytes) -> None:
        allowed = self._allowed_msgpack_modules
        if allowed is True:
            return
        extra: set[tuple[str, ...]] = allowed or set()
        blocked: list[str] = []
        unreachable: list[str] = []

        def hook(code: int, payload: bytes) -> Any:
            if code == EXT_DELTA_SNAPSHOT:
                return ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            if code not in _TYPED_CODES and code != EXT_METHOD_SINGLE_ARG:
                return None
            tup = ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            module, name = str(tup[0]), str(tup[1])
            if code == EXT_METHOD_SINGLE_ARG:
                ok = (module, name, str(tup[3])) in SAFE_MSGPACK_METHODS
            else:
                ok = (module, name) in SAFE_MSGPACK_TYPES or (module, name) in extra
            if not ok:
                blocked.append(f"{module}.{name}")
            elif not _importable(module, name):
                unreachable.append(f"{module}.{name}")
            return None

        ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        if blocked:
            name = blocked[0].rsplit(".", 1)[-1]
            raise DefinitionError(
                f"cannot checkpoint a value of type {blocked[0]}: it is not in the checkpoint "
                "allow-list, so it could not be read back. Add it with "
                f"TrajectorySaver(allowed_types=[{name}]) or keep graph state to plain data"
            )
        if unreachable:
            raise DefinitionError(
                f"cannot checkpoint a value of type {unreachable[0]}: it could not be rebuilt "
                "on read because that name cannot be imported. Define the class at module "
                "level (not inside a function or another class)"
            )
