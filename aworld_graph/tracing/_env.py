"""Setting up an OpenTelemetry ``TracerProvider`` from the standard ``OTEL_*`` environment,
for :func:`aworld_graph.tracing.configure` when the application has set none.

The OTLP exporter retries a failed export until its timeout (10 s by default). Where nothing
listens at the endpoint (the connection is refused) that only delays the exit of a process
whose spans go to a collector that is not running, with a warning per retry; so each batch
first checks that the endpoint accepts a connection, and a refused one drops the batch with
one warning (again only after a batch got through).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace

from ..errors import ConfigError

__all__ = ["global_provider", "provider_from_env", "version"]


@functools.cache
def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aworld-graph")
    except PackageNotFoundError:
        return "0"


def provider_from_env() -> Any:
    """An SDK ``TracerProvider`` built from the ``OTEL_*`` environment, or ``None`` when the
    SDK is not installed or ``OTEL_SDK_DISABLED`` is true."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return None
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "aworld-graph"}))
    provider = TracerProvider(resource=resource)
    for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(","):
        exporter = _exporter(name.strip().lower())
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter(name: str) -> Any:
    if name in ("none", ""):
        return None
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER names {name!r}; aworld-graph sets up 'otlp', 'console' or "
            "'none' (for another exporter, build a TracerProvider and pass it to "
            "tracing.configure(tracer_provider=...))"
        )
    protocol = os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if protocol.strip() not in ("", "http/protobuf"):
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: the otel extra ships the OTLP exporter "
            "over HTTP (http/protobuf); unset the variable, or build a TracerProvider with "
            "your exporter and pass it to tracing.configure(tracer_provider=...)"
        )
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigError(
            "tracing.configure(): the OTLP exporter is not installed; "
            "pip install 'aworld-graph[otel]' (or set OTEL_TRACES_EXPORTER=console)"
        ) from None
    return _refused_batches_dropped(OTLPSpanExporter())


def _endpoint() -> tuple[str, str]:
    """The OTLP/HTTP traces URL the exporter sends to, and how to stop sending there."""
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces, "unset OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if base:
        return base.rstrip("/") + "/v1/traces", "unset OTEL_EXPORTER_OTLP_ENDPOINT"
    return "http://localhost:4318/v1/traces", "set OTEL_TRACES_EXPORTER=none"


def _refused(url: str) -> bool:
    """Whether a connection to ``url``'s host and port is refused (nothing listens there);
    any other failure is left to the exporter, which reports and retries it."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    try:
        socket.create_connection((parts.hostname or "localhost", port), timeout=1.0).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def _refused_batches_dropped(exporter: Any) -> Any:
    """``exporter`` behind a check that drops a batch for an endpoint that refuses connections
    (see the module docstring)."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    url, off = _endpoint()
    log = logging.getLogger("aworld_graph.tracing")

    class RefusedDropped(SpanExporter):
        def __init__(self) -> None:
            self.warned = False

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            if _refused(url):
                if not self.warned:
                    self.warned = True
                    log.warning(
                        "spans not exported: nothing listens at %s; start the collector, or "
                        "%s to run without tracing",
                        url,
                        off,
                    )
                return SpanExportResult.FAILURE
            self.warned = False
            result: SpanExportResult = exporter.export(spans)
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(exporter.force_flush(timeout_millis))

    return RefusedDropped()


def global_provider() -> Any:
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current
    provider = provider_from_env()
    if provider is None:  # no SDK: the proxy stays a no-op until the app sets a provider
        return current
    trace.set_tracer_provider(provider)
    return trace.get_tracer_provider()
