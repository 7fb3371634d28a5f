"""Where a batch of runs goes: this process (the local engine) or a Ray cluster.

``RunConfig(engine_name="ray", worker_num=N)`` given to ``Runners.run_task``,
``Runners.rollout``, the meta-learning evaluation or ``optimize`` sends the batch to N
long-lived Ray worker actors, a chunk each (:mod:`._ray`). Tasks travel as specs
(:mod:`._specs`), the workers write to the driver's checkpoint store and send back each
run's response as the local engine's loop built it (:mod:`._worker`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ._specs import remember

if TYPE_CHECKING:
    from ..task import TaskResponse

__all__ = ["progress", "remember", "shutdown"]


def shutdown() -> None:
    """Stop the Ray worker actors this process started (they are kept between batches)."""
    from ._ray import shutdown as stop

    stop()


@contextmanager
def progress(
    total: int, enabled: bool | None, label: str = "runs"
) -> Iterator[Callable[[TaskResponse], None]]:
    """A rich progress bar on stderr for a batch of ``total`` runs; yields the function to call
    with each response. ``enabled=None``: shown when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total < 1:
        yield lambda response: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    counts = {"failed": 0, "retried": 0}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[extra]}"),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        job = bar.add_task(label, total=total, extra="")

        def tick(response: TaskResponse) -> None:
            counts["failed"] += response.status == "error"
            counts["retried"] += bool(response.retried)
            extra = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
            bar.update(job, advance=1, extra=extra)

        yield tick
