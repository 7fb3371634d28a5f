"""The click group every CLI module adds its commands to, and the error boundary.

Library errors (:class:`~aworld_graph.errors.AWorldGraphError`) and bad files become one
line on stderr and exit code 1; they never print a traceback. While a command runs, what it
writes to stdout and stderr has configured secrets and credential-shaped strings replaced
(:func:`~aworld_graph.secrets.scrub_text`), and log records of the library and the packages
under it reach stderr as one ``warning: …`` line each, never a traceback. A reader that closes
stdout early (``aworld-graph threads | head``) ends the command quietly with status 141, as
SIGPIPE ends other Unix tools.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from ..errors import AWorldGraphError
from ..secrets import scrub_text

F = TypeVar("F", bound=Callable[..., Any])

CLOSED_PIPE_STATUS = 141
"""Exit status when stdout's reader has gone: 128 + SIGPIPE, what a shell reports for a tool
that SIGPIPE ended."""

DB_HELP = (
    "Checkpoint store: a SQLite file or a postgresql:// URL (default: $AWORLD_GRAPH_DB or "
    "checkpoints/aworld.db)."
)


def db_option(help: str = DB_HELP) -> Callable[[F], F]:
    """The ``--db FILE`` option every command that reads or writes runs shares."""
    return click.option("--db", "db", type=click.Path(dir_okay=False), default=None, help=help)


class _Scrubbed:
    """A text stream whose writes have secrets replaced; everything else is the stream's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: Any) -> Any:
        return self._inner.write(scrub_text(text) if isinstance(text, str) else text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _OneLine(logging.Handler):
    """A log record as one ``warning: …`` line on stderr: no traceback, secrets replaced."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage().strip().splitlines()
            head = text[0] if text else record.msg
            sys.stderr.write(f"{record.levelname.lower()}: {scrub_text(str(head))[:500]}\n")
        except Exception:  # logging must never break the command
            self.handleError(record)


@contextmanager
def _guarded_output() -> Iterator[None]:
    out, err = sys.stdout, sys.stderr
    root = logging.getLogger()
    handler = _OneLine(logging.WARNING)
    root.addHandler(handler)
    sys.stdout, sys.stderr = _Scrubbed(out), _Scrubbed(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
        root.removeHandler(handler)


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null, so that flushing what is still buffered
    when the interpreter exits cannot fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's captured stream)
        pass


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _guarded_output():
                return super().invoke(ctx)
        except BrokenPipeError:  # the reader of stdout has gone: nothing left to say to anyone
            _stdout_to_devnull()
            sys.exit(CLOSED_PIPE_STATUS)
        except AWorldGraphError as exc:
            raise click.ClickException(scrub_text(str(exc))) from None
        except (OSError, ValueError) as exc:
            if isinstance(exc, click.ClickException):
                # click declares message Final, yet only reads it when the error is shown;
                # scrubbing it in place keeps the exception's class and exit code.
                exc.message = scrub_text(exc.message)  # type: ignore[misc]
                raise
            raise click.ClickException(scrub_text(f"{type(exc).__name__}: {exc}")) from None
        except KeyboardInterrupt:
            click.echo("interrupted; resume with `aworld-graph resume THREAD`", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="aworld-graph")
def main() -> None:
    """aworld-graph: multi-agent systems as LangGraph graphs with SQLite or PostgreSQL
    trajectories. With an OTLP exporter set in the standard OTEL_* environment
    (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER…) runs are traced with OpenTelemetry."""
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    if exporter not in ("", "none") or (endpoint and exporter != "none"):
        from .. import tracing

        tracing.configure()
