"""OpenTelemetry traces of runs: a `burrow.run` span per run with a child per model call
(`burrow.model`, tokens and time to first token) and per tool call (`burrow.tool`), and a
`burrow.sandbox.start` span per sandbox start or wake; all carry `burrow.conversation_id`
and `burrow.run_id`. Exported by OTLP/HTTP when an endpoint is configured
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, the SDK's own
variables), or to any span processor given (tests use an in-memory exporter); only then is
this module (and the SDK) imported (setup.py)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from burrow.telemetry.timeline import Span

CONVERSATION, RUN = "burrow.conversation_id", "burrow.run_id"


def otlp_processor() -> SpanProcessor:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return BatchSpanProcessor(OTLPSpanExporter())


class Traces:
    def __init__(self, processor: SpanProcessor) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": "burrow"}))
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("burrow")
        self._runs: dict[str, trace.Span] = {}

    def shutdown(self) -> None:
        for span in self._runs.values():  # runs still going at shutdown: ended, marked
            span.set_attribute("burrow.unfinished", True)
            span.end()
        self._runs.clear()
        self.provider.shutdown()

    # TelemetrySink

    def run_started(self, cid: str, run_id: str, start_ns: int) -> None:
        attributes = {CONVERSATION: cid, RUN: run_id}
        span = self.tracer.start_span("burrow.run", start_time=start_ns, attributes=attributes)
        self._runs[run_id] = span

    def run_finished(self, span: Span) -> None:
        run = self._runs.pop(span.run_id or "", None)
        if run is None:
            return
        for key, value in span.attributes.items():
            run.set_attribute(f"burrow.{key}", value)
        if span.attributes["status"] == "failed":
            run.set_status(trace.StatusCode.ERROR, span.attributes["error"] or "failed")
        run.end(end_time=span.end_ns)

    def model_call(self, span: Span) -> None:
        self._child("burrow.model", span, {f"burrow.{k}": v for k, v in span.attributes.items()})

    def tool_call(self, span: Span) -> None:
        error = span.attributes["is_error"]
        self._child("burrow.tool", span, {"burrow.tool": span.name, "burrow.is_error": error})

    def sandbox_start(self, span: Span) -> None:
        attributes = {CONVERSATION: span.cid, "burrow.status": span.name}
        started = self.tracer.start_span(
            "burrow.sandbox.start", start_time=span.start_ns, attributes=attributes
        )
        started.end(end_time=span.end_ns)

    def retried(self, cid: str, run_id: str | None, reason: str) -> None:
        run = self._runs.get(run_id or "")
        if run is not None:
            run.add_event("burrow.retry", {"reason": reason})

    def committed(self, events: int, lag_s: float) -> None:
        pass

    def _child(self, name: str, span: Span, attributes: dict[str, object]) -> None:
        run = self._runs.get(span.run_id or "")
        context = trace.set_span_in_context(run) if run is not None else None
        child = self.tracer.start_span(
            name,
            context=context,
            start_time=span.start_ns,
            attributes={CONVERSATION: span.cid, RUN: span.run_id or "", **attributes},  # type: ignore[dict-item]
        )
        child.end(end_time=span.end_ns)
