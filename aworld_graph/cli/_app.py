"""The click group every CLI module adds its commands to, and the error boundary.

Library errors (:class:`~aworld_graph.errors.AWorldGraphError`) and bad files become one
line on stderr and exit code 1; they never print a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import AWorldGraphError

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = (
    "Checkpoint store: a SQLite file or a postgresql:// URL (default: $AWORLD_GRAPH_DB or "
    "checkpoints/aworld.db)."
)


def db_option(help: str = DB_HELP) -> Callable[[F], F]:
    """The ``--db FILE`` option every command that reads or writes runs shares."""
    return click.option("--db", "db", type=click.Path(dir_okay=False), default=None, help=help)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AWorldGraphError as exc:
            raise click.ClickException(str(exc)) from None
        except (OSError, ValueError) as exc:
            if isinstance(exc, click.ClickException):
                raise
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
        except KeyboardInterrupt:
            click.echo("interrupted; resume with `aworld-graph resume THREAD`", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="aworld-graph")
def main() -> None:
    """aworld-graph: multi-agent systems as LangGraph graphs with SQLite trajectories."""
