"""Run the synthetic optimization and die (``os._exit``) at the N-th model call, like a kill.

python -m tests.meta._crash DIR N
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from aworld_graph.meta import synthetic as syn
from aworld_graph.testing import FunctionModel
from tests.meta.helpers import run_synthetic


def main(directory: Path, after: int) -> None:
    count = 0
    student = syn.student_model().fn

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        nonlocal count
        count += 1
        if count == after:
            os._exit(3)
        return student(messages, tools)

    asyncio.run(run_synthetic(directory, model=FunctionModel(reply)))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
