"""``aworld-graph`` command line: a thin layer over the library.

Each sub-module adds its commands to :data:`main`.
"""

from __future__ import annotations

from . import run as _run  # noqa: F401  (registers commands)
from ._app import main

__all__ = ["main"]
