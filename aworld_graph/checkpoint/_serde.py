"""Checkpoint serializer: LangGraph's msgpack encoding, with the read-side trust decision ours.

LangGraph stores a typed value (dataclass, pydantic model, Enum…) as an extension naming its
``module`` and ``name`` plus the data to rebuild it with; reading imports and calls that name.
:class:`StrictSerializer` writes the same bytes, never pickles, and rebuilds a type only if it
is (a) one LangGraph trusts (``SAFE_MSGPACK_TYPES``: datetime, UUID, LangChain messages,
``Send``…; a method call only if in ``SAFE_MSGPACK_METHODS``); (b) in ``allowed_types``; or
(c) a dataclass, pydantic model, Enum or NamedTuple class found in a module *already
imported* (reading never imports one for (c): importing runs code), outside the standard
library, LangGraph and LangChain.

Anything else (``os.system``, ``builtins.eval``, an unknown extension) and every ``pickle``
row is refused with :class:`~aworld_graph.errors.UnsafeCheckpointValue` naming the type:
nothing is called, imported or unpickled, nor is the raw payload handed back. A trusted type
whose constructor rejects the stored data (a field renamed since) comes back as that data,
with a warning, as in LangGraph; writing a value this rule would refuse raises
:class:`~aworld_graph.errors.DefinitionError` (docs/checkpoints.md, *Values*).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import importlib
import logging
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import ormsgpack
import pydantic
from langgraph.checkpoint.serde import jsonplus as jp
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from ..errors import DefinitionError, UnsafeCheckpointValue
from ._texts import EXT_STORED_TEXT, stored_text

__all__ = ["StrictSerializer"]

logger = logging.getLogger(__name__)

_TYPED_CODES = {
    jp.EXT_CONSTRUCTOR_SINGLE_ARG,
    jp.EXT_CONSTRUCTOR_POS_ARGS,
    jp.EXT_CONSTRUCTOR_KW_ARGS,
    jp.EXT_METHOD_SINGLE_ARG,
    jp.EXT_PYDANTIC_V1,
    jp.EXT_PYDANTIC_V2,
}
_INTERNAL_PACKAGES = ("langgraph", "langchain")
"""Top-level package names (and ``langchain_*``) whose types only (a) or (b) admit."""
_ALLOW = (
    "If {} really is your application's own class, add it to TrajectorySaver(allowed_types=[...])"
)
_NOT_REBUILT = "Could not rebuild %s.%s from a checkpoint (%s: %s); returning its stored data"


class _Refused(Exception):
    """``(type as module.name, why and what to do)``: a type the rule does not rebuild."""


def _is_data_class(target: object) -> bool:
    """Whether ``target`` is a class whose instances are data rebuilt from stored fields."""
    if not isinstance(target, type):
        return False
    v1 = sys.modules.get("pydantic.v1")
    models = (enum.Enum, pydantic.BaseModel, *([v1.BaseModel] if v1 else []))
    named_tuple = issubclass(target, tuple) and hasattr(target, "_fields")
    return dataclasses.is_dataclass(target) or issubclass(target, models) or named_tuple


def _unpackb(data: bytes, hook: Callable[[int, bytes], Any] | None = None) -> Any:
    return ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)


class StrictSerializer(jp.JsonPlusSerializer):
    """LangGraph's msgpack encoding without pickle, reading back only the types the module's
    rule trusts; ``allowed_types``: classes or ``(module, name)`` pairs trusted besides."""

    def __init__(self, *, allowed_types: Iterable[type | tuple[str, ...]] = ()) -> None:
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=tuple(allowed_types))
        # Readers decoding with the serializer's own hook (LangGraph's, the store's fast
        # loader) must come through loads_typed: a refusal inside a hook only survives there.
        # Marked custom, LangGraph's with_msgpack_allowlist copies keep it so.
        self._unpack_ext_hook: Any = None
        self._custom_unpack_ext_hook = True

    @property
    def _allowed(self) -> set[tuple[str, ...]]:
        """The ``allowed_types`` as ``(module, name)`` pairs (LangGraph keeps them so)."""
        allowed = self._allowed_msgpack_modules
        return allowed if isinstance(allowed, set) else set()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None or isinstance(obj, (bytes, bytearray)):
            return super().dumps_typed(obj)
        # plain data packs to the same bytes without LangGraph's `default` hook
        with contextlib.suppress(ormsgpack.MsgpackEncodeError, TypeError):
            return "msgpack", ormsgpack.packb(obj, option=jp._option)
        try:
            type_, data = super().dumps_typed(obj)
        except (ormsgpack.MsgpackEncodeError, TypeError) as exc:
            raise DefinitionError(
                f"cannot checkpoint a value of type {type(obj).__module__}."
                f"{type(obj).__qualname__}: {exc}. Keep graph state to plain data (dict, list, "
                "str, numbers) and dataclasses, pydantic models or Enums defined at module level"
            ) from None
        if type_ == "msgpack":
            try:
                self._unpack(data, build=False)
            except _Refused as no:
                dotted, why = no.args
                raise DefinitionError(
                    f"cannot checkpoint a value of type {dotted}, it could not be read back: {why}"
                ) from None
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_ == "pickle":
            raise UnsafeCheckpointValue(
                "refused a checkpoint value of type 'pickle' (not unpickled: that can run any "
                "code, and aworld-graph never writes pickle, so another tool wrote the row or it "
                "was tampered with). Rewrite the value without pickle or delete the row"
            )
        if type_ != "msgpack":
            return super().loads_typed(data)
        try:
            return self._unpack(payload, build=True)
        except _Refused as no:
            dotted, why = no.args
            raise UnsafeCheckpointValue(
                f"refused to rebuild a checkpoint value of type {dotted}: {why}. Nothing was called"
            ) from None

    def _unpack(self, payload: bytes, *, build: bool) -> Any:
        """Decode ``payload``, checking every type it names; ``build=False`` only checks."""
        failed: list[Exception] = []

        def hook(code: int, data: bytes) -> Any:
            try:
                return self._rebuild(code, data, hook, build)
            except Exception as exc:
                failed.append(exc)  # ormsgpack replaces an ext_hook's error with its own
                raise

        try:
            return _unpackb(payload, hook)
        except Exception:
            if failed:  # the first is the innermost: the one that says what went wrong
                raise failed[0] from None
            raise

    def _rebuild(
        self, code: int, data: bytes, hook: Callable[[int, bytes], Any], build: bool
    ) -> Any:
        """One extension value, rebuilt (``build``) only if the rule allows its type."""
        if code == jp.EXT_DELTA_SNAPSHOT:
            inner = _unpackb(data, hook)
            return _DeltaSnapshot(inner) if build else None
        if code == EXT_STORED_TEXT:
            return stored_text(data) if build else None
        if code not in _TYPED_CODES:
            return _untyped(code, data) if build else None
        tup = _unpackb(data, hook)
        module, name, arg = str(tup[0]), str(tup[1]), tup[2]
        method = str(tup[3]) if code == jp.EXT_METHOD_SINGLE_ARG else None
        target = self._target(module, name, method)
        if not build:
            return None
        try:
            if code == jp.EXT_CONSTRUCTOR_SINGLE_ARG:
                return target(arg)
            if code == jp.EXT_CONSTRUCTOR_POS_ARGS:
                if (module, name) == ("langgraph.types", "Send") and len(arg) == 3:
                    return target(arg[0], arg[1], timeout=arg[2])
                return target(*arg)
            if code == jp.EXT_CONSTRUCTOR_KW_ARGS:
                return target(**arg)
            if code == jp.EXT_METHOD_SINGLE_ARG:
                return getattr(target, tup[3])(arg)
            try:
                return target(**arg)
            except Exception:  # pydantic: keep the fields even if validation changed since
                construct = (
                    target.construct if code == jp.EXT_PYDANTIC_V1 else target.model_construct
                )
                return construct(**arg)
        except Exception as exc:
            logger.warning(_NOT_REBUILT, module, name, type(exc).__name__, exc)
            return arg

    def _target(self, module: str, name: str, method: str | None) -> Any:
        """The class ``module.name`` if the rule allows rebuilding it, else raise _Refused."""
        dotted, top = f"{module}.{name}", module.partition(".")[0]
        listed, refuse = _ALLOW.format(dotted), functools.partial(_Refused, dotted)
        if method is not None and (module, name, method) not in SAFE_MSGPACK_METHODS:
            raise refuse(
                f"the method call {dotted}.{method}() is not one LangGraph trusts. Store the "
                "value as plain data or a dataclass/pydantic model instead",
            )
        trusted = (module, name) in SAFE_MSGPACK_TYPES or (module, name) in self._allowed
        if trusted:  # LangGraph's own list or the application's explicit one: import it
            found: ModuleType | None = sys.modules.get(module) or importlib.import_module(module)
        elif top in sys.stdlib_module_names:
            raise refuse(
                "it belongs to the standard library or builtins, whose names can run code, "
                f"and LangGraph does not trust it. {listed}",
            )
        elif top in _INTERNAL_PACKAGES or top.startswith("langchain_"):
            raise refuse(
                f"it is a LangGraph/LangChain internal LangGraph does not trust. {listed}",
            )
        elif (found := sys.modules.get(module)) is None:
            raise refuse(
                f"its module {module} is not imported in this process, and reading a "
                "checkpoint never imports one (importing runs code). Import the module that "
                f"defines it before reading (e.g. the one that builds the graph). {listed}",
            )
        target = getattr(found, name, None)
        if target is None:
            raise refuse(
                f"{module} has no module-level name {name}. Define the class at module level "
                "under that name (not inside a function or another class)",
            )
        if not trusted and not _is_data_class(target):
            raise refuse(
                "it is not a dataclass, pydantic model, Enum or NamedTuple class. Keep graph "
                f"state to plain data and such classes. {listed}",
            )
        return target


def _untyped(code: int, data: bytes) -> Any:
    """A numpy array (dtype, shape and buffer: data only, as LangGraph reads it), or refuse."""
    if code != jp.EXT_NUMPY_ARRAY:
        raise UnsafeCheckpointValue(
            f"refused a checkpoint value with msgpack extension code {code}: this version "
            "does not know it (written by a newer LangGraph, or tampered with). Upgrade "
            "langgraph-checkpoint, or delete the row"
        )
    np = importlib.import_module("numpy")
    dtype, shape, order, buf = _unpackb(data)
    return np.frombuffer(buf, dtype=np.dtype(dtype)).reshape(shape, order=order)
