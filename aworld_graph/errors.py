"""One exception hierarchy, split by who must act.

* :class:`DefinitionError` – the developer wired something wrong (a graph, a spec, a config).
* :class:`RuntimeFailure` – something outside the graph failed (an LLM endpoint, an MCP server,
  the checkpoint database). Usually transient or operational.
* :class:`ModelRetry` – a message meant for the model: it goes back to the model as a tool
  message so that it can correct itself.

Every error message names the thing at fault and says what to do about it.
"""

from __future__ import annotations

__all__ = [
    "AWorldGraphError",
    "DefinitionError",
    "ConfigError",
    "RuntimeFailure",
    "ModelError",
    "ModelNotAvailable",
    "ToolError",
    "ModelRetry",
    "UnexpectedModelCall",
    "ThreadBusy",
    "UnsafeCheckpointValue",
]


class AWorldGraphError(Exception):
    """Base class of every error raised by aworld-graph."""


class DefinitionError(AWorldGraphError):
    """The graph, agent, tool or spec is defined wrongly; the developer must fix it."""


class ConfigError(DefinitionError):
    """A configuration value (model endpoint, environment variable, file) is missing or bad."""


class RuntimeFailure(AWorldGraphError):
    """Something outside the graph failed while running (model endpoint, server, database)."""


class ModelError(RuntimeFailure):
    """The model endpoint failed after all retries, or answered with something unusable."""


class ModelNotAvailable(ModelError, ConfigError):
    """No model endpoint is configured and the embedded local model cannot be started."""


class ToolError(RuntimeFailure):
    """A tool failed in a way that is reported back to the model and into the trajectory."""


class ModelRetry(AWorldGraphError):
    """Raise inside a tool to send ``message`` back to the model so it can try again."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnexpectedModelCall(AWorldGraphError):
    """A test fake was called more often than scripted, or a test reached a real endpoint."""


class ThreadBusy(RuntimeFailure):
    """Another process or worker is running this thread now; its checkpoint chain would fork.

    Wait for the holder to finish (or for its lease to expire if it died), or run under
    another thread id.
    """

    def __init__(self, message: str, *, thread_id: str, holder: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.holder = holder


class UnsafeCheckpointValue(RuntimeFailure):
    """A stored checkpoint value names a type this process will not rebuild (a callable, a
    process or file class, a pickle payload): it is refused, never instantiated."""
