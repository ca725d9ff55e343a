"""Prometheus metrics (`GET /metrics`): counters and histograms fed by the timeline, gauges
read at scrape time from the parts that hold the state (sandbox pool, open streams)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from burrow.telemetry.timeline import Span

# Seconds: tool calls run from milliseconds (a file read) to the bash timeout.
TOOL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
SECONDS = {
    "burrow_run_seconds_sum": "run_seconds",
    "burrow_model_seconds_sum": "model_seconds",
    "burrow_tool_seconds_sum": "tool_seconds",
}
LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)


Read = Callable[[], Mapping[str, int]]  # {label value: count}, at each scrape


class Metrics:
    """The server's series; `add_gauge` adds one read from its owner at each scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.runs = Counter("burrow_runs", "Runs finished, by status", ["status"], registry=r)
        self.budget_stops = Counter(
            "burrow_budget_stops", "Runs stopped by a budget, by limit", ["kind"], registry=r
        )
        self.run_seconds = Histogram(
            "burrow_run_seconds", "Run wall time", buckets=MODEL_BUCKETS, registry=r
        )
        self.tool_seconds = Histogram(
            "burrow_tool_seconds", "Tool call latency", ["tool"], buckets=TOOL_BUCKETS, registry=r
        )
        self.model_seconds = Histogram(
            "burrow_model_seconds", "Model call latency", buckets=MODEL_BUCKETS, registry=r
        )
        self.first_token_seconds = Histogram(
            "burrow_model_first_token_seconds",
            "Model call: asked -> first output",
            buckets=MODEL_BUCKETS,
            registry=r,
        )
        self.tokens = Counter("burrow_model_tokens", "Tokens", ["direction"], registry=r)
        self.retries = Counter("burrow_model_retries", "Model calls retried", registry=r)
        self.sandbox_start_seconds = Histogram(
            "burrow_sandbox_start_seconds",
            "Sandbox start or wake, by outcome",
            ["status"],
            buckets=TOOL_BUCKETS,
            registry=r,
        )
        self.journal_lag = Histogram(
            "burrow_journal_commit_lag_seconds",
            "An event's timestamp -> its batch committed and published",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.events = Counter("burrow_journal_events", "Events committed", registry=r)
        self._gauges = _Gauges()
        r.register(self._gauges)

    def add_gauge(self, name: str, help_text: str, label: str, read: Read) -> None:
        self._gauges.gauges[name] = (help_text, label, read)

    def totals(self) -> dict[str, float]:
        """Since this process started: runs by status, and seconds in runs, model calls and
        tools (the sums of their histograms) — the admin page's time split."""
        out: dict[str, float] = {}
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name == "burrow_runs_total":
                    out[f"runs_{sample.labels['status']}"] = sample.value
                elif sample.name in SECONDS:
                    key = SECONDS[sample.name]
                    out[key] = out.get(key, 0.0) + sample.value
        return out

    def scrape(self) -> bytes:
        return generate_latest(self.registry)

    # TelemetrySink

    def run_started(self, cid: str, run_id: str, start_ns: int) -> None:
        pass

    def run_finished(self, span: Span) -> None:
        self.runs.labels(span.attributes["status"]).inc()
        self.run_seconds.observe(span.seconds)
        if span.attributes["budget_kind"]:
            self.budget_stops.labels(span.attributes["budget_kind"]).inc()

    def model_call(self, span: Span) -> None:
        self.model_seconds.observe(span.seconds)
        first = span.attributes.get("time_to_first_token_s")
        if first is not None:
            self.first_token_seconds.observe(first)
        self.tokens.labels("prompt").inc(span.attributes["prompt_tokens"])
        self.tokens.labels("completion").inc(span.attributes["completion_tokens"])

    def tool_call(self, span: Span) -> None:
        self.tool_seconds.labels(span.name).observe(span.seconds)

    def sandbox_start(self, span: Span) -> None:
        self.sandbox_start_seconds.labels(span.name).observe(span.seconds)

    def retried(self, cid: str, run_id: str | None, reason: str) -> None:
        self.retries.inc()

    def committed(self, events: int, lag_s: float) -> None:
        self.events.inc(events)
        self.journal_lag.observe(lag_s)


class _Gauges(Collector):
    def __init__(self) -> None:
        self.gauges: dict[str, tuple[str, str, Read]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, (help_text, label, read) in list(self.gauges.items()):
            family = GaugeMetricFamily(name, help_text, labels=[label])
            for value, count in sorted(read().items()):
                family.add_metric([value], count)
            yield family
