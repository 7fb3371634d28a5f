"""``${VAR}`` and ``${VAR:-default}`` in configuration values, replaced from the environment.

One walker for every reader that takes them (workflow files, ``mcpServers`` configs); what
an unset variable becomes, and how it is reported, is the reader's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["VAR", "substitute_vars"]

VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
"""``${NAME}`` or ``${NAME:-default}``."""

Path = tuple[Any, ...]
"""Where a value lies: mapping keys and list indexes from the top."""


def substitute_vars(
    value: Any,
    unset: Callable[[str, Path], str],
    *,
    path: Path = (),
    raw: Collection[Any] = (),
) -> Any:
    """``value`` with ``${VAR}`` replaced in every string of it (through mappings and lists):
    by the variable's value, else its default, else ``unset(var, path)`` (which notes the
    problem and says what to write instead). The values of mapping keys in ``raw`` are left
    as they are."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            var, default = match.group(1), match.group(2)
            if var in os.environ:
                return os.environ[var]
            if default is not None:
                return default
            return unset(var, path)

        return VAR.sub(replace, value)
    if isinstance(value, Mapping):
        return {
            k: v if k in raw else substitute_vars(v, unset, path=(*path, k), raw=raw)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [substitute_vars(v, unset, path=(*path, i), raw=raw) for i, v in enumerate(value)]
    return value
