"""The server's telemetry, built once by the composition root and fed by the journal.

The OpenTelemetry SDK is imported only when spans go somewhere (an OTLP endpoint is
configured, or a span processor is given): a server without one never loads it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burrow.telemetry.metrics import Metrics
from burrow.telemetry.timeline import TelemetrySink, Timeline

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

    from burrow.telemetry.traces import Traces


@dataclass
class Telemetry:
    metrics: Metrics
    traces: Traces | None  # only when spans go somewhere (OTLP configured, or a test's)
    timeline: Timeline  # the journal observer feeding both

    def close(self) -> None:
        if self.traces is not None:
            self.traces.shutdown()


def otlp_configured() -> bool:
    """Whether the SDK's own variables name an OTLP endpoint for traces."""
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def open_telemetry(span_processor: SpanProcessor | None = None) -> Telemetry:
    metrics = Metrics()
    if span_processor is None and not otlp_configured():
        return Telemetry(metrics, None, Timeline([metrics]))
    from burrow.telemetry.traces import Traces, otlp_processor

    traces = Traces(span_processor or otlp_processor())
    sinks: list[TelemetrySink] = [metrics, traces]
    return Telemetry(metrics, traces, Timeline(sinks))
