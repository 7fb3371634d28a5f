"""Finding the processes a test started, by a marker in their environment that every process
they start inherits (``AWORLD_TEST_MARK=…``): Ray's daemons and workers included."""

from __future__ import annotations

import os
from pathlib import Path

MARK_ENV = "AWORLD_TEST_MARK"


def marked(mark: str) -> list[int]:
    """The ids of the running processes whose environment holds ``AWORLD_TEST_MARK=mark``."""
    needle = f"{MARK_ENV}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry))
    return found
