"""What an optimization may use (:class:`Budget`) and has used (:class:`Spent`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["Budget", "Spent"]


@dataclass(kw_only=True)
class Spent:
    """What an optimization has used so far."""

    llm_calls: int = 0
    """Model calls (the workflow's runs and the optimizer agent's)."""
    tokens: int = 0
    """Tokens of those calls."""
    seconds: float = 0.0
    """Time spent evaluating and in the optimizer agent."""
    iterations: int = 0
    """Search iterations done."""


_UNITS = {"s": 1, "m": 60, "h": 3600}


@dataclass(kw_only=True)
class Budget:
    """Limits on an optimization; ``None`` is no limit. The search stops before an iteration
    that would pass one (keeping enough for the final test evaluation)."""

    llm_calls: int | None = None
    """Most model calls."""
    tokens: int | None = None
    """Most tokens."""
    seconds: float | None = None
    """Most seconds of evaluation and optimizer-agent time."""
    iterations: int | None = None
    """Most search iterations."""

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``"calls=400,tokens=200000,time=20m,iterations=12"``; a bare number is LLM calls."""
        budget = cls()
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            if not sep:
                key, value = "calls", part
            key = key.strip().lower()
            try:
                if key in ("calls", "llm_calls"):
                    budget.llm_calls = int(float(value))
                elif key == "tokens":
                    budget.tokens = int(float(value))
                elif key in ("time", "seconds"):
                    m = re.fullmatch(r"\s*([0-9.]+)\s*([smh]?)\s*", value)
                    if m is None:
                        raise ValueError(value)
                    budget.seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
                elif key in ("iterations", "iters"):
                    budget.iterations = int(value)
                else:
                    raise ConfigError(
                        f"budget {text!r}: unknown limit {key!r}; use calls=, tokens=, time= or iterations="
                    )
            except ValueError:
                raise ConfigError(
                    f"budget {text!r}: {part!r} is not a number (e.g. calls=400, time=20m)"
                ) from None
        if all(
            v is None for v in (budget.llm_calls, budget.tokens, budget.seconds, budget.iterations)
        ):
            raise ConfigError(f"budget {text!r} sets no limit; e.g. calls=400 or time=20m")
        return budget

    def __str__(self) -> str:
        parts = [
            f"{name}={value}"
            for name, value in (
                ("calls", self.llm_calls),
                ("tokens", self.tokens),
                ("time", f"{self.seconds:g}s" if self.seconds is not None else None),
                ("iterations", self.iterations),
            )
            if value is not None
        ]
        return ",".join(parts) or "unlimited"
