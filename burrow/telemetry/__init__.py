"""What the server did and how long it took, from the journal: Prometheus metrics
(metrics.py) and OpenTelemetry traces (traces.py), both fed by one reading of the committed
events (timeline.py), so the figures and the journal can never disagree."""
