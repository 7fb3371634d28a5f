"""Checkpoint serializer: LangGraph's msgpack encoding, with the read-side trust decision ours.

LangGraph's :class:`JsonPlusSerializer` stores a dataclass, pydantic model, Enum or other
typed value as an extension naming its ``module`` and ``name`` plus the data to rebuild it
with; reading imports that module and calls that name. :class:`StrictSerializer` writes the
same bytes, never pickles, and decides on read whether a named type may be rebuilt.

**The rule.** A type named in a stored value is rebuilt only when it is

(a) one LangGraph itself trusts (``SAFE_MSGPACK_TYPES``: datetime, UUID, LangChain
    messages, ``Send``, ``Interrupt``, ``Command``…); a method-call extension only for
    LangGraph's ``SAFE_MSGPACK_METHODS`` (``datetime.fromisoformat``);
(b) listed in ``allowed_types`` (a class or a ``(module, name)`` pair); or
(c) a dataclass, pydantic model, Enum or NamedTuple class found by name in a module that
    is *already imported* in this process (``sys.modules``), outside the standard library
    and builtins (``sys.stdlib_module_names``) and outside LangGraph's and LangChain's own
    packages.

So a graph whose state is a pydantic model holding Enums and dataclasses checkpoints and
reads back with no configuration, as soon as the process has imported the module that
defines them (building the graph does). Reading never imports a module for (c): importing
runs code. Rebuilding runs the class's own ``__init__`` and validators, as in LangGraph.

Anything else (``os.system``, ``subprocess.Popen``, ``builtins.eval``, a class of a module
not imported, an unknown extension) and every ``pickle`` row is refused with
:class:`~aworld_graph.errors.UnsafeCheckpointValue` naming the type: nothing is called,
imported or unpickled, and the raw payload is never handed back in its place. A trusted type
whose constructor rejects the stored data (a field renamed since) comes back as that data,
with a logged warning, as in LangGraph. Rows of LangGraph's older ``json`` type are read by
LangGraph's own rules (its trusted types and LangChain's core objects only).

On write, a value whose types would not be rebuilt under this rule (a class defined inside
a function, a standard-library class LangGraph does not trust, a non-data class) raises
:class:`~aworld_graph.errors.DefinitionError` naming the type and the fix. Plain data (dict,
list, str, numbers) skips the check.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import importlib
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

import ormsgpack
import pydantic
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_NUMPY_ARRAY,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from ..errors import DefinitionError, UnsafeCheckpointValue

__all__ = ["StrictSerializer"]

logger = logging.getLogger(__name__)

# The options LangGraph packs with. Plain data (dict, list, str, numbers, bool, None) packs
# to the same bytes with or without its `default` hook; everything else is passed through
# to the hook, so packing without one fails fast for any value that needs a type tag.
_OPTIONS = (
    ormsgpack.OPT_NON_STR_KEYS
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_UUID
    | ormsgpack.OPT_REPLACE_SURROGATES
)
_TYPED_CODES = frozenset(
    {
        EXT_CONSTRUCTOR_SINGLE_ARG,
        EXT_CONSTRUCTOR_POS_ARGS,
        EXT_CONSTRUCTOR_KW_ARGS,
        EXT_METHOD_SINGLE_ARG,
        EXT_PYDANTIC_V1,
        EXT_PYDANTIC_V2,
    }
)
_INTERNAL_PACKAGES = ("langgraph", "langchain")
"""Top-level package names (and ``langchain_*``) whose types only (a) or (b) admit."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Refused:
    """Why ``module.name`` may not be rebuilt; the caller words the error for its side."""

    dotted: str
    """The type as ``module.name``."""
    reason: str
    """Why the rule refuses it."""
    fix: str
    """What the developer can do."""


def _is_data_class(target: object) -> bool:
    """Whether ``target`` is a class whose instances are data rebuilt from stored fields."""
    if not isinstance(target, type):
        return False
    if dataclasses.is_dataclass(target) or issubclass(target, (enum.Enum, pydantic.BaseModel)):
        return True
    if issubclass(target, tuple) and hasattr(target, "_fields"):  # NamedTuple
        return True
    v1 = sys.modules.get("pydantic.v1")
    return v1 is not None and issubclass(target, v1.BaseModel)


