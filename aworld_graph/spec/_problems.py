"""Problems found in spec files, and the one exception that carries all of them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DefinitionError

__all__ = ["Problem", "SpecError", "did_you_mean", "field_path"]


@dataclass(kw_only=True, frozen=True)
class Problem:
    """One mistake in a spec file."""

    file: str
    """The file, relative to the working directory when possible."""
    line: int | None
    """1-based line of the field (``None`` when the file could not be read at all)."""
    field: str
    """Where in the file: a dotted path such as ``nodes[2].tools[0]`` (empty: the whole file)."""
    message: str
    """What is wrong."""
    fix: str = ""
    """What to do about it."""
    warning: bool = False
    """A warning: the file loads, but probably not as meant (e.g. a team with no leader named)."""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        kind = "warning: " if self.warning else ""
        text = f"{where}: {self.field + ': ' if self.field else ''}{kind}{self.message}"
        return f"{text}; fix: {self.fix}" if self.fix else text


class SpecError(DefinitionError):
    """A workflow or node card has problems; ``problems`` lists every one of them (warnings
    too, though warnings alone never raise it)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        files = sorted({p.file for p in self.problems})
        head = f"{len(self.problems)} problem(s) in {', '.join(files)}:"
        super().__init__("\n".join([head, *(f"  - {p}" for p in self.problems)]))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def field_path(path: Sequence[Any]) -> str:
    """``("nodes", 2, "tools", 0)`` -> ``nodes[2].tools[0]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
