"""Setting up an OpenTelemetry ``TracerProvider`` from the standard ``OTEL_*`` environment,
for :func:`aworld_graph.tracing.configure` when the application has set none."""

from __future__ import annotations

import functools
import os
from typing import Any

from opentelemetry import trace

from .errors import ConfigError

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
    return OTLPSpanExporter()


def global_provider() -> Any:
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current
    provider = provider_from_env()
    if provider is None:  # no SDK: the proxy stays a no-op until the app sets a provider
        return current
    trace.set_tracer_provider(provider)
    return trace.get_tracer_provider()