def _refusal(module: str, name: str) -> _Refused | None:
    """Rule (c) for a type that is neither LangGraph-trusted nor allow-listed."""
    dotted = f"{module}.{name}"
    listed = (
        f"If {dotted} really is your application's own class, add it to "
        "TrajectorySaver(allowed_types=[...])"
    )
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names:
        return _Refused(
            dotted,
            "it belongs to the standard library or builtins, whose names can run code, and "
            "LangGraph does not trust it",
            listed,
        )
    if top in _INTERNAL_PACKAGES or top.startswith("langchain_"):
        return _Refused(
            dotted,
            "it is a LangGraph/LangChain internal that LangGraph does not trust",
            listed,
        )
    found = sys.modules.get(module)
    if found is None:
        return _Refused(
            dotted,
            f"its module {module} is not imported in this process, and reading a checkpoint "
            "never imports one (importing runs code)",
            "Import the module that defines it before reading (e.g. the one that builds the "
            f"graph). {listed}",
        )
    target = getattr(found, name, None)
    if target is None:
        return _Refused(
            dotted,
            f"{module} has no module-level name {name}",
            "Define the class at module level (not inside a function or another class)",
        )
    if not _is_data_class(target):
        return _Refused(
            dotted,
            "it is not a dataclass, pydantic model, Enum or NamedTuple class",
            f"Keep graph state to plain data and such classes. {listed}",
        )
    return None


