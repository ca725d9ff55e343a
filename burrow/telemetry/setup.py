"""The server's telemetry, built once by the composition root and fed by the journal."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.sdk.trace import SpanProcessor

from burrow.telemetry.metrics import Metrics
from burrow.telemetry.timeline import TelemetrySink, Timeline
from burrow.telemetry.traces import Traces, otlp_configured, otlp_processor


@dataclass
class Telemetry:
    metrics: Metrics
    traces: Traces | None  # only when spans go somewhere (OTLP configured, or a test's)
    timeline: Timeline  # the journal observer feeding both

    def close(self) -> None:
        if self.traces is not None:
            self.traces.shutdown()


def open_telemetry(span_processor: SpanProcessor | None = None) -> Telemetry:
    metrics = Metrics()
    processor = span_processor or (otlp_processor() if otlp_configured() else None)
    traces = Traces(processor) if processor is not None else None
    sinks: list[TelemetrySink] = [metrics] if traces is None else [metrics, traces]
    return Telemetry(metrics, traces, Timeline(sinks))
