"""``aworld-graph`` command line: a thin layer over the library.

Each sub-module adds its commands to :data:`main`.
"""

from __future__ import annotations

from . import checkpoints as _checkpoints  # noqa: F401  (registers commands)
from . import env as _env  # noqa: F401
from . import export as _export  # noqa: F401
from . import fork as _fork  # noqa: F401
from . import optimize as _optimize  # noqa: F401
from . import run as _run  # noqa: F401
from . import serve as _serve  # noqa: F401
from . import spec as _spec  # noqa: F401
from . import viz as _viz  # noqa: F401
from ._app import main

__all__ = ["main"]