class StrictSerializer(JsonPlusSerializer):
    """LangGraph's msgpack encoding without pickle, reading back only trusted types.

    See the module docstring for the rule. ``allowed_types`` adds classes or
    ``(module, name)`` pairs to those LangGraph trusts; ``with_msgpack_allowlist`` (used by
    LangGraph's ``with_allowlist``) returns a copy with the merged list.
    """

    def __init__(self, *, allowed_types: Iterable[type | tuple[str, ...]] = ()) -> None:
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=tuple(allowed_types))
        # Readers that decode with the serializer's own hook (LangGraph's loads_typed, the
        # store's fast loader) must come through loads_typed: the refusal raised inside an
        # ormsgpack hook only survives there.
        self._unpack_ext_hook: Any = None

    @property
    def _allowed(self) -> set[tuple[str, ...]]:
        """The ``allowed_types`` as ``(module, name)`` pairs (LangGraph keeps them so)."""
        return self._allowed_msgpack_modules or set()

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> StrictSerializer:
        extra = {(t.__module__, t.__name__) if isinstance(t, type) else t for t in extra_allowlist}
        merged = self._allowed | extra
        if merged == self._allowed:
            return self
        clone = copy.copy(self)
        clone._allowed_msgpack_modules = set(merged)
        return clone

    # --- write ---------------------------------------------------------------------------

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None or isinstance(obj, (bytes, bytearray)):
            return super().dumps_typed(obj)
        try:
            return "msgpack", ormsgpack.packb(obj, option=_OPTIONS)
        except (ormsgpack.MsgpackEncodeError, TypeError):
            pass
        try:
            type_, data = super().dumps_typed(obj)
        except (ormsgpack.MsgpackEncodeError, TypeError) as exc:
            raise DefinitionError(
                f"cannot checkpoint a value of type {type(obj).__module__}."
                f"{type(obj).__qualname__}: {exc}. Keep graph state to plain data (dict, list, "
                "str, numbers) and dataclasses, pydantic models or Enums defined at module level"
            ) from None
        if type_ == "msgpack":
            self._check_writable(data)
        return type_, data

    def _check_writable(self, data: bytes) -> None:
        """Raise DefinitionError when ``data`` names a type that would be refused on read."""
        allowed = self._allowed
        problems: list[_Refused] = []

        def hook(code: int, payload: bytes) -> None:
            if code not in _TYPED_CODES and code != EXT_DELTA_SNAPSHOT:
                return
            tup = ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            if code == EXT_DELTA_SNAPSHOT:
                return
            module, name = str(tup[0]), str(tup[1])
            if code == EXT_METHOD_SINGLE_ARG:
                if (module, name, str(tup[3])) not in SAFE_MSGPACK_METHODS:
                    problems.append(_method_refusal(module, name, str(tup[3])))
            elif (module, name) in allowed:
                if getattr(sys.modules.get(module), name, None) is None:
                    problems.append(
                        _Refused(
                            f"{module}.{name}",
                            "that name cannot be found in its module",
                            "Define the class at module level (not inside a function or "
                            "another class)",
                        )
                    )
            elif (module, name) not in SAFE_MSGPACK_TYPES:
                refused = _refusal(module, name)
                if refused is not None:
                    problems.append(refused)

        ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        if problems:
            first = problems[0]
            raise DefinitionError(
                f"cannot checkpoint a value of type {first.dotted}: it could not be read back "
                f"({first.reason}). {first.fix}"
            )

    # --- read ----------------------------------------------------------------------------

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_ == "msgpack":
            return self._unpack(payload)
        if type_ == "pickle":
            raise UnsafeCheckpointValue(
                "refused a checkpoint value of type 'pickle': unpickling can run any code, "
                "and aworld-graph never writes pickle, so another tool wrote this row or it "
                "was tampered with. It was not unpickled. Rewrite that value without pickle "
                "(plain data, dataclasses, pydantic models) or delete the row"
            )
        return super().loads_typed(data)

    def _unpack(self, payload: bytes) -> Any:
        failed: list[Exception] = []

        def hook(code: int, data: bytes) -> Any:
            try:
                return self._rebuild(code, data, hook)
            except Exception as exc:
                failed.append(exc)  # ormsgpack replaces an ext_hook's error with its own
                raise

        try:
            return ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        except Exception:
            if failed:  # the first is the innermost: the one that says what went wrong
                raise failed[0] from None
            raise

    def _rebuild(self, code: int, data: bytes, hook: Callable[[int, bytes], Any]) -> Any:
        """One extension value, rebuilt only if the rule allows its type."""
        if code == EXT_DELTA_SNAPSHOT:
            return _DeltaSnapshot(
                ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            )
        if code == EXT_NUMPY_ARRAY:  # dtype, shape and buffer: data only, as LangGraph reads it
            np = importlib.import_module("numpy")
            dtype, shape, order, buf = ormsgpack.unpackb(data, option=ormsgpack.OPT_NON_STR_KEYS)
            return np.frombuffer(buf, dtype=np.dtype(dtype)).reshape(shape, order=order)
        if code not in _TYPED_CODES:
            raise UnsafeCheckpointValue(
                f"refused a checkpoint value with msgpack extension code {code}: this version "
                "does not know it (written by a newer LangGraph, or tampered with). Upgrade "
                "langgraph-checkpoint, or delete the row"
            )
        tup = ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        module, name, arg = str(tup[0]), str(tup[1]), tup[2]
        if code == EXT_METHOD_SINGLE_ARG and (module, name, tup[3]) not in SAFE_MSGPACK_METHODS:
            raise _unsafe(_method_refusal(module, name, str(tup[3])))
        target = self._target(module, name)
        try:
            if code == EXT_CONSTRUCTOR_SINGLE_ARG:
                return target(arg)
            if code == EXT_CONSTRUCTOR_POS_ARGS:
                if (module, name) == ("langgraph.types", "Send") and len(arg) == 3:
                    return target(arg[0], arg[1], timeout=arg[2])
                return target(*arg)
            if code == EXT_CONSTRUCTOR_KW_ARGS:
                return target(**arg)
            if code == EXT_METHOD_SINGLE_ARG:
                return getattr(target, tup[3])(arg)
            try:
                return target(**arg)
            except Exception:  # pydantic: keep the fields even if validation changed since
                build = target.construct if code == EXT_PYDANTIC_V1 else target.model_construct
                return build(**arg)
        except Exception as exc:
            logger.warning(
                "Could not rebuild %s.%s from a checkpoint (%s: %s); returning its stored data",
                module,
                name,
                type(exc).__name__,
                exc,
            )
            return arg

    def _target(self, module: str, name: str) -> Any:
        """The class or function ``module.name`` if the rule allows it, else refuse."""
        if (module, name) in SAFE_MSGPACK_TYPES or (module, name) in self._allowed:
            # LangGraph's own list or the application's explicit one: importing is trusted
            found = sys.modules.get(module) or importlib.import_module(module)
            target = getattr(found, name, None)
            if target is None:
                raise _unsafe(
                    _Refused(
                        f"{module}.{name}",
                        "that name cannot be found in its module",
                        "Check that the class still exists under that name",
                    )
                )
            return target
        refused = _refusal(module, name)
        if refused is not None:
            raise _unsafe(refused)
        return getattr(sys.modules[module], name)


def _method_refusal(module: str, name: str, method: str) -> _Refused:
    return _Refused(
        f"{module}.{name}",
        f"the method call {module}.{name}.{method}() is not one LangGraph trusts",
        "Store the value as plain data or a dataclass/pydantic model instead",
    )


def _unsafe(refused: _Refused) -> UnsafeCheckpointValue:
    return UnsafeCheckpointValue(
        f"refused to rebuild a checkpoint value of type {refused.dotted}: {refused.reason}. "
        f"Nothing was called. {refused.fix}"
    )
