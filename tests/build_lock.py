"""One builder at a time for what the tests build once under ``.cache/`` (a venv, a node
project): with two pytest workers (``-n 2``), two test files may reach the same build at once."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def building(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<folder>.lock`` (beside ``folder``) for the block; another
    process asking for it waits until the block ends. Check again inside the block whether
    the build is still needed: the other process may have done it meanwhile."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
